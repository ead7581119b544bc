package web_test

import (
	"context"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/web"
)

// operatorJobs makes the jobs the operator's pages are tried on: a documents job of two text
// files and a PDF that cannot be read (it ends complete, with an error), tagged batch=a.
func operatorJobs(t *testing.T, b *bundle) *record.Job {
	t.Helper()
	ctx := t.Context()
	job, _, err := b.n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "documents", Metadata: map[string]any{"batch": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	var roots []engine.Root
	for i, f := range []struct{ name, content string }{
		{"first.txt", "The sluice gate opens at dawn.\n"},
		{"second.txt", "The mill race runs all night.\n"},
		{"broken.pdf", "%PDF-1.4\nnot really a pdf\n"},
	} {
		sha, size, err := b.n.Blobs.Put(ctx, strings.NewReader(f.content))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, engine.Root{Ordinal: i, Name: f.name, BlobSHA256: sha, Size: size})
	}
	if err := b.n.Engine.AddRoots(ctx, job, roots); err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.n.Engine, job.ID, 60*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %d: %s %s", job.ID, j.State, j.Error)
	}
	return job
}

// TestBrowserOperator drives Chromium through the operator's pages with axe-core on each: the
// job page's timeline (each attempt a bar; the zoom widens it, the wrapper pans), the timeline's
// own page; the jobs list filtered by metadata, cleared, sorted by errors, all selected and
// canceled in bulk after a confirmation; who canceled, on the job and in the audit log; the item
// tree's PDFs; the documents of every job filtered by a type's count; a search's hit's text with
// its match marked; each at phone width too.
func TestBrowserOperator(t *testing.T) {
	tools := requireTools(t, "chromium")
	b := setup(t)
	job := operatorJobs(t, b)
	tb := &tab{t: t, ctx: browser(t, tools["chromium"]), base: b.url, shot: screenshotDir(t), axe: axeScript(t)}
	tb.signIn(b.admin)
	jobPath := "/jobs/" + itoa(job.ID)

	tb.open(jobPath)
	tb.waitJS(10*time.Second, "the job's timeline", `document.readyState === "complete" && document.querySelectorAll("#timeline-`+itoa(job.ID)+` tr.attempt").length > 0`, `document.querySelector("main").innerText`)
	failed := eval[string](tb, `[...document.querySelectorAll("tr.attempt-failed")].map((r) => r.innerText).join("\n")`)
	if !strings.Contains(failed, "broken.pdf\tpdf\t1\tfailed") {
		t.Errorf("the timeline shows no failed attempt of broken.pdf's pdf step; failed rows:\n%s", failed)
	}
	// Every bar lies on the axis, and is drawn.
	if bad := eval[string](tb, `[...document.querySelectorAll("svg.bar rect.run")].filter((r) => { const x = +r.getAttribute("x"), w = +r.getAttribute("width"); return !(x >= 0 && w >= 2 && x + w <= 1002); }).map((r) => r.outerHTML).join(" ")`); bad != "" {
		t.Errorf("bars off the axis: %s", bad)
	}
	// The workflow's diagram with each step's counts, and the same as a table.
	tb.waitJS(10*time.Second, "the job's diagram", `(() => { const i = document.querySelector(".job-diagram img"); return i && i.complete && i.naturalWidth > 0 && document.querySelector('tr.step-count[data-step="pdf"]')?.innerText.endsWith("1"); })()`, `document.querySelector("#job-steps")?.innerText`)
	tb.screenshot("15-job-timeline")
	// The zoom widens the table: the wrapper then scrolls sideways.
	wrapper := `document.querySelector(".timeline-scroll")`
	before := eval[int](tb, wrapper+`.scrollWidth`)
	eval[chromedp.Void](tb, `(() => { const z = document.querySelector("input.zoom"); z.value = 5; z.dispatchEvent(new Event("input")); })()`)
	tb.waitJS(5*time.Second, "the zoomed timeline to be wider than its wrapper", wrapper+`.scrollWidth > 4 * `+wrapper+`.clientWidth`, wrapper+`.scrollWidth + " in " + `+wrapper+`.clientWidth`)
	if after := eval[int](tb, wrapper+`.scrollWidth`); after <= before {
		t.Errorf("zoom 5 left the timeline %d px wide (was %d)", after, before)
	}
	tb.checkA11y("job with its timeline")

	tb.do(chromedp.Click(chromedp.ID("timeline-link")))
	tb.waitJS(10*time.Second, "the timeline page", `document.readyState === "complete" && location.pathname === "`+jobPath+`/history" && document.querySelectorAll("tr.attempt").length > 0`, `location.href`)
	tb.screenshot("16-timeline")
	tb.checkA11y("timeline")

	// The job's item tree: each text file's PDF is its PDF, not an item inside it.
	tb.open(jobPath)
	tb.waitJS(10*time.Second, "the item tree", `document.readyState === "complete" && document.querySelectorAll("li.item").length === 3`, `document.querySelector("main").innerText`)
	if n := eval[int](tb, `document.querySelectorAll("li.item a.its-pdf").length`); n != 2 || eval[bool](tb, `document.querySelector("main").innerText.includes("inside")`) {
		t.Errorf("the item tree of two text files and a broken PDF shows %d 'Its PDF' links:\n%s", n, eval[string](tb, `document.querySelector("main").innerText`))
	}
	// The documents of every job: counted per type; a type's link filters by it; a search's hit
	// leads to the text with the matched words marked.
	tb.open("/documents")
	tb.waitJS(10*time.Second, "the documents", `document.readyState === "complete" && document.querySelectorAll("#documents li.doc").length === 2 && document.querySelector("#doc-count").textContent === "2 documents."`, `document.querySelector("main").innerText`)
	tb.screenshot("19-documents")
	tb.checkA11y("documents of every job")
	eval[chromedp.Void](tb, `document.querySelector("#type-counts a").click()`)
	tb.waitJS(10*time.Second, "the documents of that type", `document.readyState === "complete" && location.search.includes("type=") && document.querySelector("#doc-count").textContent === "2 documents match." && document.querySelector("#type-counts a[aria-current]") !== null`, `document.querySelector("main").innerText`)
	tb.checkA11y("documents filtered by type")
	tb.open("/search?q=mill")
	tb.waitJS(10*time.Second, "the hit", `document.readyState === "complete" && document.querySelectorAll("#hits a").length === 1`, `document.querySelector("main").innerText`)
	eval[chromedp.Void](tb, `document.querySelector("#hits a").click()`)
	tb.waitJS(10*time.Second, "the text with its match marked", `document.readyState === "complete" && location.pathname.startsWith("/items/") && [...document.querySelectorAll("#text mark")].map((m) => m.textContent).join() === "mill"`, `document.querySelector("main").innerText`)
	tb.screenshot("20-text-marked")
	tb.checkA11y("text reached from a search")

	// The jobs list: a second job, running, to find, sort and select.
	open, _, err := b.n.Engine.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "documents", Open: true, Metadata: map[string]any{"batch": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	tb.open("/jobs")
	tb.waitJS(10*time.Second, "two jobs listed", `document.querySelectorAll("tr.job").length === 2`, `document.querySelector("main").innerText`)
	tb.checkA11y("jobs list with filters")
	tb.do(chromedp.SendKeys(chromedp.ID("meta"), "batch=a"), chromedp.Click(chromedp.ID("find")))
	tb.waitJS(10*time.Second, "the batch=a job alone", `location.search.includes("meta=batch") && [...document.querySelectorAll("tr.job")].map((r) => r.dataset.job).join() === "`+itoa(job.ID)+`"`, `document.querySelector("main").innerText`)
	tb.do(chromedp.Click(chromedp.ID("clear")))
	tb.waitJS(10*time.Second, "both jobs again", `location.search === "" && document.querySelectorAll("tr.job").length === 2`, `location.href`)
	tb.do(chromedp.Click(chromedp.ID("sort-errors")))
	tb.waitJS(10*time.Second, "the job with errors first", `document.readyState === "complete" && location.search.includes("sort=errors") && document.querySelector("tr.job").dataset.job === "`+itoa(job.ID)+`" && document.querySelector('th[aria-sort="descending"] #sort-errors') !== null`, `document.querySelector("main").innerText`)
	tb.screenshot("17-jobs-sorted")
	tb.checkA11y("jobs sorted by errors")
	tb.do(chromedp.Click(chromedp.ID("select-all")))
	if n := eval[int](tb, `document.querySelectorAll("input.job-select:checked").length`); n != 2 {
		t.Errorf("select all ticked %d jobs, want 2", n)
	}
	tb.do(chromedp.Click(chromedp.ID("bulk-cancel")))
	tb.waitJS(10*time.Second, "the confirmation", `document.querySelector("#bulk-confirm") !== null`, `document.querySelector("main").innerText`)
	tb.checkA11y("bulk cancel's confirmation")
	tb.do(chromedp.Click(chromedp.ID("bulk-confirm")))
	tb.waitJS(10*time.Second, "the results", `document.querySelectorAll("#bulk-results tr.bulk-result").length === 2`, `document.querySelector("main").innerText`)
	if got := eval[string](tb, `document.querySelector("h1").textContent`); got != "Cancel: 1 of 2 jobs" {
		t.Errorf("the bulk cancel's results say %q", got)
	}
	tb.checkA11y("bulk cancel's results")
	if j, err := b.n.Store.JobGet(t.Context(), open.ID); err != nil || j.State != record.JobCanceled {
		t.Errorf("the running job after the bulk cancel: %v %v", j, err)
	}
	// Who did it: on the job's page and the audit log's.
	tb.open("/jobs/" + itoa(open.ID))
	tb.waitJS(10*time.Second, "who canceled it", `document.querySelector('tr.audit-entry[data-action="cancel"]') !== null`, `document.querySelector("main").innerText`)
	tb.checkA11y("canceled job with who did what")
	tb.do(chromedp.Click(chromedp.ID("job-audit-link")))
	tb.waitJS(10*time.Second, "the job's audit log", `document.readyState === "complete" && location.pathname === "/audit" && document.querySelectorAll("tr.audit-entry").length === 1`, `document.querySelector("main").innerText`)
	tb.screenshot("18-audit")
	tb.checkA11y("audit log")

	// The workflow's diagram: larger twice makes it wider than its frame (which then scrolls to
	// pan), Fit makes it fit again.
	tb.open("/workflows/documents")
	tb.waitJS(10*time.Second, "the diagram", `(() => { const i = document.querySelector(".zoom-view img"); return i && i.complete && i.naturalWidth > 0; })()`, `document.querySelector("main").innerText`)
	view := `document.querySelector(".zoom-view")`
	tb.do(chromedp.Click(chromedp.ID("zoom-in")), chromedp.Click(chromedp.ID("zoom-in")), chromedp.Click(chromedp.ID("zoom-in")), chromedp.Click(chromedp.ID("zoom-in")))
	tb.waitJS(5*time.Second, "the diagram wider than its frame", view+`.scrollWidth > `+view+`.clientWidth + 50`, view+`.scrollWidth + " in " + `+view+`.clientWidth`)
	tb.checkA11y("workflow with its diagram zoomed")
	tb.do(chromedp.Click(chromedp.ID("zoom-fit")))
	tb.waitJS(5*time.Second, "the diagram to fit", view+`.scrollWidth <= `+view+`.clientWidth + 1`, view+`.scrollWidth + " in " + `+view+`.clientWidth`)

	tb.do(chromedp.EmulateViewport(390, 844))
	for _, p := range []string{"/jobs", jobPath, jobPath + "/history", "/audit", "/workflows/documents", "/documents"} {
		tb.open(p)
		tb.waitJS(10*time.Second, "the page", `document.readyState === "complete" && document.querySelector("h1") !== null`, `location.href`)
		if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 400 {
			t.Errorf("at phone width %s is %d px wide, want no horizontal scrolling", p, w)
		}
		tb.checkA11y(p + " at phone width")
	}
}

// jobIDsOn returns the ids of the jobs a jobs page lists, in order.
func jobIDsOn(page string) []string {
	var out []string
	for _, m := range jobRowRE.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

var jobRowRE = regexp.MustCompile(`<tr class="job" data-job="(\d+)">`)

// TestJobsList: the jobs list finds jobs by metadata, state, workflow, text and day, sorts by
// each column both ways and pages through them without a gap or a repeat; the bulk cancel asks
// first and then reports each job; the job page shows its metadata, finish and duration, and a
// Documents button only for a job that made documents.
func TestJobsList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	done := operatorJobs(t, b) // complete, with an error, batch=a
	open, _, err := b.n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "documents", Open: true, Metadata: map[string]any{"batch": "b", "n": 7}})
	if err != nil {
		t.Fatal(err)
	}
	// 55 older-looking jobs of another workflow name straight in the store: two pages.
	for i := range 55 {
		if _, err := b.n.Store.JobInsert(ctx, store.JobInsertParams{WorkflowName: "bulkflow", WorkflowVersion: 1, Now: time.Now().Add(-time.Duration(i+1) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	c := b.client(t)
	csrf := c.signIn(b.admin)
	get := func(path string) string {
		t.Helper()
		res, page := c.do("GET", path, nil, nil)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %s\n%s", path, res.Status, page)
		}
		return page
	}
	d, o := itoa(done.ID), itoa(open.ID)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"meta=batch%3Da", []string{d}},
		{"meta=n%3D7", []string{o}},
		{"state=running&workflow=documents", []string{o}},
		{"q=" + d + "&workflow=documents", []string{d}},
		{"q=BATCH", []string{o, d}},
		{"workflow=documents&created_from=" + time.Now().UTC().Format(time.DateOnly), []string{o, d}},
		{"workflow=documents&created_until=2000-01-01", nil},
		{"workflow=documents&sort=errors", []string{d, o}},
		{"workflow=documents&sort=errors&dir=asc", []string{o, d}},
		{"workflow=documents&sort=started&dir=asc", []string{d, o}},
		{"workflow=documents&sort=finished", []string{d, o}},
	} {
		if got := jobIDsOn(get("/jobs?" + tc.query)); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("/jobs?%s lists %v, want %v", tc.query, got, tc.want)
		}
	}
	if res, page := c.do("GET", "/jobs?sort=size", nil, nil); res.StatusCode != 400 || !strings.Contains(page, "sort &#34;size&#34;") {
		t.Errorf("/jobs?sort=size: %s, want 400 naming the sort", res.Status)
	}
	// Paging, newest first and by duration: every job once.
	for _, sort := range []string{"", "&sort=duration", "&sort=items&dir=asc"} {
		seen := map[string]bool{}
		path := "/jobs?workflow=bulkflow" + sort
		for pages := 0; path != ""; pages++ {
			page := get(path)
			for _, id := range jobIDsOn(page) {
				if seen[id] {
					t.Errorf("%s: job %s listed twice", sort, id)
				}
				seen[id] = true
			}
			path = ""
			if m := nextRE.FindStringSubmatch(page); m != nil {
				path = html.UnescapeString(m[1])
			}
			if pages > 5 {
				t.Fatalf("%s: the pages do not end", sort)
			}
		}
		if len(seen) != 55 {
			t.Errorf("paging %q listed %d jobs, want 55", sort, len(seen))
		}
	}

	// Bulk cancel: asks first, naming the jobs; then cancels the running one and reports the
	// complete one refused.
	form := url.Values{"csrf": {csrf}, "action": {"cancel"}, "id": {o, d}}
	res, page := c.do("POST", "/jobs/bulk", form, nil)
	if res.StatusCode != 200 || !strings.Contains(page, "Cancel 2 jobs?") || !strings.Contains(page, `href="/jobs/`+o+`"`) {
		t.Fatalf("bulk cancel's confirmation: %s\n%s", res.Status, page)
	}
	if j, _ := b.n.Store.JobGet(ctx, open.ID); j.State != record.JobRunning {
		t.Fatalf("job %s is %s before the confirmation", o, j.State)
	}
	form.Set("confirm", "yes")
	_, page = c.do("POST", "/jobs/bulk", form, nil)
	if !strings.Contains(page, "Cancel: 1 of 2 jobs") || !strings.Contains(page, "not running") {
		t.Errorf("bulk cancel's results:\n%s", page)
	}
	if j, _ := b.n.Store.JobGet(ctx, open.ID); j.State != record.JobCanceled {
		t.Errorf("job %s is %s after the bulk cancel, want canceled", o, j.State)
	}
	reader := b.client(t)
	rcsrf := reader.signIn(b.reader)
	if res, _ := reader.do("POST", "/jobs/bulk", url.Values{"csrf": {rcsrf}, "action": {"retry"}, "id": {d}}, nil); res.StatusCode != 403 {
		t.Errorf("a reader's bulk retry: %s, want 403", res.Status)
	}

	// The job pages.
	page = get("/jobs/" + d + "?notice=created")
	for _, want := range []string{`id="job-finished"`, `<code>batch</code> = a`, `id="documents-link"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the complete job's page lacks %s", want)
		}
	}
	if strings.Contains(page, "The job was created.") || strings.Contains(page, `id="job-finished">not yet`) {
		t.Error("the complete job's page says it was just created, or not finished")
	}
	if page = get("/jobs/" + o); strings.Contains(page, `id="documents-link"`) {
		t.Error("a job that made no documents offers its Documents")
	}
	// The bulk cancel is in the audit log, on the job's page and the log's: who, what, when.
	if !strings.Contains(page, `<tr class="audit-entry" data-action="cancel">`) || !strings.Contains(page, `<td data-label="Who" class="who-did">token `) {
		t.Errorf("the canceled job's page does not say who canceled it:\n%s", page)
	}
	if page = get("/audit"); strings.Count(page, `data-action="cancel"`) != 1 || !strings.Contains(page, `href="/jobs/`+o+`"`) {
		t.Errorf("the audit log lacks the one cancel:\n%s", page)
	}
	if page = get("/audit?job=" + d); strings.Contains(page, `data-action="cancel"`) {
		t.Error("the complete job's audit log shows the other job's cancel")
	}
}

var nextRE = regexp.MustCompile(`<p id="next-page"><a href="([^"]+)">`)

// TestSlowFirstRuns is the reported case: a task of a step that has never completed runs longer
// than the minimum (here 1 s; 30 s by default) and the slow-and-stuck page lists it, saying the
// step has no run yet, where it used to say "None" for a minute.
func TestSlowFirstRuns(t *testing.T) {
	t.Parallel()
	b := setupWith(t, nil, func(c *web.Config) { c.SlowAfter = time.Second })
	ctx := t.Context()
	if _, diags, err := b.n.Engine.ApplyWorkflow(ctx, []byte("name: sleepy\nsteps:\n  nap: {action: exec, needs: [start], with: {command: [sleep, \"30\"]}}\n"), "sleepy.yaml"); err != nil {
		t.Fatal(err, diags)
	}
	job, _, err := b.n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "sleepy", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	addRoot(t, b, job, "a.txt", "a")
	t.Cleanup(func() { _ = b.n.Engine.Cancel(context.Background(), job.ID) })
	c := b.client(t)
	c.signIn(b.reader)
	poll.Until(t, 20*time.Second, "the nap on the slow-and-stuck page", func() (bool, string) {
		_, page := c.do("GET", "/operations", nil, nil)
		return strings.Contains(page, "no run yet; shown after 1s") && strings.Contains(page, `<td data-label="Step">nap <span`), page
	})
}
