package html

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/poll"
)

// warmTask returns a task of job for an HTML document whose attempt dir lies in base, as an
// engine's lie in its <data dir>/tmp: warm converters are made beside the attempt dirs and
// outlive them.
func warmTask(t *testing.T, base string, job int64, name string, data []byte, with map[string]any) *action.Task {
	t.Helper()
	task := actiontest.NewTask(t, name, "text/html", data, with, nil)
	task.JobID, task.Item.JobID = job, job
	dir, err := os.MkdirTemp(base, "task-")
	if err != nil {
		t.Fatal(err)
	}
	task.TempDir = dir
	return task
}

// runHTML runs a on one document of job and returns its child.
func runHTML(t *testing.T, a *Action, base string, job int64, name string, data []byte, with map[string]any) actiontest.RecordedChild {
	t.Helper()
	rec := &actiontest.Recorder{}
	if err := a.Run(t.Context(), warmTask(t, base, job, name, data, with), rec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(rec.Children) != 1 {
		t.Fatalf("%s: %d children, want 1", name, len(rec.Children))
	}
	return rec.Children[0]
}

// coldPDF renders data as the action does, with a Chromium of its own, and normalizes the PDF
// as the action does.
func coldPDF(t *testing.T, data []byte) []byte {
	t.Helper()
	doc, _ := Decode(data)
	root, _, err := parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	r := &converter.Runner{Limits: converter.Limits{Timeout: converter.DefaultTimeout, MemoryLimit: -1}, Dir: t.TempDir()}
	pdf, _, err := render(t.Context(), r, "chromium", Inert(root))
	if err != nil {
		t.Fatalf("cold render: %v", err)
	}
	return converter.NormalizePDF(pdf)
}

// warmDocs returns the HTML documents the warm tests render, by name: the corpus's, the other
// tests' and the hostile ones.
func warmDocs(t *testing.T) map[string][]byte {
	t.Helper()
	docs := map[string][]byte{}
	for _, name := range []string{"testHTML_utf8.html", "testHTML_charset_utf16le.html"} {
		b, err := os.ReadFile(convertertest.File(t, name))
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = b
	}
	docs["net.html"] = []byte(`<html><body><p>offline page</p><img src="http://example.com/x.png"><script src="https://example.com/x.js"></script>
<link rel="stylesheet" href="http://93.184.216.34/x.css"></body></html>`)
	docs["styled.html"] = []byte(`<!doctype html><html><head><title>Styled</title><style>@page{size:A5}h1{color:#a00;font-family:serif}</style></head>
<body><h1>Head</h1><p>One <b>bold</b> word</p><img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="></body></html>`)
	for name, doc := range convertertest.NewCanary(t).HostileHTML() {
		docs["hostile-"+name] = []byte(doc)
	}
	return docs
}

// TestWarmSameBytes renders the documents twice over through one job's warm converter, in one
// Chromium, and checks each PDF is the same bytes as the document rendered cold, by a Chromium
// of its own — hostile documents in between included — and that the warm converter rendered
// them all.
func TestWarmSameBytes(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "chromium", "pdftoppm", "bwrap")
	docs := warmDocs(t)
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	sort.Strings(names)
	cold := map[string][]byte{}
	for _, name := range names {
		cold[name] = coldPDF(t, docs[name])
	}
	a := New(nil)
	a.pool.idle = time.Hour
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	for round := range 2 {
		for _, name := range names {
			c := runHTML(t, a, base, 1, name, docs[name], nil)
			if c.Metadata["renderer"] != "chromium" {
				t.Fatalf("%s: not rendered by chromium: %v", name, c.Metadata)
			}
			if !bytes.Equal(c.Data, cold[name]) {
				t.Errorf("round %d, %s: the warm PDF (%d bytes) differs from the cold one (%d bytes)", round, name, len(c.Data), len(cold[name]))
			}
		}
	}
	if why := a.pool.lastRetired.Load(); why != nil {
		t.Logf("a converter was retired early: %s", *why)
	}
	if n := a.pool.started.Load(); n != 1 {
		t.Errorf("%d converters started for one job, want 1", n)
	}
	if n := a.pool.warmDocs.Load(); n != int64(2*len(names)) {
		t.Errorf("%d of %d documents rendered warm", n, 2*len(names))
	}
}

// probe is a document that, with JavaScript on, leaves what state it can — window.name, local
// and session storage, a cookie, an IndexedDB database, a window it opens, a service worker —
// and writes what it found of an earlier document's into its page, and what it could set itself
// (the control that its script ran).
const probe = `<html><body><p id=o>none</p><script>
var out = [];
function tr(n, f) { try { out.push(n + "=" + f()) } catch (e) { out.push(n + "!" + e.name) } }
tr("name", () => window.name);
tr("storage", () => localStorage.getItem("k") + sessionStorage.getItem("k"));
tr("cookie", () => document.cookie);
tr("opener", () => String(window.opener));
tr("left", () => window.name = "left-by-a-document");
tr("setstorage", () => { localStorage.setItem("k", "x"); sessionStorage.setItem("k", "x"); return "ok" });
tr("setcookie", () => { document.cookie = "k=x; max-age=3600"; return document.cookie });
tr("idb", () => { indexedDB.open("k"); return "ok" });
tr("open", () => String(window.open("about:blank", "kept") != null));
tr("sw", () => typeof navigator.serviceWorker);
tr("readback", () => window.name);
document.getElementById("o").textContent = out.join(" ");
</script></body></html>`

// TestWarmIsolation: documents of two jobs go to two converters, each in a sandbox and a
// directory of its own; a document that leaves what state it can (JavaScript on, which the
// action never allows, to give it every chance) leaves nothing a later document of its job or of
// another job finds; a converter in which something was left behind, whose Chromium crashed or
// whose render ran past its time limit is retired, and its document still gets its PDF; Close
// ends every converter's sandbox and removes its directory.
func TestWarmIsolation(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "chromium", "pdftoppm", "pdftotext", "bwrap")
	a := New(nil)
	// Converters must not retire idle while the test looks at them.
	a.pool.idle = time.Hour
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	page := []byte(`<html><body><p>plain page</p></body></html>`)
	runHTML(t, a, base, 1, "a.html", page, nil)
	runHTML(t, a, base, 2, "b.html", page, nil)
	w1, _ := a.pool.Job(1)
	w2, _ := a.pool.Job(2)
	if w1 == nil || w2 == nil || w1 == w2 || w1.dir == w2.dir || w1.ch.proc.Pid() == w2.ch.proc.Pid() {
		t.Fatalf("jobs 1 and 2 share a converter or have none: %+v %+v", w1, w2)
	}
	for _, w := range []*warm{w1, w2} {
		other := w2.dir
		if w == w2 {
			other = w1.dir
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(w.ch.proc.Pid()), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), other) {
			t.Errorf("the sandbox of %s binds %s", w.dir, other)
		}
	}

	// State: the probe runs with JavaScript on, three times in job 1's Chromium and once in
	// job 2's; each run must find nothing, and set what it could.
	probes := func(w *warm, n int) []string {
		<-w.turn
		w.ch.cdp.scripts = true
		w.turn <- struct{}{}
		defer func() {
			<-w.turn
			w.ch.cdp.scripts = false
			w.turn <- struct{}{}
		}()
		var texts []string
		for range n {
			pdf, _, err := w.render(t.Context(), probe, time.Minute, nil)
			if err != nil {
				t.Fatalf("probe: %v (%v)", err, a.pool.lastRetired.Load())
			}
			texts = append(texts, strings.Join(strings.Fields(convertertest.PDFText(t, pdf)), " "))
		}
		return texts
	}
	texts := append(probes(w1, 3), probes(w2, 1)...)
	for i, txt := range texts {
		if !strings.Contains(txt, "readback=left-by-a-document") {
			t.Fatalf("probe %d: its script did not run: %q", i, txt)
		}
		if !strings.Contains(txt, "name= ") || !strings.Contains(txt, "opener=null") {
			t.Errorf("probe %d found state an earlier document left: %q", i, txt)
		}
		if txt != texts[0] {
			t.Errorf("probe %d saw %q, the first saw %q", i, txt, texts[0])
		}
	}
	if w1.Retired() || w2.Retired() {
		t.Fatalf("a probe retired its converter: %v", *a.pool.lastRetired.Load())
	}

	// Tampering: a browser context with a page outlives its document in job 1's Chromium, as
	// if a document had kept one. The next render finds it: the converter is retired, and the
	// document rendered cold.
	<-w1.turn
	var kept struct {
		ID string `json:"browserContextId"`
	}
	err := w1.ch.cdp.call("", "Target.createBrowserContext", nil, &kept)
	if err == nil {
		err = w1.ch.cdp.call("", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": kept.ID}, nil)
	}
	w1.turn <- struct{}{}
	if err != nil {
		t.Fatal(err)
	}
	if c := runHTML(t, a, base, 1, "c.html", page, nil); c.Metadata["renderer"] != "chromium" {
		t.Errorf("the document rendered after the tampering: %v", c.Metadata)
	}
	if !w1.Retired() {
		t.Errorf("the converter in which a page was left was not retired")
	} else if why := *a.pool.lastRetired.Load(); !strings.Contains(why, "left something behind") {
		t.Errorf("retired for %q, want a page left behind", why)
	}
	runHTML(t, a, base, 1, "d.html", page, nil)
	w3, _ := a.pool.Job(1)
	if w3 == nil || w3 == w1 {
		t.Fatalf("job 1 did not get a new converter after its first was retired")
	}

	// A crash: job 1's Chromium is killed between documents. The next document is rendered
	// cold, and the converter retired.
	<-w3.turn
	pid := w3.ch.proc.Pid()
	w3.turn <- struct{}{}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w3.ch.proc.Done()
	if c := runHTML(t, a, base, 1, "e.html", page, nil); c.Metadata["renderer"] != "chromium" {
		t.Errorf("the document rendered after the crash: %v", c.Metadata)
	}
	if !w3.Retired() {
		t.Errorf("the converter whose Chromium crashed was not retired")
	}

	// A render past its time limit (here one of a millisecond) retires the converter; the
	// document, past the limit cold too, gets the text rendering.
	runHTML(t, a, base, 1, "f.html", page, nil)
	w4, _ := a.pool.Job(1)
	c := runHTML(t, a, base, 1, "g.html", page, map[string]any{"timeout": "1ms"})
	if c.Metadata["renderer"] != "text" || !strings.Contains(c.Metadata["render_error"].(string), "timed out") {
		t.Errorf("the document past its time limit: %v", c.Metadata)
	}
	if !w4.Retired() {
		t.Errorf("the converter whose render ran past its time limit was not retired")
	} else if why := *a.pool.lastRetired.Load(); !strings.Contains(why, "timed out") {
		t.Errorf("retired for %q, want a time limit", why)
	}

	a.Close()
	for _, w := range []*warm{w1, w2, w3, w4} {
		<-w.gone
		if _, err := os.Stat(w.dir); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Close (%v)", w.dir, err)
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(w.ch.proc.Pid()))); err == nil {
			t.Errorf("the sandbox of %s (pid %d) still runs after Close", w.dir, w.ch.proc.Pid())
		}
	}
}

// twoDocAction returns an action whose warm converters retire after two documents, and a
// directory for attempt dirs.
func twoDocAction(t *testing.T) (*Action, string) {
	convertertest.RequireTools(t, "chromium", "pdftoppm", "bwrap")
	a := New(nil)
	a.pool.idle, a.pool.maxDocs = time.Hour, 2
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	return a, base
}

// TestWarmRetiresAfterMaxDocs: a converter is retired once it has rendered its quota, and the
// job's next document gets a new one.
func TestWarmRetiresAfterMaxDocs(t *testing.T) {
	t.Parallel()
	a, base := twoDocAction(t)
	page := []byte(`<html><body><p>plain page</p></body></html>`)
	runHTML(t, a, base, 1, "a.html", page, nil)
	w, _ := a.pool.Job(1)
	runHTML(t, a, base, 1, "b.html", page, nil)
	if !w.Retired() {
		t.Errorf("the converter was not retired after %d documents", a.pool.maxDocs)
	}
	runHTML(t, a, base, 1, "c.html", page, nil)
	if next, _ := a.pool.Job(1); next == nil || next == w {
		t.Errorf("the job kept its retired converter")
	}
}

// TestWarmRetiredHandsOn: the documents waiting for a converter's turn when it retires, having
// rendered its quota, go to the job's next converter, not to cold renders (they did, before:
// every warmMaxDocs documents of a big job, as many as were waiting rendered cold).
func TestWarmRetiredHandsOn(t *testing.T) {
	t.Parallel()
	a, base := twoDocAction(t)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			page := []byte(`<html><body><p>page ` + strconv.Itoa(i) + `</p></body></html>`)
			rec := &actiontest.Recorder{}
			errs[i] = a.Run(t.Context(), warmTask(t, base, 1, strconv.Itoa(i)+".html", page, nil), rec)
			if errs[i] == nil && len(rec.Children) != 1 {
				errs[i] = fmt.Errorf("%d children, want 1", len(rec.Children))
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("document %d: %v", i, err)
		}
	}
	if docs := a.pool.warmDocs.Load(); docs != n {
		t.Errorf("%d documents rendered warm, want all %d (%d converters started)", docs, n, a.pool.started.Load())
	}
}

// TestWarmSuccessorStarted: a converter rendering its last document starts its successor, so
// that the job's next document does not wait for Chromium to start.
func TestWarmSuccessorStarted(t *testing.T) {
	t.Parallel()
	a, base := twoDocAction(t)
	page := []byte(`<html><body><p>plain page</p></body></html>`)
	runHTML(t, a, base, 1, "a.html", page, nil)
	runHTML(t, a, base, 1, "b.html", page, nil)
	poll.Until(t, time.Minute, "the successor to start", func() (bool, string) {
		n := a.pool.started.Load()
		return n == 2, fmt.Sprintf("%d converters started", n)
	})
}
