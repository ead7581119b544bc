package office

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/poll"
)

// sharedTask returns a task for the document at path of job job whose attempt dir lies in base,
// as an engine's lie in its <data dir>/tmp: warm converters are made beside the attempt dirs and
// outlive them.
func sharedTask(t *testing.T, base string, job int64, name, contentType string, data []byte) *action.Task {
	t.Helper()
	task := actiontest.NewTask(t, name, contentType, data, nil, nil)
	task.JobID, task.Item.JobID = job, job
	dir, err := os.MkdirTemp(base, "task-")
	if err != nil {
		t.Fatal(err)
	}
	task.TempDir = dir
	return task
}

// convertAll converts the named corpus files as tasks of job at once through a and returns
// each one's PDF text and PDF.
func convertAll(t *testing.T, a *Action, base string, job int64, names []string) (texts []string, pdfs [][]byte) {
	t.Helper()
	texts, pdfs = make([]string, len(names)), make([][]byte, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		data, err := os.ReadFile(convertertest.File(t, name))
		if err != nil {
			t.Fatal(err)
		}
		task := sharedTask(t, base, job, name, "", data)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &actiontest.Recorder{}
			if err := a.Run(t.Context(), task, rec); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			if len(rec.Children) != 1 {
				t.Errorf("%s: %d children, want 1", name, len(rec.Children))
				return
			}
			texts[i] = convertertest.PDFText(t, rec.Children[0].Data)
			pdfs[i] = rec.Children[0].Data
		}()
	}
	wg.Wait()
	return texts, pdfs
}

var warmDocs = []string{
	"testWORD_various.docx", "testWORD_various.doc", "LibreOfficeWriter_odt_1.3.odt", "testRTFVarious.rtf",
	"testEXCEL.xlsx", "testEXCEL.xls", "testPPT_various.pptx", "LibreOfficeImpress_odp_1.3.odp",
}

// TestWarmBatches converts eight documents of one job at once: one warm converter converts
// them all, in fewer calls than documents (the ones that arrive while a batch runs make up the
// next), each into its own PDF — two files of one base name (testEXCEL.xls and .xlsx) included.
// The PDFs of the two documents with Japanese text are the same bytes as each converted alone,
// by a converter of its own: the fonts LibreOffice makes from CFF fonts carry a number it counts
// per process, which differed for the second of them in one batch.
func TestWarmBatches(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "soffice", "pdftotext", "bwrap")
	a := New()
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	texts, pdfs := convertAll(t, a, base, 7, warmDocs)
	exp := convertertest.Expectations(t)
	for i, name := range warmDocs {
		convertertest.CheckPhrases(t, texts[i], exp[name].Phrases)
	}
	started, batches, docs := a.pool.started.Load(), a.pool.batches.Load(), a.pool.warmDocs.Load()
	t.Logf("%d converters, %d batches, %d documents converted warm", started, batches, docs)
	if why := a.pool.lastRetired.Load(); why != nil {
		t.Logf("a converter was retired early: %s", *why)
	}
	if started != 1 {
		t.Errorf("%d converters started for one job, want 1", started)
	}
	if docs != int64(len(warmDocs)) {
		t.Errorf("%d of %d documents converted warm", docs, len(warmDocs))
	}
	if batches >= docs {
		t.Errorf("%d batches for %d documents: no batching", batches, docs)
	}
	for i, name := range warmDocs[:2] {
		solo := New()
		_, alone := convertAll(t, solo, base, 8, []string{name})
		solo.Close()
		if !bytes.Equal(pdfs[i], alone[0]) {
			t.Errorf("%s: the PDF converted in a batch (%d bytes) differs from the one converted alone (%d bytes)",
				name, len(pdfs[i]), len(alone[0]))
		}
	}
}

// TestWarmIsolation: documents of two jobs go to two converters, each in a sandbox and a
// directory of its own; a converter whose profile changed outside the files LibreOffice itself
// changes is retired before it converts again; Close ends every converter's sandbox and removes
// its directory.
func TestWarmIsolation(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "soffice", "pdftotext", "bwrap")
	a := New()
	// Converters must not retire idle while the test looks at them (a loaded machine takes
	// longer than warmIdle over a conversion).
	a.pool.idle = time.Hour
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	doc := []string{"LibreOfficeWriter_odt_1.3.odt"}
	_, _ = convertAll(t, a, base, 1, doc)
	_, _ = convertAll(t, a, base, 2, doc)
	w1, _ := a.pool.Job(1)
	w2, _ := a.pool.Job(2)
	if w1 == nil || w2 == nil || w1 == w2 || w1.dir == w2.dir || w1.proc.Pid() == w2.proc.Pid() {
		t.Fatalf("jobs 1 and 2 share a converter or have none: %+v %+v", w1, w2)
	}
	// Neither sandbox shows the other's directory: each binds only its own.
	for _, w := range []*warm{w1, w2} {
		other := w2.dir
		if w == w2 {
			other = w1.dir
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(w.proc.Pid()), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), other) {
			t.Errorf("the sandbox of %s binds %s", w.dir, other)
		}
	}
	// Tampering: a macro library appears in job 1's profile.
	if w1.Retired() {
		t.Fatal("job 1's converter retired before the test planted its macro library")
	}
	evil := filepath.Join(w1.dir, "profile", "user", "basic", "Evil")
	if err := os.MkdirAll(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(evil, "Module1.xba"), []byte("Sub Main\nEnd Sub\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The batch that follows finds the change: its document is converted cold, the converter
	// retired, and the job's next document gets a new one.
	convertAll(t, a, base, 1, doc)
	if !w1.Retired() {
		t.Errorf("the converter whose profile gained a macro library was not retired")
	}
	convertAll(t, a, base, 1, doc)
	w3, _ := a.pool.Job(1)
	if w3 == nil || w3 == w1 {
		t.Errorf("job 1 did not get a new converter after its first was retired")
	}
	a.Close()
	for _, w := range []*warm{w1, w2, w3} {
		if w == nil {
			continue
		}
		<-w.gone
		if _, err := os.Stat(w.dir); !os.IsNotExist(err) {
			why := ""
			if p := a.pool.lastRetired.Load(); p != nil {
				why = *p
			}
			t.Errorf("%s still exists after Close (%v; last early retirement: %q)", w.dir, err, why)
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(w.proc.Pid()))); err == nil {
			t.Errorf("the sandbox of %s (pid %d) still runs after Close", w.dir, w.proc.Pid())
		}
	}
}

// runAll runs tasks through a at once; the wait it returns waits for them and returns each
// one's error and number of children. done, when not nil, is called as each task ends.
func runAll(t *testing.T, a *Action, tasks []*action.Task, done func(i int)) (wait func() ([]error, []int)) {
	t.Helper()
	errs, children := make([]error, len(tasks)), make([]int, len(tasks))
	var wg sync.WaitGroup
	for i, task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &actiontest.Recorder{}
			errs[i] = a.Run(t.Context(), task, rec)
			children[i] = len(rec.Children)
			if done != nil {
				done(i)
			}
		}()
	}
	return func() ([]error, []int) {
		wg.Wait()
		return errs, children
	}
}

// TestWarmBatchWithCorrupt converts, as one job, a document LibreOffice cannot load between two
// it can: those two are converted warm, the third falls back to a cold run, which fails it with
// a permanent error, and the converter is retired.
func TestWarmBatchWithCorrupt(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "soffice", "pdftotext", "bwrap")
	a := New()
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	broken, err := os.ReadFile(convertertest.File(t, "test-zip-of-zip.zip"))
	if err != nil {
		t.Fatal(err)
	}
	docx := "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	names := []string{"testWORD_various.docx", "broken.docx", "testRTFVarious.rtf"}
	tasks := make([]*action.Task, len(names))
	for i, name := range names {
		data := broken
		if name != "broken.docx" {
			if data, err = os.ReadFile(convertertest.File(t, name)); err != nil {
				t.Fatal(err)
			}
		}
		tasks[i] = sharedTask(t, base, 3, name, docx, data)
		if name == "testRTFVarious.rtf" {
			tasks[i].Item.ContentType = "application/rtf"
		}
	}
	errs, children := runAll(t, a, tasks, nil)()
	for i, name := range names {
		switch {
		case name == "broken.docx":
			if !action.IsPermanent(errs[i]) || !strings.HasPrefix(errs[i].Error(), "office conversion: ") {
				t.Errorf("%s: err = %v, want a permanent office conversion error", name, errs[i])
			}
		case errs[i] != nil || children[i] != 1:
			t.Errorf("%s: err = %v, %d children, want one child", name, errs[i], children[i])
		}
	}
	if docs := a.pool.warmDocs.Load(); docs != 2 {
		t.Errorf("%d documents converted warm, want 2", docs)
	}
	if why := lastRetired(a); !strings.Contains(why, "no pdf for document") {
		t.Errorf("the converter's last early retirement = %q, want one for a document without its pdf", why)
	}
}

func TestConvertingDoc(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		want       int
		ok         bool
	}{
		{name: "convert", line: "convert /w/b1/in/doc-12.docx -> /w/b1/out/doc-12.pdf using filter : writer_pdf_Export", want: 12, ok: true},
		{name: "first", line: "convert /w/b1/in/doc-0.xls -> /w/b1/out/doc-0.pdf using filter : calc_pdf_Export", want: 0, ok: true},
		{name: "past the batch", line: "convert /w/b1/in/doc-3.docx -> /w/b1/out/doc-3.pdf using filter : x", ok: false},
		{name: "negative", line: "convert /w/b1/in/doc--1.docx -> /w/b1/out/doc--1.pdf using filter : x", ok: false},
		{name: "not in in", line: "convert /w/b1/out/doc-1.docx -> /w/b1/out/doc-1.pdf using filter : x", ok: false},
		{name: "other name", line: "convert /w/b1/in/x-1.docx -> /w/b1/out/x-1.pdf using filter : x", ok: false},
		{name: "name ending in doc-", line: "convert /w/b1/in/adoc-1.docx -> /w/b1/out/adoc-1.pdf using filter : x", ok: false},
		{name: "no arrow", line: "convert /w/b1/in/doc-1.docx", ok: false},
		{name: "warning", line: "Warning: failed to launch javaldx - java may not function correctly", ok: false},
		{name: "error", line: "Error: source file could not be loaded", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := convertingDoc(tt.line, 3+10*tt.want)
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("convertingDoc(%q) = %d, %v; want %d, %v", tt.line, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// fakeSoffice returns a LibreOffice (a shell script) that converts by writing a small PDF per
// file and says so as LibreOffice does, before it writes it. In a batch (files named doc-<i>),
// it takes 12 s over a file holding "slow", hangs on one holding "hang", after the others, and
// dies (kill -9) as it opens one holding "crash". Gated, when it makes a warm converter's
// profile (converting warmup.txt) it waits until the file "go" is in its directory.
func fakeSoffice(gated bool) string {
	gate := ""
	if gated {
		gate = `case "$*" in
*warmup.txt*)
  i=0
  while [ ! -e go ] && [ $i -lt 3000 ]; do
    sleep 0.1
    i=$((i + 1))
  done ;;
esac
`
	}
	return "#!/bin/sh\n" + gate + fakeSofficeConvert
}

const fakeSofficeConvert = `out=.
for a in "$@"; do
  if [ "$prev" = --outdir ]; then out=$a; fi
  prev=$a
done
mkdir -p "$out"
convert() {
  n=${1##*/}
  n=${n%.*}
  case "$n" in
  doc-*) if grep -q crash "$1"; then kill -9 $$; fi ;;
  esac
  echo "convert $1 -> $out/$n.pdf using filter : fake"
  case "$n" in
  doc-*)
    if grep -q slow "$1"; then sleep 12; fi
    if grep -q hang "$1"; then exec sleep 100000; fi ;;
  esac
  printf '%%PDF-1.4\n%%%%EOF\n' >"$out/$n.pdf"
}
for pass in rest hang; do
  for f in "$@"; do
    [ -f "$f" ] || continue
    if grep -q hang "$f"; then
      if [ $pass = hang ]; then convert "$f"; fi
    elif [ $pass = rest ]; then
      convert "$f"
    fi
  done
done
exit 0
`

// TestWarmDocumentTimeLimit: the time limit (20 s here) applies to each document of a batch,
// not to the batch. A LibreOffice (a fake) that takes 12 s over each of two documents, then hangs
// on a third, converts the first two warm and is killed once it has said nothing for the time
// limit; the third document is converted cold.
func TestWarmDocumentTimeLimit(t *testing.T) {
	useFakeSoffice(t, true)
	a := New()
	a.pool.idle = time.Hour
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	odt := "application/vnd.oasis.opendocument.text"
	contents := []string{"slow 1", "slow 2", "hang"}
	// One batch: the converter is made ready once the three documents wait for it.
	w := a.pool.get(t.Context(), 4, converter.Limits{Timeout: 20 * time.Second}, base)
	if w == nil {
		t.Fatal("no warm converter")
	}
	tasks := make([]*action.Task, len(contents))
	for i, content := range contents {
		tasks[i] = sharedTask(t, base, 4, strconv.Itoa(i)+".odt", odt, []byte(content))
		tasks[i].With = map[string]any{"timeout": "20s"}
	}
	// A document's PDF is handed on while the batch goes on: the first two documents' tasks end
	// while LibreOffice still runs (it hangs on the third until killed).
	var early atomic.Int64
	wait := runAll(t, a, tasks, func(i int) {
		select {
		case <-w.proc.Done():
		default:
			if i < 2 {
				early.Add(1)
			}
		}
	})
	poll.Until(t, 2*time.Minute, "the documents to wait for the converter", func() (bool, string) {
		w.mu.Lock()
		pending := w.pending
		w.mu.Unlock()
		return pending == len(contents), fmt.Sprintf("%d of %d documents wait", pending, len(contents))
	})
	if err := os.WriteFile(filepath.Join(w.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errs, children := wait()
	if b := a.pool.batches.Load(); b != 1 {
		t.Errorf("%d batches, want the three documents in one", b)
	}
	for i, content := range contents {
		if errs[i] != nil || children[i] != 1 {
			t.Errorf("%q: err = %v, %d children, want one child", content, errs[i], children[i])
		}
	}
	if docs := a.pool.warmDocs.Load(); docs != 2 {
		t.Errorf("%d documents converted warm, want 2", docs)
	}
	if n := early.Load(); n != 2 {
		t.Errorf("%d of the first two documents' tasks ended while LibreOffice ran, want 2", n)
	}
	if why := lastRetired(a); !strings.Contains(why, "no progress within 20s") {
		t.Errorf("the converter's last early retirement = %q, want one for no progress", why)
	}
}

// lastRetired says why a's last converter retired early went, or "".
func lastRetired(a *Action) string {
	if why := a.pool.lastRetired.Load(); why != nil {
		return *why
	}
	return ""
}

// useFakeSoffice puts fakeSoffice(gated) first in PATH.
func useFakeSoffice(t *testing.T, gated bool) {
	convertertest.RequireTools(t, "bwrap")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "soffice"), []byte(fakeSoffice(gated)), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
}

// convertFakes converts, as job 5, one .odt document per content, and checks that each gave
// its PDF.
func convertFakes(t *testing.T, a *Action, contents []string) {
	t.Helper()
	base := t.TempDir()
	tasks := make([]*action.Task, len(contents))
	for i, content := range contents {
		tasks[i] = sharedTask(t, base, 5, strconv.Itoa(i)+".odt", "application/vnd.oasis.opendocument.text", []byte(content))
	}
	errs, children := runAll(t, a, tasks, nil)()
	for i, content := range contents {
		if errs[i] != nil || children[i] != 1 {
			t.Errorf("%q: err = %v, %d children, want one child", content, errs[i], children[i])
		}
	}
}

// TestWarmRetiredHandsOn: the documents waiting for a converter when it retires, having
// converted its quota, go to the next converter, not to cold runs (they did, before: every
// warmMaxDocs documents of a big job, as many as were waiting converted cold).
func TestWarmRetiredHandsOn(t *testing.T) {
	useFakeSoffice(t, false)
	a := New()
	a.pool.idle, a.pool.maxDocs, a.pool.maxBatch = time.Hour, 2, 2
	t.Cleanup(a.Close)
	convertFakes(t, a, []string{"1", "2", "3", "4", "5", "6"})
	if docs := a.pool.warmDocs.Load(); docs != 6 {
		t.Errorf("%d documents converted warm, want all 6 (%d converters, %d batches; %q)", docs, a.pool.started.Load(), a.pool.batches.Load(), lastRetired(a))
	}
	if n := a.pool.started.Load(); n < 3 {
		t.Errorf("%d converters started, want at least 3 (2 documents each)", n)
	}
}

// TestWarmCrashHandsOn: when LibreOffice dies opening a document, that document is converted
// cold (where a real LibreOffice would say what is wrong with it), and the documents of its
// batch that LibreOffice had not opened go to the next warm converter.
func TestWarmCrashHandsOn(t *testing.T) {
	useFakeSoffice(t, false)
	a := New()
	a.pool.idle = time.Hour
	t.Cleanup(a.Close)
	convertFakes(t, a, []string{"1", "2", "crash", "4", "5", "6", "7"})
	if docs := a.pool.warmDocs.Load(); docs != 6 {
		t.Errorf("%d documents converted warm, want all 6 but the one LibreOffice died on", docs)
	}
	if why := lastRetired(a); !strings.Contains(why, "failed") {
		t.Errorf("the converter's last early retirement = %q, want a failed batch", why)
	}
}

// TestWarmSuccessorStarted: a converter's last batch starts its successor, so that the job's next
// documents do not wait for LibreOffice to make a profile (warmpool.TestPrestart: the job takes
// it); before, a process that had served one job started a converter only when a document asked
// for one.
func TestWarmSuccessorStarted(t *testing.T) {
	useFakeSoffice(t, false)
	a := New()
	a.pool.idle, a.pool.maxDocs = time.Hour, 1
	t.Cleanup(a.Close)
	convertFakes(t, a, []string{"1"})
	poll.Until(t, time.Minute, "the successor to start", func() (bool, string) {
		n := a.pool.started.Load()
		return n == 2, fmt.Sprintf("%d converters started", n)
	})
}

// TestCheckProfileRegistryBound: a registrymodifications.xcu a document has grown past
// maxRegistry fails the profile check unread (the converter writes it, up to the sandbox's 4 GiB
// file limit); one holding the hardening settings passes, one missing a setting fails.
func TestCheckProfileRegistryBound(t *testing.T) {
	t.Parallel()
	w := &warm{dir: t.TempDir(), profile: map[string]bool{}}
	user := filepath.Join(w.dir, "profile", "user")
	if err := os.MkdirAll(user, 0o755); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(user, "registrymodifications.xcu")
	write := func(s string) {
		if err := os.WriteFile(reg, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(hardening)
	if ok, why := w.checkProfile(); !ok {
		t.Fatalf("the hardened registry fails the check: %s", why)
	}
	write(strings.Replace(hardening, "<item ", "<!-- removed -->", 1))
	if ok, _ := w.checkProfile(); ok {
		t.Error("a registry missing a hardening setting passes the check")
	}
	write(hardening)
	if err := os.Truncate(reg, maxRegistry+1); err != nil { // sparse: no disk, but its size
		t.Fatal(err)
	}
	if ok, why := w.checkProfile(); ok || !strings.Contains(why, "has grown to") {
		t.Errorf("a registry of %d bytes: check %v (%q), want it failed unread", maxRegistry+1, ok, why)
	}
}
