package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/store"
)

// operatorJobs makes the jobs the operator's pages are tried on: a documents job of two text
// files and a PDF that cannot be read (it ends complete, with an error), tagged batch=a.
func operatorJobs(t *testing.T, b *bundle) *store.Job {
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
	if j := enginetest.WaitJob(t, b.n.Engine, job.ID, 60*time.Second); j.State != store.JobComplete {
		t.Fatalf("job %d: %s %s", job.ID, j.State, j.Error)
	}
	return job
}

// TestBrowserOperator drives Chromium through the operator's pages with axe-core on each: the
// job page's timeline (each attempt a bar; the zoom widens it, the wrapper pans), the timeline's
// own page, both at phone width too.
func TestBrowserOperator(t *testing.T) {
	tools := requireTools(t, "chromium")
	b := setup(t)
	job := operatorJobs(t, b)
	tb := &tab{t: t, ctx: browser(t, tools["chromium"]), base: b.url, shot: screenshotDir(t), axe: axeScript(t)}
	tb.signIn(b.admin)
	jobPath := "/jobs/" + itoa(job.ID)

	tb.open(jobPath)
	tb.waitJS(10*time.Second, "the job's timeline", `document.querySelectorAll("#timeline-`+itoa(job.ID)+` tr.attempt").length > 0`, `document.querySelector("main").innerText`)
	failed := eval[string](tb, `[...document.querySelectorAll("tr.attempt-failed")].map((r) => r.innerText).join("\n")`)
	if !strings.Contains(failed, "broken.pdf\tpdf\t1\tfailed") {
		t.Errorf("the timeline shows no failed attempt of broken.pdf's pdf step; failed rows:\n%s", failed)
	}
	// Every bar lies on the axis, and is drawn.
	if bad := eval[string](tb, `[...document.querySelectorAll("svg.bar rect.run")].filter((r) => { const x = +r.getAttribute("x"), w = +r.getAttribute("width"); return !(x >= 0 && w >= 2 && x + w <= 1002); }).map((r) => r.outerHTML).join(" ")`); bad != "" {
		t.Errorf("bars off the axis: %s", bad)
	}
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
	tb.waitJS(10*time.Second, "the timeline page", `location.pathname === "`+jobPath+`/history" && document.querySelectorAll("tr.attempt").length > 0`, `location.href`)
	tb.screenshot("16-timeline")
	tb.checkA11y("timeline")

	tb.do(chromedp.EmulateViewport(390, 844))
	for _, p := range []string{jobPath, jobPath + "/history"} {
		tb.open(p)
		tb.waitJS(10*time.Second, "the page", `document.querySelector("tr.attempt") !== null`, `location.href`)
		if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 400 {
			t.Errorf("at phone width %s is %d px wide, want no horizontal scrolling", p, w)
		}
		tb.checkA11y(p + " at phone width")
	}
}
