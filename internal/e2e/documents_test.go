package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// corpusDir is the shared test corpus (shared/corpus in the workspace, next to the module).
const corpusDir = "../../../shared/corpus"

// expectation is one entry of the corpus's expected.json.
type expectation struct {
	File          string   `json:"file"`
	Expect        string   `json:"expect"` // document, documents, error, unhandled
	MinDocuments  int      `json:"min_documents"`
	MaxDocuments  *int     `json:"max_documents"`
	Phrases       []string `json:"phrases"`
	OCRPhrases    []string `json:"ocr_phrases"`
	ErrorContains *string  `json:"error_contains"`
	Note          string   `json:"note"`
}

func loadCorpus(t *testing.T) (dir string, exps []expectation) {
	t.Helper()
	dir = filepath.Join(corpusDir, "files")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the shared corpus is missing (%v): the document tests need %s", err, dir)
	}
	b, err := os.ReadFile(filepath.Join(corpusDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exps); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	if len(exps) == 0 {
		t.Fatal("expected.json lists no files")
	}
	return dir, exps
}

// toolsFor lists the external converters a corpus file needs for its expectations to hold.
func toolsFor(file string) []string {
	poppler := []string{"pdfinfo", "pdftotext", "pdftoppm"}
	ext := strings.ToLower(filepath.Ext(file))
	switch {
	case strings.HasPrefix(file, "test-documents."):
		// The Tika sample archives hold Office, OpenDocument, PDF and HTML files.
		return append([]string{"soffice", "chromium"}, poppler...)
	case oneOf(ext, ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".rtf"):
		return append([]string{"soffice"}, poppler...)
	case ext == ".msg":
		return append([]string{"msgconvert"}, poppler...) // it carries a PDF attachment
	case ext == ".html":
		return []string{"chromium", "pdftoppm"}
	case ext == ".heic" || ext == ".tif":
		return []string{"vips", "vipsthumbnail"}
	case ext == ".pdf":
		return poppler
	}
	return nil
}

func oneOf(s string, set ...string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// missingTools returns the tools not in PATH.
func missingTools(tools []string) []string {
	var out []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			out = append(out, tool)
		}
	}
	return out
}

// skipWithoutTools skips the (sub)test when a converter is missing, or fails it when
// SLUICE_TEST_REQUIRE_TOOLS=1.
func skipWithoutTools(t *testing.T, tools []string) {
	t.Helper()
	if m := missingTools(tools); len(m) > 0 {
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("converters missing (SLUICE_TEST_REQUIRE_TOOLS=1): %v; run sluice doctor", m)
		}
		t.Skipf("converters missing: %v (set SLUICE_TEST_REQUIRE_TOOLS=1 to fail instead)", m)
	}
}

// runMeasured runs the binary and polls its peak RSS (VmHWM) until it exits.
func runMeasured(ctx context.Context, args ...string) (out []byte, peakMB float64, err error) {
	cmd := runSluice(ctx, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if kb := vmHWM(status); kb > 0 {
			peakMB = max(peakMB, kb/1024)
		}
		select {
		case err := <-done:
			return buf.Bytes(), peakMB, err
		case <-tick.C:
		}
	}
}

// vmHWM reads the VmHWM line of a /proc status file in kB, or 0.
func vmHWM(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb
			}
		}
	}
	return 0
}

// exported is what `sluice documents export` wrote.
type exported struct {
	docs   []map[string]any // index.jsonl lines
	errors []map[string]any // errors.jsonl lines
	texts  map[string]string
	index  []byte // index.jsonl with the ids removed
	errRaw []byte
}

func export(t *testing.T, data string, parts string) *exported {
	t.Helper()
	ex, err := exportTo(t.Context(), data, filepath.Join(t.TempDir(), "export"), parts)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// exportTo runs `sluice documents export` of data into out and reads what it wrote.
func exportTo(ctx context.Context, data, out, parts string) (*exported, error) {
	return exportEnv(ctx, nil, data, out, parts)
}

// exportEnv is exportTo with the environment env (nil: the test's), which may name a database
// (SLUICE_DATABASE) and blob store.
func exportEnv(ctx context.Context, env []string, data, out, parts string) (*exported, error) {
	cmd := runSluice(ctx, "documents", "export", "--data", data, "--out", out, "--parts", parts)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("export: %v\n%s", err, b)
	}
	ex := &exported{texts: map[string]string{}}
	var idx bytes.Buffer
	for _, f := range []string{"index.jsonl", "errors.jsonl"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			if f == "errors.jsonl" {
				ex.errors = append(ex.errors, m)
				continue
			}
			ex.docs = append(ex.docs, m)
			if files, ok := m["files"].(map[string]any); ok {
				if p, ok := files["text"].(string); ok {
					tb, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(p)))
					if err != nil {
						return nil, err
					}
					ex.texts[m["title"].(string)] += string(tb) + "\n"
				}
			}
			delete(m, "id")
			line, _ := json.Marshal(m)
			idx.Write(append(line, '\n'))
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if f == "errors.jsonl" {
			ex.errRaw = b
		}
	}
	ex.index = idx.Bytes()
	return ex, nil
}

// fromRoot reports whether a derived name belongs to the root file named root.
func fromRoot(name, root string) bool {
	return name == root || strings.HasPrefix(name, root+"/")
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkExpectation checks one corpus file's results.
func checkExpectation(t *testing.T, ex *exported, e expectation) {
	t.Helper()
	var docs int
	var text strings.Builder
	for _, d := range ex.docs {
		title := d["title"].(string)
		if fromRoot(title, e.File) {
			docs++
			text.WriteString(ex.texts[title])
			text.WriteString("\n")
		}
	}
	var errs []string
	for _, er := range ex.errors {
		if fromRoot(er["name"].(string), e.File) {
			errs = append(errs, er["name"].(string)+": "+er["message"].(string))
		}
	}
	all := normalize(text.String())
	switch e.Expect {
	case "document":
		if docs != 1 {
			t.Errorf("%s: %d documents, want 1 (errors: %q)", e.File, docs, errs)
		}
		if len(errs) > 0 {
			t.Errorf("%s: unexpected errors %q", e.File, errs)
		}
	case "documents":
		if docs < e.MinDocuments {
			t.Errorf("%s: %d documents, want at least %d (errors: %q)", e.File, docs, e.MinDocuments, errs)
		}
		if e.MaxDocuments != nil && docs > *e.MaxDocuments {
			t.Errorf("%s: %d documents, want at most %d", e.File, docs, *e.MaxDocuments)
		}
		if e.ErrorContains == nil {
			for _, er := range errs {
				if !containsAny(er, tolerated[e.File]) {
					t.Errorf("%s: unexpected error %q", e.File, er)
				}
			}
		}
	case "error", "unhandled":
		if docs != 0 {
			t.Errorf("%s: %d documents, want none", e.File, docs)
		}
		if len(errs) == 0 {
			t.Errorf("%s: no error", e.File)
		}
		if e.Expect == "unhandled" && !anyContains(errs, ": unhandled: ") {
			t.Errorf("%s: errors %q, want unhandled: <type>", e.File, errs)
		}
	default:
		t.Fatalf("%s: unknown expectation %q", e.File, e.Expect)
	}
	for _, p := range e.Phrases {
		if !strings.Contains(all, normalize(p)) {
			t.Errorf("%s: no document's text contains %q", e.File, p)
		}
	}
	if e.ErrorContains != nil && !anyContains(errs, *e.ErrorContains) {
		t.Errorf("%s: errors %q, want one containing %q", e.File, errs, *e.ErrorContains)
	}
}

// tolerated lists the errors a "documents" expectation without error_contains allows, as its
// note in expected.json does: droste.zip "must terminate: nesting-depth error or cycle
// detection"; hostile-traversal.zip's unsafe names "may become … Errors naming the entry".
var tolerated = map[string][]string{
	"droste.zip":            {"contains itself", "nested too deep"},
	"hostile-traversal.zip": {"../", "unsafe", "absolute", "symlink", "link"},
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func anyContains(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// corpusArgs returns the corpus files as command-line arguments (each file a root named by its
// base name), leaving out the excluded ones.
func corpusArgs(t *testing.T, dir string, exclude func(name string) bool) []string {
	t.Helper()
	args, err := listFiles(dir, exclude)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// listFiles lists the regular files of dir but the excluded ones, sorted.
func listFiles(dir string, exclude func(name string) bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, e := range ents {
		if e.Type().IsRegular() && (exclude == nil || !exclude(e.Name())) {
			args = append(args, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(args)
	return args, nil
}

// slowInShort is left out of TestCorpus in -short mode: its 20,000 entries each get a text
// conversion (a PDF render and a pdftoppm thumbnail), which takes most of the full run.
const slowInShort = "hostile-20000-entries.zip"

// TestCorpus ingests the whole public corpus, hostile archives included, in one job of the real
// binary and checks every expectation of expected.json, the specific limit errors, and the
// process's peak RSS. With -short it leaves out the 20,000-entry archive. The full run is the
// package's one uninterrupted corpus run (corpusReference): TestCorpusCrashLoop compares with it.
func TestCorpus(t *testing.T) {
	t.Parallel()
	dir, exps := loadCorpus(t)
	if len(corpusArgs(t, dir, nil)) != len(exps) {
		t.Errorf("corpus has %d files, expected.json %d", len(corpusArgs(t, dir, nil)), len(exps))
	}
	var ref *corpusRun
	if testing.Short() {
		ref = ingestCorpus(t.Context(), t.TempDir(), corpusArgs(t, dir, func(name string) bool { return name == slowInShort }))
	} else {
		ref = corpusReference()
	}
	if ref.err != nil {
		t.Fatal(ref.err)
	}
	work, ex, peak := ref.work, ref.ex, ref.peakMB
	t.Logf("ingested the corpus in %s, peak RSS %.0f MB; summary:\n%s", ref.took.Round(time.Second), peak, summaryOf(ref.out))
	if peak <= 0 || peak >= 512 {
		t.Errorf("peak RSS of sluice ingest %.0f MB, want (0, 512)", peak)
	}
	for _, e := range exps {
		t.Run(e.File, func(t *testing.T) {
			if testing.Short() && e.File == slowInShort {
				t.Skip("left out in -short: 20,000 text conversions")
			}
			skipWithoutTools(t, toolsFor(e.File))
			checkExpectation(t, ex, e)
		})
	}
	t.Run("hostile", func(t *testing.T) {
		checkHostile(t, ex, work)
	})
	t.Run("not degraded", func(t *testing.T) {
		// With every converter installed, no document falls back to a lesser rendering.
		var all []string
		for _, e := range exps {
			all = append(all, toolsFor(e.File)...)
		}
		skipWithoutTools(t, all)
		for _, d := range ex.docs {
			if md, _ := d["metadata"].(map[string]any); md["degraded"] == true {
				t.Errorf("%s is degraded: %v", d["title"], md)
			}
		}
	})
}

// checkHostile asserts the hostile archives end in bounded results with specific errors.
func checkHostile(t *testing.T, ex *exported, work string) {
	errOf := func(root string) []string {
		var out []string
		for _, er := range ex.errors {
			if fromRoot(er["name"].(string), root) {
				out = append(out, er["message"].(string))
			}
		}
		return out
	}
	for root, want := range map[string][]string{
		"hostile-zipbomb-1GiB.zip":     {"compression ratio", "expanded"},
		"hostile-zipbomb-nested.zip":   {"compression ratio", "expanded"},
		"hostile-nested-30-levels.zip": {"nested too deep"},
		"droste.zip":                   {"contains itself", "nested too deep"},
		"testZipEncrypted.zip":         {"password-protected"},
	} {
		errs := errOf(root)
		ok := false
		for _, w := range want {
			ok = ok || anyContains(errs, w)
		}
		if !ok {
			t.Errorf("%s: errors %q, want one naming the limit (%q)", root, errs, want)
		}
	}
	var docs20k int
	for _, d := range ex.docs {
		if fromRoot(d["title"].(string), "hostile-20000-entries.zip") {
			docs20k++
		}
	}
	if docs20k != 20000 && !testing.Short() {
		t.Errorf("hostile-20000-entries.zip: %d documents, want 20000", docs20k)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	firstLine, _, _ := strings.Cut(string(passwd), "\n")
	for title, text := range ex.texts {
		if firstLine != "" && strings.Contains(text, firstLine) {
			t.Errorf("document %s holds this machine's /etc/passwd", title)
		}
	}
	// Nothing was extracted next to the data dir or the export.
	ents, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "data" {
			t.Errorf("unexpected %s written next to the data dir", e.Name())
		}
	}
}

func tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// summaryOf returns the summary sluice ingest printed after its progress lines.
func summaryOf(out []byte) string {
	s := string(out)
	if i := strings.LastIndex(s, "\njob "); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestCorpusOCR ingests the scanned PDF with --ocr: its text comes from OCR. Without --ocr (in
// TestCorpus) the same file is a document with empty text.
func TestCorpusOCR(t *testing.T) {
	t.Parallel()
	dir, exps := loadCorpus(t)
	var ocr []expectation
	for _, e := range exps {
		if len(e.OCRPhrases) > 0 {
			ocr = append(ocr, e)
		}
	}
	if len(ocr) == 0 {
		t.Fatal("expected.json has no ocr_phrases")
	}
	for _, e := range ocr {
		t.Run(e.File, func(t *testing.T) {
			t.Parallel()
			skipWithoutTools(t, append(toolsFor(e.File), "tesseract"))
			data := filepath.Join(t.TempDir(), "data")
			if b, err := runSluice(t.Context(), "ingest", "--ocr", "--lang", "en", "--data", data, filepath.Join(dir, e.File)).CombinedOutput(); err != nil {
				t.Fatalf("ingest --ocr: %v\n%s", err, b)
			}
			ex := export(t, data, "text")
			checkExpectation(t, ex, expectation{File: e.File, Expect: e.Expect, MinDocuments: e.MinDocuments,
				MaxDocuments: e.MaxDocuments, Phrases: append(e.Phrases, e.OCRPhrases...), ErrorContains: e.ErrorContains})
			for _, d := range ex.docs {
				if d["is_from_ocr"] != true {
					t.Errorf("%s: is_from_ocr = %v, want true", d["title"], d["is_from_ocr"])
				}
			}
		})
	}
}

func subsetArgs(t *testing.T, dir string, names []string) []string {
	t.Helper()
	var args []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	return args
}

// lineDiff shows the first differing lines of two JSONL files.
func lineDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d lines vs %d\n", len(la), len(lb))
	shown := 0
	for i := 0; i < max(len(la), len(lb)) && shown < 5; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			fmt.Fprintf(&sb, "line %d:\n clean:   %s\n crashed: %s\n", i+1, x, y)
			shown++
		}
	}
	return sb.String()
}
