package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// upload creates a job of workflow with a file per name (holding "content of NAME") in a
// multipart request, and returns its id.
func (b *bundle) upload(t *testing.T, workflow string, names ...string) int64 {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	jp, _ := mw.CreateFormField("job")
	fmt.Fprintf(jp, `{"workflow":%q}`, workflow)
	for _, name := range names {
		fp, _ := mw.CreateFormFile("file", name)
		fp.Write([]byte("content of " + name))
	}
	mw.Close()
	code, data := b.do(t, "POST", "/v1/jobs", b.admin, mw.FormDataContentType(), &buf)
	var job struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(data, &job); code != 201 || err != nil {
		t.Fatalf("create: %d %s", code, data)
	}
	return job.ID
}

// TestListsPageWithCursor: every list pages with cursor and limit, answering next_cursor until
// its last page, and pages through the same rows, in the same order, as one page of them all;
// a cursor of another list (or of another job's), a malformed one, and the parameters cursor
// replaced are 400s in plain words.
func TestListsPageWithCursor(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		b := setupOn(t, open)
		b.json(t, "POST", "/v1/workflows", "name: one\nsteps:\n  doc: {action: doc, needs: [start]}\n", 201, nil)
		b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
		create := func(workflow string, names ...string) int64 { return b.upload(t, workflow, names...) }
		// The job's three documents are recorded and two items fail; the cancel gives each of the
		// three it ends an error output.
		job := create("docs", "a.txt", "b.txt", "c.bad", "d.txt", "e.bad")
		poll.Until(t, 20*time.Second, "the doc step to end", func() (bool, string) {
			var docs map[string][]any
			b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/documents", job), nil, 200, &docs)
			var failed map[string][]any
			b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/items?errors=true", job), nil, 200, &failed)
			return len(docs["outputs"]) == 3 && len(failed["items"]) == 2, fmt.Sprint(docs, failed)
		})
		b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", job), nil, 200, nil)
		other := create("one", "f.txt")
		third := create("one", "g.txt")
		for _, id := range []int64{job, other, third} {
			poll.Until(t, 20*time.Second, fmt.Sprintf("job %d to end", id), func() (bool, string) {
				var j map[string]any
				b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil, 200, &j)
				return j["state"] != "running", fmt.Sprint(j)
			})
		}

		// page reads path with limit and cursor: its rows (the field rows) and next_cursor.
		page := func(path, rows string, limit int, cursor string) ([]json.RawMessage, string) {
			t.Helper()
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			var body map[string]json.RawMessage
			b.json(t, "GET", path+sep+q.Encode(), nil, 200, &body)
			var out []json.RawMessage
			if err := json.Unmarshal(body[rows], &out); err != nil {
				t.Fatalf("%s: %s: %v", path, rows, err)
			}
			var next string
			if raw, ok := body["next_cursor"]; ok {
				json.Unmarshal(raw, &next)
			}
			return out, next
		}
		lists := []struct {
			name, path, rows string
			want             int
		}{
			{"jobs", "/v1/jobs", "jobs", 3},
			{"roots", fmt.Sprintf("/v1/jobs/%d/items", job), "items", 5},
			{"another job's roots", fmt.Sprintf("/v1/jobs/%d/items", other), "items", 1},
			{"documents", fmt.Sprintf("/v1/jobs/%d/documents", job), "outputs", 3},
			{"errors", fmt.Sprintf("/v1/jobs/%d/errors", job), "outputs", 3},
			{"search", fmt.Sprintf("/v1/documents/search?q=text&job_id=%d", job), "hits", 3},
		}
		firstCursor := map[string]string{}
		for _, l := range lists {
			all, next := page(l.path, l.rows, 1000, "")
			if len(all) != l.want || next != "" {
				t.Fatalf("%s: one page of %d rows and next_cursor %q; want %d rows and none", l.name, len(all), next, l.want)
			}
			var paged []json.RawMessage
			for cursor := ""; ; {
				rows, next := page(l.path, l.rows, 1, cursor)
				paged = append(paged, rows...)
				if cursor == "" {
					firstCursor[l.name] = next
				}
				if next == "" {
					break
				}
				if len(paged) > l.want {
					t.Fatalf("%s: paging does not end: %d rows", l.name, len(paged))
				}
				cursor = next
			}
			if !slices.EqualFunc(paged, all, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
				t.Errorf("%s: pages of one are\n%s\nwant\n%s", l.name, paged, all)
			}
		}

		// badRequest asks for path and wants a 400 whose message has want.
		badRequest := func(path, want string) {
			t.Helper()
			var e struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}
			b.json(t, "GET", path, nil, 400, &e)
			if e.Code != "bad_request" || !strings.Contains(e.Message, want) {
				t.Errorf("GET %s: %+v; want a bad_request saying %q", path, e, want)
			}
		}
		const foreign = "cursor: not a cursor of this list"
		for _, l := range lists {
			sep := "?"
			if strings.Contains(l.path, "?") {
				sep = "&"
			}
			for _, from := range lists {
				if from.name != l.name && firstCursor[from.name] != "" {
					badRequest(l.path+sep+"cursor="+url.QueryEscape(firstCursor[from.name]), foreign)
				}
			}
			for _, c := range []string{"garbage", "17", "eyJqb2JzIiwiMSJd"} {
				badRequest(l.path+sep+"cursor="+c, foreign)
			}
			for _, name := range []string{"after_id", "after", "after_item"} {
				badRequest(l.path+sep+name+"=1", name+": lists take cursor")
			}
		}
	})
}
