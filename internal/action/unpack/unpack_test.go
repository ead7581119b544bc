package unpack

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zip"
	"github.com/klauspost/compress/zstd"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/action/detect"
)

// corpusDir returns the shared test corpus, skipping the test only when it is absent.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "shared", "corpus", "files")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("corpus %s not present", dir)
	}
	return dir
}

type expectation struct {
	File          string  `json:"file"`
	Expect        string  `json:"expect"`
	MinDocuments  int     `json:"min_documents"`
	MaxDocuments  *int    `json:"max_documents"`
	ErrorContains *string `json:"error_contains"`
}

func loadExpected(t testing.TB, dir string) []expectation {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "..", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var es []expectation
	if err := json.Unmarshal(b, &es); err != nil {
		t.Fatal(err)
	}
	return es
}

// tree is what a recursive walk of an archive produced: leaf documents and errors.
type tree struct {
	leaves []string
	errors []string
}

// walk routes an item with detect and, for archives, unpacks it and walks its children, the way
// the documents workflow does. Non-archive items are leaves.
func walk(t testing.TB, name string, data []byte, depth int, tr *tree) {
	t.Helper()
	rec := &actiontest.Recorder{}
	// Only archives need a file: routing the 20,000 leaves of one archive through
	// actiontest.NewTask would cost a temporary directory each.
	task := &action.Task{
		Item: action.Item{Name: name, Depth: depth, Size: int64(len(data))},
		OpenBlob: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		},
	}
	if err := detect.New(detect.Config{}).Run(t.Context(), task, rec); err != nil {
		tr.errors = append(tr.errors, name+": "+err.Error())
		return
	}
	if rec.Events[0] != "detected.archive" {
		tr.leaves = append(tr.leaves, name)
		return
	}
	task = actiontest.NewTask(t, name, rec.ContentType, data, nil, nil)
	task.Item.Depth = depth
	rec = &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), task, rec)
	if err != nil {
		if !action.IsPermanent(err) {
			t.Fatalf("%s: transient error %v", name, err)
		}
		tr.errors = append(tr.errors, name+": "+err.Error())
	}
	for _, c := range rec.Children {
		checkChildName(t, name, c.Name)
		walk(t, c.Name, c.Data, depth+1, tr)
	}
}

func checkChildName(t testing.TB, parent, child string) {
	t.Helper()
	tail, ok := strings.CutPrefix(child, parent+"/")
	if !ok || !utf8.ValidString(child) || !filepath.IsLocal(tail) || tail == "" {
		t.Fatalf("bad child name %q of %q", child, parent)
	}
}

func TestUnpackCorpus(t *testing.T) {
	t.Parallel()
	dir := corpusDir(t)
	n := 0
	for _, e := range loadExpected(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		rec := &actiontest.Recorder{}
		if err := detect.New(detect.Config{}).Run(t.Context(), actiontest.NewTask(t, e.File, "", data, nil, nil), rec); err != nil || rec.Events[0] != "detected.archive" {
			continue
		}
		n++
		t.Run(e.File, func(t *testing.T) {
			t.Parallel()
			var tr tree
			walk(t, e.File, data, 0, &tr)
			docs := len(tr.leaves)
			switch e.Expect {
			case "error":
				if len(tr.errors) == 0 {
					t.Errorf("no error; leaves %d", docs)
				}
			case "documents":
				if docs < e.MinDocuments {
					t.Errorf("%d documents, want at least %d; errors %q", docs, e.MinDocuments, tr.errors)
				}
			}
			if e.MaxDocuments != nil && docs > *e.MaxDocuments {
				t.Errorf("%d documents, want at most %d", docs, *e.MaxDocuments)
			}
			if e.ErrorContains != nil {
				found := false
				for _, m := range tr.errors {
					found = found || strings.Contains(m, *e.ErrorContains)
				}
				if !found {
					t.Errorf("no error contains %q: %q", *e.ErrorContains, tr.errors)
				}
			}
		})
	}
	if n < 15 {
		t.Fatalf("only %d archives in the corpus", n)
	}
}

func runFile(t testing.TB, file string, with map[string]any) (*actiontest.Recorder, error) {
	t.Helper()
	rec := &actiontest.Recorder{}
	task := actiontest.NewFileTask(t, filepath.Join(corpusDir(t), file), "", with, nil)
	return rec, New(Config{}).Run(t.Context(), task, rec)
}

func childNames(rec *actiontest.Recorder) []string {
	var names []string
	for _, c := range rec.Children {
		names = append(names, c.Name)
	}
	return names
}

func TestUnpackCorpusDetails(t *testing.T) {
	t.Parallel()
	docs := []string{"testEXCEL.xls", "testHTML.html", "testOpenOffice2.odt", "testPDF.pdf", "testPPT.ppt",
		"testRTF.rtf", "testTXT.txt", "testWORD.doc", "testXML.xml"}
	prefixed := func(parent, dir string) []string {
		var out []string
		for _, d := range docs {
			out = append(out, parent+"/"+dir+d)
		}
		return out
	}
	tests := []struct {
		file      string
		wantNames []string
		wantErr   string // "" for none
	}{
		{file: "test-documents.zip", wantNames: prefixed("test-documents.zip", "")},
		{file: "test-documents.tar", wantNames: prefixed("test-documents.tar", "test-documents/")},
		{file: "test-documents.tgz", wantNames: prefixed("test-documents.tgz", "test-documents/")},
		{file: "test-documents.tbz2", wantNames: prefixed("test-documents.tbz2", "test-documents/")},
		{file: "test-documents.7z", wantNames: prefixed("test-documents.7z", "test-documents/")},
		{file: "test-documents.rar", wantNames: prefixed("test-documents.rar", "test-documents/")},
		{file: "test_extract.tar.xz", wantNames: []string{"test_extract.tar.xz/file1", "test_extract.tar.xz/file2"}},
		{file: "test_read_format_zip_filename_cp866.zip", wantNames: []string{
			"test_read_format_zip_filename_cp866.zip/ПРИВЕТ", "test_read_format_zip_filename_cp866.zip/привет"}},
		{file: "test-zip-of-zip.zip", wantNames: []string{"test-zip-of-zip.zip/html-within-zip.zip"}},
		{file: "empty.zip"},
		{file: "hostile-traversal.zip", wantNames: []string{
			"hostile-traversal.zip/readme.txt", "hostile-traversal.zip/etc/passwd",
			"hostile-traversal.zip/etc/cron.d/sluice-absolute-path", "hostile-traversal.zip/Windows/sluice-backslash.txt"},
			wantErr: `1 entry skipped: link-to-etc-passwd: a symbolic link to "/etc/passwd", not followed`},
		{file: "testZipEncrypted.zip", wantNames: []string{"testZipEncrypted.zip/unencrypted.txt"},
			wantErr: "1 entry skipped: encrypted.txt: password-protected"},
		{file: "droste.zip", wantNames: []string{"droste.zip/droste.jpg"},
			wantErr: "1 entry skipped: droste.zip: archive contains itself"},
		{file: "testZIP_corrupted_oom.zip", wantErr: "corrupt archive: zip: not a valid zip file"},
		{file: "hostile-zipbomb-1GiB.zip", wantErr: "1 entry skipped: zeros.bin: compression ratio 1029:1 exceeds 1000:1"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			rec, err := runFile(t, tt.file, nil)
			if got := childNames(rec); strings.Join(got, "\n") != strings.Join(tt.wantNames, "\n") {
				t.Errorf("children = %q, want %q", got, tt.wantNames)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || !action.IsPermanent(err)):
				t.Errorf("err = %v, want permanent %q", err, tt.wantErr)
			}
			// A small entry gets the content type detect finds for its bytes (so detect runs
			// inline); a larger one none (detect reads it).
			for _, c := range rec.Children {
				want := ""
				if len(c.Data) <= detect.WholeMax {
					want = detect.Whole(c.Data, c.Name)
				}
				if c.ContentType != want {
					t.Errorf("child %s (%d bytes) has content type %q, want %q", c.Name, len(c.Data), c.ContentType, want)
				}
			}
			if len(rec.Children) > 0 && len(rec.Progresses) < len(rec.Children) {
				t.Errorf("%d progress reports for %d children", len(rec.Progresses), len(rec.Children))
			}
			for i := 1; i < len(rec.Progresses); i++ {
				if p := rec.Progresses[i]; p < rec.Progresses[i-1] || p > 1 {
					t.Errorf("progress not monotonic in [0,1]: %v", rec.Progresses)
				}
			}
		})
	}
}

func TestUnpackTraversalContent(t *testing.T) {
	t.Parallel()
	rec, err := runFile(t, "hostile-traversal.zip", nil)
	// The symlink entry is recorded, not followed.
	if err == nil || !strings.Contains(err.Error(), `link-to-etc-passwd: a symbolic link to "/etc/passwd", not followed`) {
		t.Fatalf("err = %v", err)
	}
	if !bytes.Contains(rec.Children[0].Data, []byte("only this entry is safe to extract")) {
		t.Fatalf("readme = %q", rec.Children[0].Data)
	}
	for _, c := range rec.Children {
		if bytes.HasPrefix(c.Data, []byte("/etc/passwd")) || bytes.Contains(c.Data, []byte("root:x:0:0:root")) {
			t.Fatalf("symlink followed into %s", c.Name)
		}
	}
}

func TestUnpackDepth(t *testing.T) {
	t.Parallel()
	rec := &actiontest.Recorder{}
	task := actiontest.NewFileTask(t, filepath.Join(corpusDir(t), "test-zip-of-zip.zip"), "", nil, nil)
	task.Item.Depth = 16
	err := New(Config{}).Run(t.Context(), task, rec)
	if !action.IsPermanent(err) || err.Error() != "archive nested too deep: depth 17 > 16" {
		t.Fatalf("err = %v", err)
	}
	task.Item.Depth = 2
	err = New(Config{}).Run(t.Context(), task, rec)
	if err != nil {
		t.Fatal(err)
	}
	err = New(Config{}).Run(t.Context(), task, rec)
	task.With = map[string]any{"max_depth": 2}
	if err := New(Config{}).Run(t.Context(), task, rec); err == nil || !strings.Contains(err.Error(), "depth 3 > 2") {
		t.Fatalf("setting ignored: %v", err)
	}
}

func TestUnpackNested30Levels(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(corpusDir(t), "hostile-nested-30-levels.zip"))
	if err != nil {
		t.Fatal(err)
	}
	var tr tree
	walk(t, "hostile-nested-30-levels.zip", data, 0, &tr)
	if len(tr.leaves) != 0 || len(tr.errors) != 1 || !strings.HasSuffix(tr.errors[0], "archive nested too deep: depth 17 > 16") {
		t.Fatalf("leaves %q, errors %q", tr.leaves, tr.errors)
	}
	if want := 17; strings.Count(tr.errors[0], "/")+1 != want {
		t.Fatalf("error at the wrong level: %s", tr.errors[0])
	}
}

// peakHeap samples HeapInuse until stop is called and returns the peak.
func peakHeap() (stop func() uint64) {
	var (
		mu   sync.Mutex
		peak uint64
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// vmHWM returns the process's peak resident set in bytes, or 0 when /proc is unavailable.
func vmHWM() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

const memLimit = 512 << 20

func TestUnpackHostileBoundedMemory(t *testing.T) {
	t.Parallel()
	stop := peakHeap()
	for _, f := range []string{"hostile-zipbomb-1GiB.zip", "hostile-zipbomb-nested.zip", "hostile-20000-entries.zip", "droste.zip"} {
		data, err := os.ReadFile(filepath.Join(corpusDir(t), f))
		if err != nil {
			t.Fatal(err)
		}
		var tr tree
		walk(t, f, data, 0, &tr)
		switch f {
		case "hostile-zipbomb-1GiB.zip", "hostile-zipbomb-nested.zip":
			if len(tr.leaves) != 0 || len(tr.errors) == 0 {
				t.Errorf("%s: leaves %d, errors %q", f, len(tr.leaves), tr.errors)
			}
			for _, e := range tr.errors {
				if !strings.Contains(e, "compression ratio") && !strings.Contains(e, "expand") {
					t.Errorf("%s: not a limit error: %s", f, e)
				}
			}
		case "hostile-20000-entries.zip":
			if len(tr.leaves) != 20000 || len(tr.errors) != 0 {
				t.Errorf("%s: leaves %d, errors %q", f, len(tr.leaves), tr.errors)
			}
		}
	}
	peak := stop()
	t.Logf("peak heap in use %d MiB, peak resident set %d MiB", peak>>20, vmHWM()>>20)
	if peak > memLimit {
		t.Errorf("heap in use peaked at %d MiB", peak>>20)
	}
	// The race detector's shadow memory inflates the resident set; the heap check still holds.
	if hwm := vmHWM(); hwm > memLimit && !raceEnabled {
		t.Errorf("resident set peaked at %d MiB", hwm>>20)
	}
}

// zeros is an endless source of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestUnpackStreamBombs(t *testing.T) {
	t.Parallel()
	const bombSize = 128 << 20
	var tgz bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&tgz, gzip.BestSpeed)
	tw := tar.NewWriter(gw)
	small := []byte("a small file before the bomb\n")
	for _, h := range []*tar.Header{{Name: "a.txt", Mode: 0o644, Size: int64(len(small))}, {Name: "zeros.bin", Mode: 0o644, Size: bombSize}} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		src := io.Reader(bytes.NewReader(small))
		if h.Size == bombSize {
			src = io.LimitReader(zeros{}, bombSize)
		}
		if _, err := io.Copy(tw, src); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	gw.Close()

	var zst bytes.Buffer
	zw, _ := zstd.NewWriter(&zst)
	if _, err := io.Copy(zw, io.LimitReader(zeros{}, bombSize)); err != nil {
		t.Fatal(err)
	}
	zw.Close()

	tests := []struct {
		name      string
		data      []byte
		wantNames []string
		wantErr   string
	}{
		{name: "bomb.tar.gz", data: tgz.Bytes(), wantNames: []string{"bomb.tar.gz/a.txt"}, wantErr: "zeros.bin: "},
		{name: "zeros.zst", data: zst.Bytes(), wantErr: "zeros: compression ratio"},
	}
	stop := peakHeap()
	for _, tt := range tests {
		rec := &actiontest.Recorder{}
		err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, tt.name, "", tt.data, nil, nil), rec)
		if err == nil || !action.IsPermanent(err) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
		if got := childNames(rec); strings.Join(got, ",") != strings.Join(tt.wantNames, ",") {
			t.Errorf("%s: children %q", tt.name, got)
		}
	}
	if peak := stop(); peak > memLimit {
		t.Errorf("heap in use peaked at %d MiB", peak>>20)
	}
}

func TestUnpackSingleCompressed(t *testing.T) {
	t.Parallel()
	var gz bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write([]byte("hello, compressed world\n"))
	gw.Close()
	rec := &actiontest.Recorder{}
	if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "dir.zip/notes.txt.gz", "", gz.Bytes(), nil, nil), rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Children) != 1 || rec.Children[0].Name != "dir.zip/notes.txt.gz/notes.txt" || string(rec.Children[0].Data) != "hello, compressed world\n" {
		t.Fatalf("children = %+v", rec.Children)
	}
	// Truncated: no child, the decompressor's message.
	rec = &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "notes.txt.gz", "", gz.Bytes()[:gz.Len()-6], nil, nil), rec)
	if !action.IsPermanent(err) || !strings.HasPrefix(err.Error(), "corrupt archive: notes.txt: ") || len(rec.Children) != 0 {
		t.Fatalf("err = %v, children %d", err, len(rec.Children))
	}
}

func makeZip(t testing.TB, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := range n {
		w, err := zw.Create("f" + strconv.Itoa(i) + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("entry " + strconv.Itoa(i)))
	}
	zw.Close()
	return b.Bytes()
}

func makeTar(t testing.TB, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := range n {
		data := []byte("entry " + strconv.Itoa(i))
		tw.WriteHeader(&tar.Header{Name: "f" + strconv.Itoa(i) + ".txt", Mode: 0o644, Size: int64(len(data))})
		tw.Write(data)
	}
	tw.WriteHeader(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	tw.WriteHeader(&tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "f0.txt"})
	tw.WriteHeader(&tar.Header{Name: "dev", Typeflag: tar.TypeChar})
	tw.Close()
	return b.Bytes()
}

func TestUnpackMaxEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		data     []byte
		children int
		wantErr  string
	}{
		{name: "a.zip", data: makeZip(t, 5), children: 0, wantErr: "archive has 5 entries, more than 3"},
		{name: "a.tar", data: makeTar(t, 5), children: 3, wantErr: "archive has more than 3 entries"},
		{name: "specials.tar", data: makeTar(t, 0), children: 0,
			wantErr: `2 entries skipped: link: a symbolic link to "/etc/passwd", not followed; hard: a hard link to "f0.txt", not followed`},
	}
	for _, tt := range tests {
		rec := &actiontest.Recorder{}
		err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, tt.name, "", tt.data, map[string]any{"max_entries": 3}, nil), rec)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
		if len(rec.Children) != tt.children {
			t.Errorf("%s: %d children, want %d: %q", tt.name, len(rec.Children), tt.children, childNames(rec))
		}
	}
}

func TestUnpackTruncatedTar(t *testing.T) {
	t.Parallel()
	data := makeTar(t, 4)
	// Cut inside the third entry's data (each entry is a 512-byte header + 512 bytes of data).
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "cut.tar", "", data[:2*1024+512+3], nil, nil), rec)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "corrupt archive: unexpected EOF") {
		t.Fatalf("err = %v", err)
	}
	if got := childNames(rec); len(got) != 2 {
		t.Fatalf("children = %q", got)
	}
}

func TestUnpackOutputFailureIsTransient(t *testing.T) {
	t.Parallel()
	rec := &actiontest.Recorder{MaxChildren: 2}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "a.zip", "", makeZip(t, 4), nil, nil), rec)
	if err == nil || action.IsPermanent(err) {
		t.Fatalf("err = %v, want a transient error", err)
	}
}

func TestUnpackUnsupported(t *testing.T) {
	t.Parallel()
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "x.iso", "application/x-iso9660-image", bytes.Repeat([]byte{0}, 4096), nil, nil), rec)
	if !action.IsPermanent(err) || err.Error() != "unsupported archive format: application/x-iso9660-image" {
		t.Fatalf("err = %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	spec := New(Config{}).Spec()
	if err := spec.Validate(map[string]any{"max_depth": 4, "max_ratio": 50.5}); err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(map[string]any{"max_depth": -1}); err == nil {
		t.Fatal("negative depth accepted")
	}
	if *spec.ProgressWeight != 0.1 || spec.Name != "unpack" {
		t.Fatalf("spec = %+v", spec)
	}
}

func TestEntryName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"../../etc/passwd":               "etc/passwd",
		"/etc/cron.d/x":                  "etc/cron.d/x",
		"..\\..\\Windows\\x.txt":         "Windows/x.txt",
		"C:\\Users\\a.txt":               "Users/a.txt",
		"c:evil.txt":                     "evil.txt",
		"a/./b//c/":                      "a/b/c",
		"a\x00b\nc":                      "a_b_c",
		"":                               "unnamed",
		"..":                             "unnamed",
		"bad\xffname":                    "bad\uFFFDname",
		"dir/":                           "dir",
		strings.Repeat("x", 300):         strings.Repeat("x", 255),
		"ok/" + strings.Repeat("é", 200): "ok/" + strings.Repeat("é", 127),
	} {
		if got := entryName(in); got != want {
			t.Errorf("entryName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := decompressedName("Data.TGZ"); got != "Data.tar" {
		t.Errorf("decompressedName = %q", got)
	}
}

func FuzzEntryName(f *testing.F) {
	for _, s := range []string{"../../etc/passwd", "/abs", "C:\\x", "a/../../b", "\x00", "..", ".", "", "a//b",
		"\xff\xfe", strings.Repeat("../", 2000), strings.Repeat("a/", 3000) + ".."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := entryName(raw)
		if got == "" || !filepath.IsLocal(got) || !utf8.ValidString(got) || len(got) > maxName {
			t.Fatalf("entryName(%q) = %q", raw, got)
		}
		for _, part := range strings.Split(got, "/") {
			if part == "" || part == "." || part == ".." || len(part) > maxComponent {
				t.Fatalf("entryName(%q) = %q has component %q", raw, got, part)
			}
		}
		if strings.ContainsAny(got, "\\\x00") {
			t.Fatalf("entryName(%q) = %q", raw, got)
		}
		if entryName(got) != got {
			t.Fatalf("entryName not idempotent on %q", got)
		}
	})
}

func TestLegacyCharset(t *testing.T) {
	t.Parallel()
	// "été.txt" in CP437 stays CP437; "привет" in CP866 is CP866.
	if cm := legacyCharset([]string{"\x82t\x82.txt"}); decodeLegacy("\x82t\x82.txt", cm) != "été.txt" {
		t.Errorf("cp437 name decoded as %q", decodeLegacy("\x82t\x82.txt", cm))
	}
	if cm := legacyCharset([]string{"\xaf\xe0\xa8\xa2\xa5\xe2"}); decodeLegacy("\xaf\xe0\xa8\xa2\xa5\xe2", cm) != "привет" {
		t.Errorf("cp866 name decoded as %q", decodeLegacy("\xaf\xe0\xa8\xa2\xa5\xe2", cm))
	}
}
