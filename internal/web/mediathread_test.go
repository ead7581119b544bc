package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// reloadUntil opens the page again until the expression is true, with a deadline, as a person
// reloads a page to see what changed; state is shown when it fails.
func (tb *tab) reloadUntil(d time.Duration, path, what, cond, state string) {
	tb.t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		tb.open(path)
		if eval[bool](tb, cond) {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("timed out after %s waiting for %s; the page shows: %s", d, what, eval[string](tb, state))
		}
		select {
		case <-tb.ctx.Done():
			tb.t.Fatal(tb.ctx.Err())
		case <-tick.C:
		}
	}
}

// TestBrowserMediathread runs examples/mediathread.yaml (Banzai's Mediathread video workflow)
// through the UI: a video uploaded on the new-job page, the job page showing the steps that
// wait for the transcoder's external event with the correlation key create-transcode set, the
// operations page listing them, the event sent from the job page's form by that key, and the
// job completing with all six steps run.
func TestBrowserMediathread(t *testing.T) {
	tools := requireTools(t, "chromium", "sh", "wc")
	b := setup(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "mediathread.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.n.Engine.ApplyWorkflow(t.Context(), src, "mediathread.yaml"); err != nil {
		t.Fatal(err)
	}
	video := filepath.Join(t.TempDir(), "lecture.mp4")
	// Not really a video: the example's steps stand in for the services and read no frames.
	if err := os.WriteFile(video, []byte("\x00\x00\x00\x18ftypmp42 a lecture, in a few bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := &tab{t: t, ctx: browser(t, tools["chromium"]), base: b.url, shot: screenshotDir(t), axe: axeScript(t)}
	admin.signIn(b.admin)

	admin.open("/workflows")
	admin.waitJS(10*time.Second, "the workflows", `document.querySelector("#wf-mediathread-video") !== null`, `document.querySelector("main").innerText`)
	admin.do(chromedp.Click(chromedp.CSS(`a[href="/jobs/new?workflow=mediathread-video"]`)))
	admin.waitJS(10*time.Second, "the new-job form for mediathread-video", `location.pathname === "/jobs/new" && document.readyState === "complete" && document.querySelector("#workflow")?.value === "mediathread-video"`, `location.href + " " + document.querySelector("#workflow")?.value`)
	admin.do(chromedp.SetUploadFiles(chromedp.ID("files"), []string{video}))
	admin.waitJS(5*time.Second, "the video listed", `document.querySelectorAll("#uploads li").length === 1`, `document.querySelector("#uploads").innerText`)
	admin.do(chromedp.Click(chromedp.ID("start")))
	admin.waitJS(30*time.Second, "the job page", `/^\/jobs\/\d+$/.test(location.pathname)`, `document.querySelector("#upload-status")?.textContent || location.href`)
	jobPath := eval[string](admin, `location.pathname`)

	// The start steps run; the job page then lists the two steps waiting for et-job-finished,
	// with the key create-transcode gave the item.
	waitingRows := `[...document.querySelectorAll(".waiting .waiting-row")]`
	admin.reloadUntil(30*time.Second, jobPath, "the steps waiting for et-job-finished, with the transcode key",
		`(() => { const rows = `+waitingRows+`; return rows.length === 2 && rows.every((r) => r.querySelector(".events").textContent === "et-job-finished" && [...r.querySelectorAll("code.key")].some((c) => c.textContent.startsWith("transcode_job=tj-"))); })()`,
		`document.querySelector("main").innerText`)
	if got := eval[string](admin, waitingRows+`.map((r) => r.cells[1].textContent).sort().join(",")`); got != "copy-to-cunix,pull-thumbnails" {
		t.Errorf("the job page lists %q as waiting, want copy-to-cunix,pull-thumbnails", got)
	}
	if st := eval[string](admin, `document.querySelector("#job-state").textContent.trim()`); st != "running" {
		t.Fatalf("the job is %s while it waits", st)
	}
	key := eval[string](admin, waitingRows+`[0].querySelector("code.key").textContent`)
	t.Logf("correlation key: %s", key)
	admin.screenshot("11-mediathread-waiting")
	admin.checkA11y("job waiting on an event")

	// The item page shows every step of the workflow with its state: the two that ran, the
	// two waiting for the transcoder, and those waiting on other steps.
	var jobID int64
	if _, err := fmt.Sscanf(jobPath, "/jobs/%d", &jobID); err != nil {
		t.Fatal(err)
	}
	its, err := b.n.Store.ItemList(t.Context(), store.ItemListParams{JobID: jobID})
	if err != nil || len(its) != 1 {
		t.Fatalf("items: %v %v", its, err)
	}
	admin.open(fmt.Sprintf("/items/%d", its[0].ID))
	admin.waitJS(10*time.Second, "the item's steps", `document.querySelectorAll(".item-steps tr.step").length === 7`, `document.querySelector("main").innerText`)
	if got := eval[string](admin, `[...document.querySelectorAll(".item-steps tr.step")].map((r) => r.dataset.step + ":" + r.querySelector(".state").textContent + ":" + r.dataset.needs).join(" ")`); got !=
		"extract-metadata:complete: create-transcode:complete: pull-thumbnails:blocked:et-job-finished copy-to-cunix:blocked:et-job-finished "+
			"submit:blocked:poster-created+uploaded-to-cunix email-success:blocked:submitted email-failure:blocked:failed" {
		t.Errorf("the item page's steps: %s", got)
	}
	admin.screenshot("13-mediathread-item-steps")
	admin.checkA11y("item steps while waiting")

	// The operations page finds them too, with the key; and it shows the workers' health: a
	// remote worker polling, and a process killed two minutes ago flagged stale.
	remoteWorker(t, b)
	staleProcess(t, b)
	if err := b.n.Fleet.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	admin.reloadUntil(30*time.Second, "/operations", "the remote worker and the stale process",
		`document.querySelector('#workers tr[data-kind="remote"]') !== null && document.querySelector("#workers tr.stale") !== null`,
		`document.querySelector("main").innerText`)
	admin.screenshot("15-operations")
	if got := eval[string](admin, `[...document.querySelectorAll(".waiting-row")].map((r) => r.innerText).join("\n")`); !strings.Contains(got, "pull-thumbnails") || !strings.Contains(got, key) {
		t.Errorf("the operations page lists as waiting:\n%s\nwant pull-thumbnails with %s", got, key)
	}
	admin.checkA11y("operations")

	// Send the event from the job page's form by the key, as a person would.
	admin.open(jobPath)
	admin.waitJS(10*time.Second, "the event form", `document.querySelector("#fire") !== null`, `document.querySelector("main").innerText`)
	if got := eval[string](admin, `[...document.querySelectorAll("#event option")].map((o) => o.value).join(",")`); got != "et-job-finished" {
		t.Errorf("the event form offers %q, want the declared et-job-finished", got)
	}
	admin.do(chromedp.SetValue(chromedp.ID("event"), "et-job-finished"), chromedp.SendKeys(chromedp.ID("correlation"), key), chromedp.Click(chromedp.ID("fire")))
	admin.waitJS(10*time.Second, "the notice that the event was sent", `document.querySelector(".notice")?.textContent === "The event was sent."`, `document.querySelector("main").innerText`)
	admin.waitJS(30*time.Second, "the job to complete",
		`document.readyState === "complete" && document.querySelector(".progress[data-live-job]") === null && document.querySelector("#job-state")?.textContent.trim() === "complete"`,
		`document.querySelector("#job-state")?.textContent + " " + document.querySelector("main").innerText`)
	if eval[bool](admin, `document.querySelector(".waiting, #fire") !== null`) {
		t.Error("the complete job still shows waiting steps or the event form")
	}
	admin.screenshot("12-mediathread-complete")
	admin.checkA11y("job complete after the event")

	jobs, err := b.n.Store.JobList(t.Context(), store.JobListParams{Limit: 10})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs: %v %v", jobs, err)
	}
	items, err := b.n.Store.ItemList(t.Context(), store.ItemListParams{JobID: jobs[0].ID})
	if err != nil || len(items) != 1 {
		t.Fatalf("items: %v %v", items, err)
	}
	poll.Until(t, 10*time.Second, "the six steps of the success path", func() (bool, string) {
		tasks, err := b.n.Store.TaskListByItem(t.Context(), items[0].ID)
		if err != nil {
			return false, err.Error()
		}
		var ran []string
		for _, tk := range tasks {
			if tk.State == record.TaskComplete {
				ran = append(ran, tk.Step)
			}
		}
		return len(ran) == 6 && len(tasks) == 6, strings.Join(ran, ",")
	})
}
