package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
)

// TestJobSteps: a job's page shows its workflow's diagram with each step's counts and the same
// counts as a table; the fragment the page fetches again follows the job (an open job's steps
// count nothing, then its file's tasks once added); the diagram is SVG whose address changes
// with the counts.
func TestJobSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.reader)
	job := operatorJobs(t, b) // two text files and a broken PDF, complete
	page := mustGet(t, c, "/jobs/"+itoa(job.ID))
	row := func(page, step string) string {
		m := regexp.MustCompile(`<tr class="step-count" data-step="` + step + `">(.*?)</tr>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no row for step %s:\n%s", step, page)
		}
		return m[1]
	}
	cells := regexp.MustCompile(`<t[dh][^>]*>(?:<span class="error">)?([^<]*)`)
	counts := func(r string) string {
		var out []string
		for _, m := range cells.FindAllStringSubmatch(r, -1)[2:] {
			out = append(out, m[1])
		}
		return strings.Join(out, " ")
	}
	// Detected: the three files and the PDFs made of the two text files.
	if got := counts(row(page, "detect")); got != "0 0 5 0" {
		t.Errorf("detect's queued, running, done, failed = %s, want 0 0 5 0", got)
	}
	if got := counts(row(page, "pdf")); got != "0 0 0 1" {
		t.Errorf("pdf's queued, running, done, failed = %s, want 0 0 0 1 (the broken PDF)", got)
	}
	src := regexp.MustCompile(`<img src="(/jobs/\d+/diagram\.svg\?counts=[0-9a-f]+)"`).FindStringSubmatch(page)
	if src == nil {
		t.Fatalf("no diagram on the job page:\n%s", page)
	}
	resp, svg := c.do("GET", strings.ReplaceAll(src[1], "&amp;", "&"), nil, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(svg, "0 queued · 0 running · 5 done · 0 failed") {
		t.Errorf("the diagram: %d %s\n%.400s", resp.StatusCode, resp.Header.Get("Content-Type"), svg)
	}

	// An open job: nothing counted; a file added, its steps counted as they run.
	open, _, err := b.n.Engine.CreateJob(t.Context(), engineParams("documents"))
	if err != nil {
		t.Fatal(err)
	}
	frag := mustGet(t, c, "/jobs/"+itoa(open.ID)+"/steps")
	if got := counts(row(frag, "detect")); got != "0 0 0 0" {
		t.Errorf("an empty job's detect = %s", got)
	}
	before := regexp.MustCompile(`diagram\.svg\?counts=[0-9a-f]+`).FindString(frag)
	addRoot(t, b, open, "late.txt", "Added late.")
	// Detected: the file and the PDF made of it. Waiting for the file alone raced the PDF's
	// detection, which may come before the next look.
	poll.Until(t, 60*time.Second, "late.txt and its PDF detected", func() (bool, string) {
		frag = mustGet(t, c, "/jobs/"+itoa(open.ID)+"/steps")
		return counts(row(frag, "detect")) == "0 0 2 0", frag
	})
	if after := regexp.MustCompile(`diagram\.svg\?counts=[0-9a-f]+`).FindString(frag); after == before || after == "" {
		t.Errorf("the diagram's address did not change with the counts: %s, then %s", before, after)
	}
}
