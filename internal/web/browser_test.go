package web_test

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-project/sluice/internal/store"
)

// corpusFiles is the shared test corpus (shared/corpus/files in the workspace, next to the module).
const corpusFiles = "../../../shared/corpus/files"

// requireTools skips the test when a tool is missing, or fails it when
// SLUICE_TEST_REQUIRE_TOOLS=1 (CI), so the browser tests cannot pass by being skipped there.
func requireTools(t *testing.T, tools ...string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	var missing []string
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			missing = append(missing, tool)
			continue
		}
		paths[tool] = p
	}
	if len(missing) > 0 {
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("tools missing (SLUICE_TEST_REQUIRE_TOOLS=1): %v; apt-get install chromium poppler-utils", missing)
		}
		t.Skipf("tools missing: %v (set SLUICE_TEST_REQUIRE_TOOLS=1 to fail instead)", missing)
	}
	return paths
}

// browser starts Debian's headless Chromium for the test and returns a tab's context.
func browser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// tab is a browser tab of the test server.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string // screenshot dir
	axe  string // axe-core's script; empty: no accessibility checks
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
}

func (tb *tab) open(path string) { tb.t.Helper(); tb.do(chromedp.Navigate(tb.base + path)) }

// eval evaluates a JavaScript expression (awaiting a promise) and decodes its value.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the expression is true, polling with a deadline; errors while a page
// loads count as "not yet". state is evaluated for the failure message.
func (tb *tab) waitJS(d time.Duration, what, cond, state string) {
	tb.t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
			seen, _ := chromedp.Run(ctx, chromedp.Evaluate[string](state))
			cancel()
			tb.t.Fatalf("timed out after %s waiting for %s (last error %v); page shows: %s", d, what, err, seen)
		}
		select {
		case <-tb.ctx.Done():
			tb.t.Fatal(tb.ctx.Err())
		case <-tick.C:
		}
	}
}

// screenshot saves a full-page screenshot as NAME.png in the screenshot dir.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(b) < 1000 {
		tb.t.Fatalf("screenshot %s is %d bytes", name, len(b))
	}
	p := filepath.Join(tb.shot, name+".png")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s", p)
}

func (tb *tab) signIn(token string) {
	tb.t.Helper()
	tb.open("/signin")
	tb.do(chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin")))
	tb.waitJS(10*time.Second, "the jobs page after sign-in", `location.pathname === "/jobs" && document.querySelector("h1")?.textContent === "Jobs"`, `location.href`)
}

func screenshotDir(t *testing.T) string {
	if d := os.Getenv("SLUICE_TEST_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// testFiles writes the upload of the tour: a zip of two text files, a PDF and a broken PDF
// (a real one truncated).
func testFiles(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	zpath := filepath.Join(dir, "letters.zip")
	f, err := os.Create(zpath)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, text := range map[string]string{
		"letters/first.txt":  "Dear reader,\n\nThe sluice gate opens at dawn; the water runs through the mill.\n",
		"letters/second.txt": "A second letter, about the harvest and the weather in the valley.\n",
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(w, text)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	good, err := os.ReadFile(filepath.Join(corpusFiles, "testPDF_acroform3.pdf"))
	if err != nil {
		t.Fatalf("the shared corpus is missing (%v): the browser test needs %s", err, corpusFiles)
	}
	gpath := filepath.Join(dir, "form.pdf")
	bpath := filepath.Join(dir, "broken.pdf")
	if err := os.WriteFile(gpath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bpath, good[:1200], 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{zpath, gpath, bpath}
}

// TestBrowserTour drives Debian's headless Chromium through the UI: sign in, upload three
// files (a zip, a PDF, a broken PDF) with per-file progress, follow the job to 100 %, see the
// documents' thumbnails load and the broken PDF's error with its reason, read a document; a
// reader gets no controls and a forged POST is refused; then the workflow editor: create a
// workflow, make it invalid and see the error at its step, fix it and see the diagram change,
// save version 2. Screenshots of each page go to $SLUICE_TEST_SCREENSHOTS (or a temp dir).
func TestBrowserTour(t *testing.T) {
	tools := requireTools(t, "chromium", "pdfinfo", "pdftotext", "pdftoppm")
	b := setup(t)
	shots := screenshotDir(t)
	files := testFiles(t)
	ctx := browser(t, tools["chromium"])
	admin := &tab{t: t, ctx: ctx, base: b.url, shot: shots, axe: axeScript(t)}

	admin.open("/signin")
	admin.waitJS(10*time.Second, "the sign-in page", `document.readyState === "complete" && document.querySelector("#token") !== null`, `location.href`)
	admin.checkA11y("sign-in")
	admin.signIn(b.admin)
	admin.checkA11y("jobs list (empty)")
	if !eval[bool](admin, `document.querySelector("#new-job") !== null`) {
		t.Fatal("an admin does not see the new-job link")
	}

	// Upload three files, watching each file's progress.
	admin.do(chromedp.Click(chromedp.ID("new-job")))
	admin.waitJS(10*time.Second, "the new-job form", `location.pathname === "/jobs/new" && document.readyState === "complete" && document.querySelector("#files") !== null`, `location.href`)
	admin.do(chromedp.SetUploadFiles(chromedp.ID("files"), files))
	admin.waitJS(5*time.Second, "three files listed", `document.querySelectorAll("#uploads li").length === 3`, `document.querySelector("#uploads").innerText`)
	admin.screenshot("02-new-job")
	admin.checkA11y("new job")
	// Record the highest value each file's bar reaches; sessionStorage outlives the navigation.
	eval[chromedp.Void](admin, `(() => {
		const seen = {};
		const note = () => { document.querySelectorAll("#uploads li").forEach((li) => {
			const n = li.querySelector(".file-name").textContent, v = li.querySelector("progress").value;
			seen[n] = Math.max(seen[n] || 0, v); }); sessionStorage.setItem("uploads", JSON.stringify(seen)); };
		new MutationObserver(note).observe(document.querySelector("#uploads"), {subtree: true, characterData: true, childList: true, attributes: true});
		document.querySelector("#new-job-form").addEventListener("submit", () => setTimeout(note, 0));
	})()`)
	// Metadata typed as text and as JSON reaches the job as typed (TestNewJobFormMetadata
	// posts what the script makes of it).
	admin.do(chromedp.SetValue(chromedp.ID("metadata"), formMetadata))
	admin.do(chromedp.Click(chromedp.ID("start")))
	admin.waitJS(30*time.Second, "the job page", `/^\/jobs\/\d+$/.test(location.pathname)`, `document.querySelector("#upload-status")?.textContent || location.href`)
	if id, err := strconv.ParseInt(strings.TrimPrefix(eval[string](admin, `location.pathname`), "/jobs/"), 10, 64); err != nil {
		t.Error(err)
	} else if j, err := b.n.Store.JobGet(t.Context(), id); err != nil {
		t.Error(err)
	} else {
		checkFormMetadata(t, "the job the form created", j.Metadata)
	}
	var uploads map[string]float64
	if err := json.Unmarshal([]byte(eval[string](admin, `sessionStorage.getItem("uploads") || "{}"`)), &uploads); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if uploads[filepath.Base(f)] != 100 {
			t.Errorf("the upload bar of %s reached %v %%, want 100 (all: %v)", filepath.Base(f), uploads[filepath.Base(f)], uploads)
		}
	}
	jobPath := eval[string](admin, `location.pathname`)

	// The progress bar, fed by server-sent events, reaches 100 % and the job completes; the page
	// then reloads itself, and the page the server rendered for the complete job follows no
	// progress (the tree is read from that one, not from the page being left).
	admin.waitJS(90*time.Second, "the job to complete at 100 %",
		`document.readyState === "complete" && document.querySelector(".progress[data-live-job]") === null && document.querySelector("#job-state")?.textContent.trim() === "complete" && document.querySelector(".pct")?.textContent === "100 %" && document.querySelector(".progress progress")?.value === 100`,
		`(document.querySelector("#job-state")?.textContent || "") + " " + (document.querySelector(".pct")?.textContent || "")`)
	roots := eval[int](admin, `document.querySelectorAll("#tree > li.item").length`)
	if roots != 3 {
		t.Errorf("the job's tree shows %d roots, want 3", roots)
	}
	// The zip's items load lazily.
	admin.do(chromedp.Click(chromedp.CSS(`#tree button.children`)))
	admin.waitJS(10*time.Second, "the zip's items", `[...document.querySelectorAll("#tree ul.tree li.item .name")].some((a) => a.textContent.includes("first.txt"))`, `document.querySelector("#tree").innerText`)
	reason := eval[string](admin, `[...document.querySelectorAll(".errors tr.error-row")].filter((r) => r.innerText.includes("broken.pdf")).map((r) => r.querySelector(".reason").textContent).join("|")`)
	if strings.TrimSpace(reason) == "" {
		t.Errorf("the job page lists no error for broken.pdf")
	}
	admin.screenshot("03-job")
	admin.checkA11y("job")

	// The documents grid: every thumbnail loads; the broken PDF's error and reason are listed.
	admin.do(chromedp.Click(chromedp.ID("documents-link")))
	admin.waitJS(30*time.Second, "the thumbnails to load",
		`(() => { const imgs = [...document.querySelectorAll("#documents img.thumb")]; return imgs.length >= 3 && imgs.every((i) => i.complete && i.naturalWidth > 0); })()`,
		`[...document.querySelectorAll("#documents img.thumb")].map((i) => i.src + " " + i.complete + " " + i.naturalWidth).join("; ") || document.querySelector("main").innerText`)
	docs := eval[int](admin, `document.querySelectorAll("#documents li.doc").length`)
	if docs < 3 {
		t.Errorf("%d documents, want at least 3 (two letters and the PDF)", docs)
	}
	row := eval[string](admin, `[...document.querySelectorAll(".errors tr.error-row")].map((r) => r.innerText).join("\n")`)
	if !strings.Contains(row, "broken.pdf") {
		t.Fatalf("the documents page does not list broken.pdf's error; errors: %q", row)
	}
	reason = eval[string](admin, `[...document.querySelectorAll(".errors tr.error-row")].find((r) => r.innerText.includes("broken.pdf")).querySelector(".reason").textContent`)
	if len(strings.TrimSpace(reason)) < 5 {
		t.Errorf("broken.pdf's error has no reason: %q", reason)
	}
	t.Logf("broken.pdf: %s", reason)
	admin.screenshot("04-documents")
	admin.checkA11y("documents")

	// A document: its text beside its PDF, with downloads.
	admin.do(chromedp.Click(chromedp.CSS(`#documents li.doc a`)))
	admin.waitJS(10*time.Second, "the viewer", `document.readyState === "complete" && document.querySelector("#text") !== null && document.querySelector(".downloads a") !== null`, `document.querySelector("main")?.innerText`)
	if txt := eval[string](admin, `document.querySelector("#text").textContent`); strings.TrimSpace(txt) == "" {
		t.Error("the viewer shows no text")
	}
	admin.screenshot("05-viewer")
	admin.checkA11y("viewer")

	// A forged POST (no CSRF token) from the signed-in browser is refused, and changes nothing.
	status := eval[int](admin, `fetch("`+jobPath+`/retry", {method: "POST", body: new URLSearchParams({x: "1"})}).then((r) => r.status)`)
	if status != 403 {
		t.Errorf("a POST without the CSRF token got %d, want 403", status)
	}
	status = eval[int](admin, `fetch("/ui/api`+strings.TrimPrefix(jobPath, "")+`/cancel", {method: "POST"}).then((r) => r.status)`)
	if status != 403 {
		t.Errorf("a POST to /ui/api without the CSRF token got %d, want 403", status)
	}

	// A reader sees no controls and is refused. (The admin signs out first: one browser.)
	admin.do(chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)))
	admin.waitJS(10*time.Second, "the sign-in page", `location.pathname === "/signin" && document.querySelector("#token") !== null`, `location.href`)
	reader := admin
	reader.signIn(b.reader)
	if eval[bool](reader, `document.querySelector("#new-job") !== null || [...document.querySelectorAll("a,button")].some((e) => /new job|\bstart\b/i.test(e.textContent))`) {
		t.Error("a reader sees the start (new job) control")
	}
	reader.open(jobPath)
	reader.waitJS(10*time.Second, "the job page", `document.querySelector("#job-state") !== null`, `location.href`)
	if eval[bool](reader, `document.querySelector("#cancel, #retry, #fire, form[action$='/cancel'], form[action$='/retry']") !== null`) {
		t.Error("a reader sees cancel, retry or event controls")
	}
	status = eval[int](reader, `fetch("`+jobPath+`/retry", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: new URLSearchParams({csrf: document.querySelector('meta[name="csrf-token"]').content})}).then((r) => r.status)`)
	if status != 403 {
		t.Errorf("a reader's POST with a good CSRF token got %d, want 403", status)
	}
	status = eval[int](reader, `fetch("/jobs/new").then((r) => r.status)`)
	if status != 403 {
		t.Errorf("a reader's GET /jobs/new got %d, want 403", status)
	}
	reader.screenshot("06-reader-job")
	reader.checkA11y("reader's job")
	reader.do(chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)))
	reader.waitJS(10*time.Second, "the sign-in page", `location.pathname === "/signin"`, `location.href`)
	admin.signIn(b.admin)

	editorTour(t, admin, b)

	admin.open("/jobs")
	admin.waitJS(10*time.Second, "the jobs list", `document.querySelectorAll("tr.job").length === 1`, `document.querySelector("main").innerText`)
	if got := eval[string](admin, `document.querySelector("tr.job [data-job-state]").textContent + " " + document.querySelector("tr.job .pct").textContent`); got != "complete 100 %" {
		t.Errorf("the jobs list shows %q, want complete 100 %%", got)
	}
	admin.screenshot("01-jobs")
	admin.checkA11y("jobs list")

	// Phone width: the job page still fits.
	admin.do(chromedp.EmulateViewport(390, 844))
	admin.open(jobPath)
	admin.waitJS(10*time.Second, "the job page", `document.querySelector("#job-state") !== null`, `location.href`)
	if w := eval[int](admin, `document.documentElement.scrollWidth`); w > 400 {
		t.Errorf("at phone width the job page is %d px wide, want no horizontal scrolling", w)
	}
	admin.screenshot("09-phone-job")
	admin.checkA11y("job at phone width")
	admin.open(strings.TrimSuffix(jobPath, "/") + "/documents")
	admin.waitJS(10*time.Second, "the documents page", `document.querySelector("#documents") !== null`, `location.href`)
	if w := eval[int](admin, `document.documentElement.scrollWidth`); w > 400 {
		t.Errorf("at phone width the documents page is %d px wide", w)
	}
	admin.screenshot("10-phone-documents")
	admin.checkA11y("documents at phone width")

	// Dropping files on the new-job form lists them for upload, as choosing them does.
	admin.open("/jobs/new")
	admin.waitJS(10*time.Second, "the new-job form", `document.readyState === "complete" && document.querySelector("#drop") !== null`, `location.href`)
	eval[chromedp.Void](admin, `(() => {
		const dt = new DataTransfer();
		dt.items.add(new File(["dropped text"], "dropped.txt", {type: "text/plain"}));
		for (const type of ["dragenter", "dragover", "drop"]) {
			document.querySelector("#drop").dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
		}
	})()`)
	if got := eval[string](admin, `[...document.querySelectorAll("#uploads .file-name")].map((e) => e.textContent).join(",") + "|" + document.querySelector("#files").files.length`); got != "dropped.txt|1" {
		t.Errorf("after a drop the form lists %q, want dropped.txt|1", got)
	}
}

// editorTour creates a workflow in the editor, breaks and fixes it, and saves version 2.
func editorTour(t *testing.T, admin *tab, b *bundle) {
	t.Helper()
	setField := func(id, value string) {
		t.Helper()
		// As a person does: select what is there and type over it.
		eval[chromedp.Void](admin, `(() => { const e = document.getElementById(`+jsString(id)+`); e.focus(); e.select(); })()`)
		admin.do(chromedp.SendKeys(chromedp.ID(id), value))
	}
	admin.open("/workflows/new")
	admin.waitJS(10*time.Second, "the editor's form", `document.querySelector("#s0-needs") !== null && document.querySelector("#diagram").src.startsWith("data:")`, `document.querySelector("main").innerText`)
	setField("wf-name", "webflow")
	admin.waitJS(10*time.Second, "the YAML tab to follow the form", `document.querySelector("#yaml").value.includes("name: webflow")`, `document.querySelector("#yaml").value`)
	admin.do(chromedp.Click(chromedp.ID("save")))
	admin.waitJS(10*time.Second, "version 1 saved", `document.querySelector("#save-status").textContent.includes("Saved version 1 of webflow")`, `document.querySelector("#save-status").textContent`)
	admin.waitJS(10*time.Second, "version 1's changes: none to show", `document.querySelector("#save-changes").textContent.includes("first version of webflow")`, `document.querySelector("#save-changes").innerText`)

	admin.open("/workflows/webflow/edit")
	admin.waitJS(10*time.Second, "the editor on webflow", `document.querySelector("#s0-needs")?.value === "start" && document.querySelector("#validity").textContent.startsWith("Valid")`, `document.querySelector("main").innerText`)
	// Make it invalid: the step needs an event nothing fires. The error shows at that step's field.
	setField("s0-needs", "never-fired")
	admin.waitJS(10*time.Second, "the error at step detect",
		`(() => { const fs = document.querySelector('fieldset.step[data-step-name="detect"]');
			return fs && fs.classList.contains("has-problem") && [...fs.querySelectorAll(".problems li")].some((li) => li.textContent.includes("never-fired"))
				&& fs.querySelector("#s0-needs").getAttribute("aria-invalid") === "true" && fs.querySelector(".field-problem") !== null; })()`,
		`document.querySelector("#panel-form").innerText`)
	if v := eval[string](admin, `document.querySelector("#validity").textContent`); !strings.Contains(v, "problem") {
		t.Errorf("validity reads %q with an error", v)
	}
	broken := eval[string](admin, `document.querySelector("#diagram").src`)
	admin.screenshot("07-editor-invalid")
	admin.checkA11y("editor with a problem")

	// Fix it: the error goes, the diagram is redrawn.
	setField("s0-needs", "start")
	admin.waitJS(10*time.Second, "the error to go and the diagram to change",
		`document.querySelector(".field-problem") === null && document.querySelector("#validity").textContent.startsWith("Valid") && document.querySelector("#diagram").src !== `+jsString(broken),
		`document.querySelector("#validity").textContent`)
	fixed := eval[string](admin, `document.querySelector("#diagram").src`)
	if fixed == broken {
		t.Fatal("the diagram did not change")
	}
	// Add a step from the catalog: its settings form comes from the action's declared settings.
	admin.do(chromedp.SetValue(chromedp.ID("add-action"), "exec"), chromedp.Click(chromedp.ID("add-step")))
	admin.waitJS(10*time.Second, "the exec step with its settings form",
		`document.querySelector('fieldset.step[data-step-name="exec"] [data-field="with.command"]') !== null`, `document.querySelector("#steps").innerText`)
	// exec needs its command: a required setting left empty is an error at that field.
	admin.waitJS(10*time.Second, "the missing command at its field",
		`document.querySelector('fieldset.step[data-step-name="exec"] [data-field="with.command"]').getAttribute("aria-invalid") === "true"`,
		`document.querySelector('fieldset.step[data-step-name="exec"]').innerText`)
	setField("s1-with-command", "sha256sum")
	admin.waitJS(10*time.Second, "the workflow valid with two steps and a new diagram",
		`document.querySelector("#validity").textContent.startsWith("Valid") && document.querySelector("#yaml").value.includes("sha256sum") && document.querySelector("#diagram").src !== `+jsString(fixed),
		`document.querySelector("#validity").textContent + " " + document.querySelector("#yaml").value`)
	// Before saving, the editor shows what saving would change from version 1.
	admin.waitJS(10*time.Second, "the changes to save", `document.querySelector("#save-changes h2")?.textContent === "Changes to save, from v1" && [...document.querySelectorAll("#save-changes tr.ins .text")].some((e) => e.textContent.includes("sha256sum"))`,
		`document.querySelector("#save-changes").innerText`)
	admin.screenshot("08-editor")
	admin.checkA11y("editor")
	admin.do(chromedp.Click(chromedp.ID("save")))
	admin.waitJS(10*time.Second, "version 2 saved", `document.querySelector("#save-status").textContent.includes("Saved version 2 of webflow")`, `document.querySelector("#save-status").textContent`)
	// Saving shows the diff to the previous version: the exec step's lines added, nothing removed
	// but the detect step's lines around them unchanged.
	admin.waitJS(10*time.Second, "version 2's changes", `document.querySelector("#save-changes h2")?.textContent === "Changes from v1 to v2"`, `document.querySelector("#save-changes").innerText`)
	added := eval[string](admin, `[...document.querySelectorAll("#save-changes tr.ins .text")].map((e) => e.textContent).join("\n")`)
	if !strings.Contains(added, "sha256sum") || !strings.Contains(added, "action: exec") {
		t.Errorf("the changes of version 2 do not show the exec step added:\n%s", added)
	}
	admin.screenshot("13-editor-saved-changes")
	admin.checkA11y("editor with the saved version's changes")
	wf, err := b.n.Store.WorkflowGet(t.Context(), "webflow", 2)
	if err != nil {
		t.Fatalf("version 2 of webflow: %v", err)
	}
	if !strings.Contains(string(wf.Source), "sha256sum") {
		t.Errorf("version 2's source lacks the new step:\n%s", wf.Source)
	}
	if _, err := b.n.Store.WorkflowGet(t.Context(), "webflow", 3); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a version 3 exists (%v): one save, one version", err)
	}
	admin.open("/workflows/webflow")
	admin.waitJS(10*time.Second, "the library's diagram", `(() => { const i = document.querySelector(".diagram img"); return i && i.complete && i.naturalWidth > 0; })()`, `document.querySelector("main").innerText`)
	if n := eval[int](admin, `document.querySelectorAll("#changes tr.ins").length`); n == 0 {
		t.Error("the workflow's page shows no added lines from v1 to v2")
	}
	admin.screenshot("14-workflow-changes")
	admin.checkA11y("workflow")
	admin.open("/workflows")
	admin.waitJS(10*time.Second, "the workflows", `document.querySelector("section.workflow") !== null`, `document.querySelector("main").innerText`)
	if got := eval[string](admin, `document.querySelector("#wf-webflow").closest("section").querySelector("a.diff-counts")?.getAttribute("href") || ""`); got != "/workflows/webflow?version=2#changes" {
		t.Errorf("the library's link to version 2's changes is %q", got)
	}
	admin.checkA11y("workflows")
	// The YAML tab.
	admin.open("/workflows/webflow/edit")
	admin.waitJS(10*time.Second, "the editor on webflow", `document.querySelector("#validity").textContent.startsWith("Valid")`, `document.querySelector("main").innerText`)
	admin.do(chromedp.Click(chromedp.ID("tab-yaml")))
	admin.waitJS(5*time.Second, "the YAML tab", `!document.querySelector("#panel-yaml").hidden`, `document.querySelector("main").innerText`)
	admin.checkA11y("editor's YAML tab")
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
