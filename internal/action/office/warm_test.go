package office

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
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
	t.Cleanup(a.Close)
	base := t.TempDir()
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
	t.Cleanup(a.Close)
	base := t.TempDir()
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
