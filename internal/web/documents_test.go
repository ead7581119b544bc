package web_test

import (
	"html"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/web"
)

// TestDocumentsPages: the documents of every job and of one, two a page: a job's in the order
// its files were given whatever order they were converted in, every job's by title, filtered by
// job, content type and metadata, counted per type; bad filters and cursors are a 400 naming
// them; a text file's own PDF is its PDF in the item tree, not an item inside it; the text view
// reached from a search marks the words it matched, escaped. It does not run in parallel: it
// sets the page size.
func TestDocumentsPages(t *testing.T) {
	defer web.SetDocumentsPerPage(2)()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.reader)
	ctx := t.Context()
	// add adds the roots one at a time, in the order given: their ids follow it, not their
	// ordinals.
	add := func(job *record.Job, roots ...engine.Root) {
		t.Helper()
		for _, r := range roots {
			sha, size, err := b.n.Blobs.Put(ctx, strings.NewReader(r.Name+": the quick <b>brown</b> fox"))
			if err != nil {
				t.Fatal(err)
			}
			r.BlobSHA256, r.Size, r.ContentType = sha, size, "text/plain"
			if err := b.n.Engine.AddRoots(ctx, job, []engine.Root{r}); err != nil {
				t.Fatal(err)
			}
		}
	}
	j1, _, err := b.n.Engine.CreateJob(ctx, engineParams("documents"))
	if err != nil {
		t.Fatal(err)
	}
	j2, _, err := b.n.Engine.CreateJob(ctx, engineParams("documents"))
	if err != nil {
		t.Fatal(err)
	}
	// Given as b, a, c; added as a, c, b, and their PDFs (the documents) made in any order.
	add(j1, engine.Root{Ordinal: 1, Name: "a.txt", Metadata: map[string]any{"box": 2}}, engine.Root{Ordinal: 2, Name: "c.txt", Metadata: map[string]any{"box": 1}},
		engine.Root{Ordinal: 0, Name: "b.txt", Metadata: map[string]any{"box": 1}})
	add(j2, engine.Root{Name: "d.txt"})
	poll.Until(t, 90*time.Second, "the four documents", func() (bool, string) {
		_, page := c.do("GET", "/documents", nil, nil)
		return strings.Contains(page, `<p id="doc-count" role="status">4 documents.</p>`), page
	})

	titles := regexp.MustCompile(`<span class="title">([^<]*)`)
	more := regexp.MustCompile(`<a href="([^"]*)" id="more-documents">`)
	// read returns the titles of every page from path on, and how many pages there were.
	read := func(path string) ([]string, int) {
		t.Helper()
		var out []string
		for pages := 1; ; pages++ {
			resp, page := c.do("GET", path, nil, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, page)
			}
			for _, m := range titles.FindAllStringSubmatch(page, -1) {
				out = append(out, strings.TrimSpace(m[1]))
			}
			m := more.FindStringSubmatch(page)
			if m == nil || pages > 5 {
				return out, pages
			}
			path = html.UnescapeString(m[1])
		}
	}
	for path, want := range map[string]string{
		"/jobs/" + itoa(j1.ID) + "/documents":            "b.txt a.txt c.txt",
		"/jobs/" + itoa(j1.ID) + "/documents?sort=title": "a.txt b.txt c.txt",
		"/documents?sort=title":                          "a.txt b.txt c.txt d.txt",
		"/documents?sort=title&meta=box%3D1":             "b.txt c.txt",
		"/documents?job=" + itoa(j2.ID):                  "d.txt",
		"/documents?type=image%2Fpng":                    "",
	} {
		got, pages := read(path)
		if strings.Join(got, " ") != want {
			t.Errorf("%s lists %q, want %q", path, got, want)
		}
		if wantPages := max(1, (len(got)+1)/2); pages != wantPages && !(len(got)%2 == 0 && pages == wantPages+1) {
			t.Errorf("%s: %d pages for %d documents, two a page", path, pages, len(got))
		}
	}
	// Newest first (the documents are the PDFs made of the files, in the order they were made):
	// each once across the pages.
	if got, _ := read("/documents"); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"a.txt", "b.txt", "c.txt", "d.txt"}) {
		t.Errorf("/documents lists %q, want each of the four once", got)
	}
	_, page := c.do("GET", "/documents?meta=box%3D1", nil, nil)
	if !strings.Contains(page, "2 documents match.") {
		t.Errorf("the metadata filter's count:\n%s", page)
	}
	// The counts per type: one type here, all four documents, a link filtering by it.
	if !regexp.MustCompile(`<li><a href="/documents\?type=[^"]+">[^<]+</a> <span class="muted">4</span></li>`).MatchString(html.UnescapeString(mustGet(t, c, "/documents"))) {
		t.Errorf("the counts per content type:\n%s", mustGet(t, c, "/documents"))
	}
	for path, says := range map[string]string{
		"/documents?sort=tree":                   "sort",
		"/documents?meta=box":                    "metadata",
		"/documents?job=x":                       "job",
		"/documents?cursor=nope":                 "cursor",
		"/documents?sort=size&cursor=" + itoa(1): "cursor",
	} {
		if resp, page := c.do("GET", path, nil, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, says) {
			t.Errorf("%s: %d, want 400 naming %s\n%s", path, resp.StatusCode, says, page)
		}
	}

	// The item tree: a text file's PDF is its PDF.
	_, tree := c.do("GET", "/jobs/"+itoa(j1.ID)+"/items?parent_id=0", nil, nil)
	if strings.Contains(tree, "inside") || strings.Count(tree, `class="its-pdf"`) != 3 {
		t.Errorf("the item tree of three text files:\n%s", tree)
	}

	// From a search to the text, its matches marked and the text escaped.
	_, hits := c.do("GET", "/search?q=quick+fox", nil, nil)
	link := regexp.MustCompile(`<a href="(/items/\d+\?q=quick(\+|%20)fox)">b.txt</a>`).FindStringSubmatch(hits)
	if link == nil {
		t.Fatalf("the search's link to b.txt carries no query:\n%s", hits)
	}
	_, item := c.do("GET", link[1], nil, nil)
	if !strings.Contains(item, `b.txt: the <mark>quick</mark> &lt;b&gt;brown&lt;/b&gt; <mark>fox</mark></pre>`) || !strings.Contains(item, "2 matches of the search marked.") {
		t.Errorf("the text reached from the search:\n%s", item)
	}
	itemPath, _, _ := strings.Cut(link[1], "?")
	if resp, page := c.do("GET", itemPath+"?q=-cat", nil, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "q:") {
		t.Errorf("a bad query on the item page: %d\n%s", resp.StatusCode, page)
	}
}

func mustGet(t *testing.T, c *client, path string) string {
	t.Helper()
	resp, page := c.do("GET", path, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, page)
	}
	return page
}
