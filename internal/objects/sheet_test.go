package objects_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/objects"
)

// stubFiles writes the little files the sheets of testdata/sheets name: each starts with its
// format's magic bytes, which is all a validation reads.
func stubFiles(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"page1.tif":           "II*\x00\x08\x00\x00\x00page one",
		"page2.tif":           "MM\x00*\x00\x00\x00\x08page two",
		"clip.mp4":            "\x00\x00\x00\x20ftypisom\x00\x00\x02\x00",
		"chapters.vtt":        "WEBVTT\n\n00:00.000 --> 00:01.000\nOpening\n",
		"chapters-broken.vtt": "This is not WebVTT\n",
		"plate 002.tif":       "II*\x00\x08\x00\x00\x00plate",
		"notes.txt":           "A transcription.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func validateFile(t *testing.T, name string, env objects.Env) *objects.Validation {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sheets", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := objects.Validate(t.Context(), f, env)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidationFailureModes validates one authored sheet per rule and compares every error of
// every row — its number (Meadow's: the first row after the header is 1), field and message,
// word for word as Meadow gives it — and the file's errors.
func TestValidationFailureModes(t *testing.T) {
	t.Parallel()
	dir := stubFiles(t)
	existing := func(_ context.Context, works, files []string) (map[string]bool, map[string]bool, error) {
		w, f := map[string]bool{}, map[string]bool{}
		for _, a := range works {
			w[a] = a == "w-taken"
		}
		for _, a := range files {
			f[a] = a == "f-taken"
		}
		return w, f, nil
	}
	for _, tc := range []struct {
		file   string
		status string
		errors []string // "ROW FIELD: MESSAGE", the file's with ROW 0
	}{
		{"blank_field.csv", objects.StatusRowFail, []string{"2 filename: cannot be blank",
			"3 description: cannot be blank", "3 label: cannot be blank"}},
		{"invalid_role.csv", objects.StatusRowFail, []string{
			"2 filename: Mime-type: page2.tif, not accepted for work type: IMAGE and file set role: Z.", "2 role: Z is invalid"}},
		{"invalid_work_type.csv", objects.StatusRowFail, []string{"2 work_type: PAINTING is invalid",
			"2 filename: Mime-type: page1.tif, not accepted for work type: PAINTING and file set role: A."}},
		{"invalid_work_image.csv", objects.StatusRowFail, []string{"2 work_image: boolean type required"}},
		{"work_image_role.csv", objects.StatusRowFail, []string{"2 work_image: role P cannot be a work image",
			"4 work_image: role S cannot be a work image"}},
		{"duplicate_accession.csv", objects.StatusRowFail, []string{"1 file_accession_number: f-dup-1 is duplicated on rows 1, 3",
			"3 file_accession_number: f-dup-1 is duplicated on rows 1, 3"}},
		{"accession_exists.csv", objects.StatusRowFail, []string{"2 file_accession_number: f-taken already exists in system"}},
		{"work_accession_exists.csv", objects.StatusRowFail, []string{"1 work_accession_number: w-taken already exists in system"}},
		{"missing_file.csv", objects.StatusRowFail, []string{"2 filename: File not Found: not-there.tif"}},
		{"wrong_mime_type.csv", objects.StatusRowFail, []string{
			"2 filename: Mime-type: clip.mp4, not accepted for work type: IMAGE and file set role: A."}},
		{"accession_with_spaces.csv", objects.StatusRowFail, []string{"2 file_accession_number: cannot have leading or trailing spaces",
			"3 work_accession_number: cannot have leading or trailing spaces"}},
		{"conflicting_work_types.csv", objects.StatusRowFail, []string{"1 work_type: work w-conf has conflicting work_type values",
			"2 work_type: work w-conf has conflicting work_type values"}},
		{"unsafe_filename.csv", objects.StatusRowFail, []string{
			"2 filename: plate 002.tif contains characters that are not safe for S3 object keys:  ",
			"3 filename: scan#1?.tif contains characters that are not safe for S3 object keys: #, ?"}},
		{"wrong_headers.csv", objects.StatusFileFail, []string{"0 header: Required header missing: filename",
			"0 header: Invalid headers: filenam,structure"}},
		{"missing_work_type.csv", objects.StatusFileFail, []string{"0 header: Required header missing: work_type"}},
		{"invalid_webvtt.csv", objects.StatusRowFail, []string{"2 structure: chapters-broken.vtt is not a valid WebVTT file"}},
		{"missing_webvtt.csv", objects.StatusRowFail, []string{"2 structure: Structure file chapters-gone.vtt not found in the files directory"}},
		{"structure_wrong_kind.csv", objects.StatusRowFail, []string{
			"2 structure: IMAGE works must use .txt files for transcriptions, not .vtt files",
			"3 structure: VIDEO works must use .vtt files for structure, not .txt files",
			"4 structure: Invalid structure file extension .tif for work type VIDEO"}},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".csv"), func(t *testing.T) {
			t.Parallel()
			v := validateFile(t, tc.file, objects.Env{FilesDir: dir, Existing: existing})
			if v.Status != tc.status {
				t.Errorf("status = %s, want %s (file errors %v)", v.Status, tc.status, v.FileErrors)
			}
			if v.Checks.Overall != objects.CheckFail {
				t.Errorf("overall check = %s, want fail", v.Checks.Overall)
			}
			if tc.status == objects.StatusFileFail {
				if v.Checks.File != objects.CheckFail || v.Checks.Rows != objects.CheckPending {
					t.Errorf("checks = %+v, want file fail, rows pending", v.Checks)
				}
			} else if v.Checks.File != objects.CheckPass || v.Checks.Rows != objects.CheckFail {
				t.Errorf("checks = %+v, want file pass, rows fail", v.Checks)
			}
			if got := errorLines(v); !slices.Equal(got, tc.errors) {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.errors, "\n  "))
			}
			for _, r := range v.Rows {
				if want := map[bool]string{true: objects.CheckFail, false: objects.CheckPass}[len(r.Errors) > 0]; r.State != want {
					t.Errorf("row %d state %s, want %s", r.Row, r.State, want)
				}
			}
		})
	}
}

// errorLines lists a validation's errors as "ROW FIELD: MESSAGE" (the file's as row 0),
// checking that each row's message starts with its field.
func errorLines(v *objects.Validation) []string {
	var out []string
	for _, e := range v.FileErrors {
		out = append(out, fmt.Sprintf("0 %s: %s", e.Field, e.Message))
	}
	for _, r := range v.Rows {
		for _, e := range r.Errors {
			line := fmt.Sprintf("%d %s", r.Row, e.Message)
			if !strings.HasPrefix(e.Message, e.Field+": ") {
				line += " (field " + e.Field + ")"
			}
			out = append(out, line)
		}
	}
	return out
}

// TestValidationPasses checks a good sheet: every check passes, every row passes, and the
// works group the rows with the MIME type each file has.
func TestValidationPasses(t *testing.T) {
	t.Parallel()
	dir := stubFiles(t)
	sheet := strings.Join([]string{strings.Join(objects.Headers, ","),
		"IMAGE,w1,f1,page1.tif,front,A,front,true,",
		"IMAGE,w1,f2,page2.tif,back,P,back,false,",
		"VIDEO,w2,f3,clip.mp4,film,A,reel,true,chapters.vtt",
	}, "\n") + "\n"
	v, err := objects.Validate(t.Context(), strings.NewReader(sheet), objects.Env{FilesDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != objects.StatusValid || v.Checks != (objects.Checks{File: "pass", Rows: "pass", Overall: "pass"}) {
		t.Fatalf("status %s checks %+v rows %+v", v.Status, v.Checks, v.Rows)
	}
	works := v.Works()
	if len(works) != 2 || len(works[0].Rows) != 2 || works[1].WorkType != "VIDEO" {
		t.Fatalf("works = %+v", works)
	}
	if m := works[1].Rows[0].Fields["mime_type"]; m != "video/mp4" {
		t.Errorf("clip.mp4 mime type = %q", m)
	}
}

// TestValidationReportsEveryBadRow validates 10,000 rows of which every seventh is bad: each
// bad row is reported with its error, and no good row is.
func TestValidationReportsEveryBadRow(t *testing.T) {
	t.Parallel()
	dir := stubFiles(t)
	var b strings.Builder
	b.WriteString(strings.Join(objects.Headers, ",") + "\n")
	const n = 10_000
	bad := 0
	for i := range n {
		file := "page1.tif"
		if i%7 == 3 {
			file, bad = fmt.Sprintf("gone-%d.tif", i), bad+1
		}
		fmt.Fprintf(&b, "IMAGE,w%d,f%d,%s,page %d,A,p. %d,,\n", i/4, i, file, i, i)
	}
	start := time.Now()
	v, err := objects.Validate(t.Context(), strings.NewReader(b.String()), objects.Env{FilesDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("validated %d rows in %s", n, time.Since(start))
	failed := 0
	for _, r := range v.Rows {
		i := r.Row - 1
		wantBad := i%7 == 3
		if wantBad != (r.State == objects.CheckFail) {
			t.Fatalf("row %d: state %s %+v", r.Row, r.State, r.Errors)
		}
		if wantBad {
			failed++
			if len(r.Errors) != 1 || r.Errors[0].Message != fmt.Sprintf("filename: File not Found: gone-%d.tif", i) {
				t.Fatalf("row %d errors %+v", r.Row, r.Errors)
			}
		}
	}
	if len(v.Rows) != n || failed != bad || v.Status != objects.StatusRowFail {
		t.Fatalf("%d rows, %d failed (want %d), status %s", len(v.Rows), failed, bad, v.Status)
	}
}

// TestValidationBounds: a sheet over the row or size bound is a file error saying which, read
// no further; a canceled context stops the reading.
func TestValidationBounds(t *testing.T) {
	t.Parallel()
	header := "work_type,work_accession_number,file_accession_number,filename,description,role,label,work_image,structure\n"
	rows := func(n int) string {
		return header + strings.Repeat("IMAGE,w1,f1,page1.tif,,A,,,\n", n)
	}
	for _, tc := range []struct{ name, sheet, want string }{
		{"rows", rows(100_001), "the sheet has more than 100000 rows"},
		{"bytes", header + "IMAGE,w1,f1,page1.tif,\"" + strings.Repeat("x", 65<<20) + "\",A,,,\n", "the sheet is larger than 64 MiB"},
	} {
		v, err := objects.Validate(t.Context(), strings.NewReader(tc.sheet), objects.Env{})
		if err != nil || v.Status != objects.StatusFileFail || len(v.FileErrors) != 1 || v.FileErrors[0].Message != tc.want {
			t.Errorf("%s: %+v, %v; want the file error %q", tc.name, v, err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := objects.Validate(ctx, strings.NewReader(rows(10)), objects.Env{}); err != context.Canceled {
		t.Errorf("canceled: %v", err)
	}
}

// generatedSheet is a sheet of n rows made as it is read, so that the test holds none of it:
// every seventh row names a file that is not there, and every thousandth row repeats the file
// accession number of the row before it.
type generatedSheet struct {
	n, i   int
	buf    []byte
	onRows func(i int) // called every 2,500 rows generated
}

func (g *generatedSheet) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.i == 0 {
			g.buf = append(g.buf, strings.Join(objects.Headers, ",")+"\n"...)
		}
		if g.i == g.n {
			return 0, io.EOF
		}
		g.buf = fmt.Appendf(g.buf, "IMAGE,w%d,f%d,%s,page %d,A,p. %d,,\n", g.i/4, sheetAcc(g.i), sheetFile(g.i), g.i, g.i)
		if g.i++; g.i%2500 == 0 && g.onRows != nil {
			g.onRows(g.i)
		}
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func sheetAcc(i int) int {
	if i%1000 == 999 {
		return i - 1
	}
	return i
}

func sheetFile(i int) string {
	if i%7 == 3 {
		return fmt.Sprintf("gone-%d.tif", i)
	}
	return "page1.tif"
}

// TestValidationMemory validates 10,000-, 50,000- and 100,000-row sheets, each generated as it
// is read, handing each row on ([objects.ValidateEach]) as the service does, and samples the
// live heap (after a collection) every 2,500 rows read and every 2,500 rows handed on: the
// peak over what was live before is flat — at 50,000 and 100,000 rows under 1.5 times that at
// 10,000. Every row's errors are checked too: the bad file, and both rows of each duplicated
// accession number.
func TestValidationMemory(t *testing.T) {
	dir := stubFiles(t)
	peaks := map[int]uint64{}
	for _, n := range []int{10_000, 50_000, 100_000} {
		peak := uint64(math.MaxUint64)
		for range 2 { // the least of two: what else the process holds meanwhile only adds
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base, top := ms.HeapAlloc, uint64(0)
			sample := func() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > base {
					top = max(top, ms.HeapAlloc-base)
				}
			}
			sheet := &generatedSheet{n: n, onRows: func(int) { sample() }}
			checked := 0
			v, err := objects.ValidateEach(t.Context(), sheet, objects.Env{FilesDir: dir}, func(r objects.Row) error {
				i := r.Row - 1
				var want []string
				if i%1000 == 998 || i%1000 == 999 {
					acc := sheetAcc(i)
					want = append(want, fmt.Sprintf("file_accession_number: f%d is duplicated on rows %d, %d", acc, acc+1, acc+2))
				}
				if i%7 == 3 {
					want = append(want, "filename: File not Found: "+sheetFile(i))
				}
				var got []string
				for _, e := range r.Errors {
					got = append(got, e.Message)
				}
				if !slices.Equal(got, want) || (len(want) > 0) != (r.State == objects.CheckFail) {
					return fmt.Errorf("row %d: state %s errors %q, want %q", r.Row, r.State, got, want)
				}
				if checked++; checked%2500 == 0 {
					sample()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if v.RowCount != n || checked != n || len(v.Rows) != 0 || v.Status != objects.StatusRowFail {
				t.Fatalf("%d rows: counted %d, handed on %d, held %d, status %s", n, v.RowCount, checked, len(v.Rows), v.Status)
			}
			peak = min(peak, top)
		}
		peaks[n] = peak
		t.Logf("%d rows: peak live heap %d KiB over the start", n, peak>>10)
	}
	for _, n := range []int{50_000, 100_000} {
		if r := float64(peaks[n]) / float64(peaks[10_000]); r > 1.5 {
			t.Errorf("peak heap %d KiB at %d rows, %.2f times the %d KiB at 10,000: want flat (under 1.5 times)", peaks[n]>>10, n, r, peaks[10_000]>>10)
		}
	}
}

// TestValidateHoldsRows: Validate, unlike ValidateEach, returns every row.
func TestValidateHoldsRows(t *testing.T) {
	t.Parallel()
	v, err := objects.Validate(t.Context(), &generatedSheet{n: 2000}, objects.Env{FilesDir: stubFiles(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Rows) != 2000 || v.RowCount != 2000 || v.Rows[1999].Row != 2000 {
		t.Fatalf("%d rows held, %d counted", len(v.Rows), v.RowCount)
	}
}
