package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/url"
	"testing"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestSearchDocuments: GET /v1/documents/search finds the documents an action recorded (its text
// set by the same task), filters by job, pages with a cursor, refuses a bad query with a 400
// and needs a token.
func TestSearchDocuments(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		b := setupOn(t, open)
		b.json(t, "POST", "/v1/workflows", `name: one
steps:
  doc: {action: doc, needs: [start]}
`, 201, nil)
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		jp, _ := mw.CreateFormField("job")
		jp.Write([]byte(`{"workflow":"one","metadata":{"big":12345678901234567890,"zip":"01234","half":1.5,"nested":{"ключ":[1,2.50]}}}`))
		names := []string{"alpha.txt", "beta.txt", "gamma.txt", "Pièce.txt"}
		for _, name := range names {
			fp, _ := mw.CreateFormFile("file", name)
			fp.Write([]byte("x"))
		}
		mw.Close()
		code, data := b.do(t, "POST", "/v1/jobs", b.admin, mw.FormDataContentType(), &buf)
		if code != 201 {
			t.Fatalf("create: %d %s", code, data)
		}
		var job struct {
			ID int64 `json:"id"`
		}
		json.Unmarshal(data, &job)
		waitState(t, b, job.ID, "complete")

		type result struct {
			Hits []struct {
				ID      int64  `json:"id"`
				JobID   int64  `json:"job_id"`
				Title   string `json:"title"`
				Snippet string `json:"snippet"`
				// Metadata is decoded with the numbers as written.
				Metadata map[string]any `json:"metadata"`
			} `json:"hits"`
			Next string `json:"next_cursor"`
		}
		get := func(query url.Values, want int) result {
			t.Helper()
			code, data := b.do(t, "GET", "/v1/documents/search?"+query.Encode(), b.reader, "", nil)
			if code != want {
				t.Fatalf("search %v = %d, want %d: %s", query, code, want, data)
			}
			var r result
			if want == 200 {
				if err := metadata.Unmarshal(data, &r); err != nil {
					t.Fatal(err)
				}
			}
			return r
		}
		// The doc action's text is "text of NAME": the words of the text and of the title.
		r := get(url.Values{"q": {`"text of beta"`}}, 200)
		if len(r.Hits) != 1 || r.Hits[0].Title != "beta.txt" || r.Hits[0].JobID != job.ID || r.Hits[0].Snippet != "«text of beta».txt" || r.Next != "" {
			t.Fatalf("phrase: %+v", r)
		}
		// The hits show the metadata as it was given; a filter matches a value as written.
		for _, meta := range []string{"", "big=12345678901234567890", "zip=01234", "half=1.5"} {
			q := url.Values{"q": {`"text of beta"`}}
			if meta != "" {
				q.Set("meta", meta)
			}
			r := get(q, 200)
			if len(r.Hits) != 1 {
				t.Fatalf("meta=%s: %d hits, want beta.txt", meta, len(r.Hits))
			}
			md := r.Hits[0].Metadata
			nested, _ := md["nested"].(map[string]any)
			if md["big"] != json.Number("12345678901234567890") || md["zip"] != "01234" || md["half"] != json.Number("1.5") ||
				fmt.Sprint(nested["ключ"]) != "[1 2.50]" {
				t.Errorf("meta=%s: the hit's metadata is %#v, want it as given", meta, md)
			}
		}
		if r := get(url.Values{"q": {"piece"}}, 200); len(r.Hits) != 1 || r.Hits[0].Title != "Pièce.txt" {
			t.Fatalf("accent folded: %+v", r)
		}
		var other struct {
			ID int64 `json:"id"`
		}
		b.json(t, "POST", "/v1/jobs", `{"workflow":"one"}`, 201, &other)
		if r := get(url.Values{"q": {"text"}, "job_id": {fmt.Sprint(other.ID)}}, 200); len(r.Hits) != 0 {
			t.Fatalf("another job: %+v", r)
		}
		get(url.Values{"q": {"text"}, "job_id": {fmt.Sprint(other.ID + 1)}}, 404) // a job that does not exist
		// Pages of two: every document once, then no cursor.
		seen := map[int64]bool{}
		var cursor string
		for page := 0; ; page++ {
			q := url.Values{"q": {"text -gamma"}, "limit": {"2"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r := get(q, 200)
			for _, h := range r.Hits {
				if seen[h.ID] || h.Title == "gamma.txt" {
					t.Fatalf("page %d: hit %+v again or excluded", page, h)
				}
				seen[h.ID] = true
			}
			if r.Next == "" {
				break
			}
			cursor = r.Next
			if page > 3 {
				t.Fatal("paging does not end")
			}
		}
		if len(seen) != 3 {
			t.Fatalf("paged through %d documents, want 3", len(seen))
		}
		get(url.Values{"q": {"-only"}}, 400)
		get(url.Values{"q": {""}}, 400)
		get(url.Values{"q": {"x"}, "cursor": {"garbage"}}, 400)
		get(url.Values{"q": {"x"}, "meta": {"nokey"}}, 400)
		if code, _ := b.do(t, "GET", "/v1/documents/search?q=text", "", "", nil); code != 401 {
			t.Fatalf("without a token: %d", code)
		}
	})
}
