package web_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
)

var (
	olderJobs = regexp.MustCompile(`<a href="(/jobs\?cursor=[^"]+)">Older jobs</a>`)
	moreItems = regexp.MustCompile(`data-cursor="([^"]+)">More items</button>`)
)

// TestPagesWithCursor: the jobs page and the item tree page on with the cursor of their "Older
// jobs" link and "More items" button, and a cursor of another list, or a malformed one, is a 400
// saying so on every page that takes one.
func TestPagesWithCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.reader)
	var oldest *record.Job
	for i := range 51 { // a page and one
		job, _, err := b.n.Engine.CreateJob(t.Context(), engineParams("documents"))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			oldest = job
		}
	}
	link := `href="/jobs/` + itoa(oldest.ID) + `"`
	_, page := c.do("GET", "/jobs", nil, nil)
	m := olderJobs.FindStringSubmatch(page)
	if m == nil || strings.Contains(page, link) {
		t.Fatalf("the first page has the oldest job or no link to older ones:\n%s", page)
	}
	older := html.UnescapeString(m[1])
	resp, page := c.do("GET", older, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, link) || olderJobs.MatchString(page) {
		t.Fatalf("GET %s: %d; want the oldest job and no link further:\n%s", older, resp.StatusCode, page)
	}
	jobsCursor := strings.TrimPrefix(strings.Split(older, "&")[0], "/jobs?cursor=")
	job := itoa(oldest.ID)

	roots := make([]engine.Root, 51)
	for i := range roots {
		roots[i] = engine.Root{Name: fmt.Sprintf("r%02d.txt", i), Ordinal: i, ContentType: "text/plain"}
	}
	if err := b.n.Engine.AddRoots(t.Context(), oldest, roots); err != nil {
		t.Fatal(err)
	}
	_, frag := c.do("GET", "/jobs/"+job+"/items?parent_id=0", nil, nil)
	m = moreItems.FindStringSubmatch(frag)
	if m == nil || !strings.Contains(frag, "r49.txt") || strings.Contains(frag, "r50.txt") {
		t.Fatalf("the first page of roots is not r00 to r49 with a button for more:\n%s", frag)
	}
	itemsCursor := html.UnescapeString(m[1])
	resp, frag = c.do("GET", "/jobs/"+job+"/items?parent_id=0&cursor="+url.QueryEscape(itemsCursor), nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, "r50.txt") || strings.Contains(frag, "r49.txt") || moreItems.MatchString(frag) {
		t.Fatalf("the second page of roots: %d; want r50.txt only:\n%s", resp.StatusCode, frag)
	}
	for _, path := range []string{
		"/jobs?cursor=garbage",
		"/jobs?cursor=17",
		"/jobs/" + job + "/items?cursor=" + jobsCursor,
		"/jobs/" + job + "/items?parent_id=1&cursor=" + url.QueryEscape(itemsCursor), // another level's
		"/jobs/" + job + "/documents?cursor=" + jobsCursor,
		"/search?q=fox&cursor=" + jobsCursor,
	} {
		resp, page := c.do("GET", path, nil, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "cursor: not a cursor of this list") {
			t.Errorf("GET %s: %d; want a 400 saying the cursor is not the list's:\n%s", path, resp.StatusCode, page)
		}
	}
	if resp, page := c.do("GET", "/jobs?state=running", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /jobs?state=running: %d\n%s", resp.StatusCode, page)
	}
	resp, page = c.do("GET", "/jobs?state=done", nil, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "is not a job state: one of running, complete, failed, canceled") {
		t.Errorf("GET /jobs?state=done: %d; want a 400 naming the job states:\n%s", resp.StatusCode, page)
	}
}
