package objects_test

import (
	"context"
	"fmt"
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

// TestValidationMemory validates 10,000- and 50,000-row sheets and measures the heap each
// leaves live (the rows and their errors, which the validation returns) and allocates: the
// memory per row is the same at both sizes — it grows with the rows, never faster — and under
// 1 KiB a row. The 100,000-row bound caps it.
func TestValidationMemory(t *testing.T) {
	dir := stubFiles(t)
	perRow := map[int]float64{}
	for _, n := range []int{10_000, 50_000} {
		var b strings.Builder
		b.WriteString(strings.Join(objects.Headers, ",") + "\n")
		for i := range n {
			file := "page1.tif"
			if i%7 == 3 {
				file = fmt.Sprintf("gone-%d.tif", i)
			}
			fmt.Fprintf(&b, "IMAGE,w%d,f%d,%s,page %d,A,p. %d,,\n", i/4, i, file, i, i)
		}
		sheet := b.String()
		// The least of three runs: what else the process allocates meanwhile only adds.
		live, alloc := int64(math.MaxInt64), uint64(0)
		for range 3 {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			v, err := objects.Validate(t.Context(), strings.NewReader(sheet), objects.Env{FilesDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if len(v.Rows) != n {
				t.Fatalf("%d rows", len(v.Rows))
			}
			runtime.KeepAlive(v)
			live, alloc = min(live, int64(after.HeapAlloc)-int64(before.HeapAlloc)), after.TotalAlloc-before.TotalAlloc
		}
		perRow[n] = float64(live) / float64(n)
		t.Logf("%d rows: %d KiB live after validating (%.0f B a row), %d KiB allocated", n, live>>10, perRow[n], alloc>>10)
	}
	if r := perRow[50_000] / perRow[10_000]; r > 1.25 || perRow[50_000] > 1024 {
		t.Errorf("memory per row %.0f B at 10,000 rows, %.0f B at 50,000: want the same, under 1 KiB", perRow[10_000], perRow[50_000])
	}
}
