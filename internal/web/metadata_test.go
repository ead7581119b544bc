package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// formMetadata is what a user types in the new-job form's metadata box: key=value keeps the
// value as text, key:=JSON types it.
const formMetadata = "zip=01234\nbig:=12345678901234567890\nhalf:=1.5\nnested:={\"ключ\":[1,2.50]}\nназвание=тест 1"

// formJob is the "job" part the form's script (sluice.js) posts for formMetadata and the
// waits workflow: the typed values passed on as written, never through a JavaScript number.
// TestBrowserTour types formMetadata in a real browser.
const formJob = `{"workflow":"waits","options":{},"metadata":{"zip":"01234","big":12345678901234567890,"half":1.5,"nested":{"ключ":[1,2.50]},"название":"тест 1"}}`

// checkFormMetadata fails unless raw, a JSON object, holds formMetadata's values unchanged.
func checkFormMetadata(t *testing.T, where string, raw []byte) {
	t.Helper()
	md, err := metadata.Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v: %s", where, err, raw)
	}
	nested, _ := md["nested"].(map[string]any)
	if md["zip"] != "01234" || md["big"] != json.Number("12345678901234567890") || md["half"] != json.Number("1.5") ||
		fmt.Sprint(nested["ключ"]) != "[1 2.50]" || md["название"] != "тест 1" {
		t.Errorf("%s: metadata %s, want the form's values as typed:\n%s", where, raw, formMetadata)
	}
}

const waitsWorkflow = "name: waits\nexternal: [approved]\nsteps:\n  publish: {action: noop, needs: [start, approved]}\n"

var csrfMetaRE = regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)">`)

// TestNewJobFormMetadata: the new-job form's upload, posted as the browser posts it, stores
// the metadata exactly as typed — "01234" a string, a 20-digit integer whole, 1.5, a nested
// object, non-ASCII keys — on both drivers; the job page's event form then fires by a typed
// value, and answers a correlation that matches no item with the error naming the event and
// the waiting items' keys, not "The event was sent.".
func TestNewJobFormMetadata(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var open drivertest.Open
			if driver == "postgres" {
				drivertest.DatabaseURL(t)
				open = drivertest.OpenPostgres
			}
			b := setupOn(t, open)
			ctx := t.Context()
			if _, _, err := b.n.Engine.ApplyWorkflow(ctx, []byte(waitsWorkflow), "waits.yaml"); err != nil {
				t.Fatal(err)
			}
			c := b.client(t)
			csrf := c.signIn(b.admin)
			_, page := c.do("GET", "/jobs/new", nil, nil)
			m := csrfMetaRE.FindStringSubmatch(page)
			if m == nil || !strings.Contains(page, `id="metadata"`) {
				t.Fatalf("the new-job page has no metadata box or CSRF meta tag:\n%s", page)
			}

			// The upload, as sluice.js sends it: the job as a JSON part, then the files.
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="job"; filename="job.json"`)
			h.Set("Content-Type", "application/json")
			jp, _ := mw.CreatePart(h)
			jp.Write([]byte(formJob))
			fp, _ := mw.CreateFormFile("file", "request.txt")
			fp.Write([]byte("please approve"))
			mw.Close()
			req, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/ui/api/jobs", &body)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			req.Header.Set("X-CSRF-Token", m[1])
			res, err := c.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var created struct {
				ID int64 `json:"id"`
			}
			err = json.NewDecoder(res.Body).Decode(&created)
			res.Body.Close()
			if res.StatusCode != http.StatusCreated || err != nil {
				t.Fatalf("upload: %s, %v", res.Status, err)
			}
			job, err := b.n.Store.JobGet(ctx, created.ID)
			if err != nil {
				t.Fatal(err)
			}
			checkFormMetadata(t, "the job", job.Metadata)
			for _, f := range []string{`12345678901234567890`, `"01234"`, `1.5`, `2.50`} {
				if !bytes.Contains(job.Metadata, []byte(f)) {
					t.Errorf("the stored job metadata does not hold %s as written: %s", f, job.Metadata)
				}
			}
			var items []*record.Item
			poll.Until(t, 30*time.Second, "the item to wait for approved", func() (bool, string) {
				items, err = b.n.Store.ItemList(ctx, store.ItemListParams{JobID: job.ID, States: []record.ItemState{record.ItemWritten}, Limit: 10})
				if err != nil {
					return false, err.Error()
				}
				return len(items) == 1, fmt.Sprint(len(items), " written items")
			})
			checkFormMetadata(t, "the item", items[0].Metadata)
			// The UI reads items through the API: the same values.
			_, list := c.do("GET", fmt.Sprintf("/ui/api/jobs/%d/items", job.ID), nil, nil)
			var page1 struct {
				Items []struct {
					Metadata json.RawMessage `json:"metadata"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(list), &page1); err != nil || len(page1.Items) != 1 {
				t.Fatalf("items through the UI: %v: %s", err, list)
			}
			checkFormMetadata(t, "the items the UI reads", page1.Items[0].Metadata)

			// An event whose correlation matches nothing is an error naming the waiting keys.
			jobPath := fmt.Sprintf("/jobs/%d", job.ID)
			res, page = c.do("POST", jobPath+"/events", url.Values{"csrf": {csrf}, "event": {"approved"}, "correlation": {"zip=1234"}}, nil)
			text := html.UnescapeString(page)
			if res.StatusCode != http.StatusNotFound || strings.Contains(text, "The event was sent.") ||
				!strings.Contains(text, `"approved"`) || !strings.Contains(text, "zip=01234") || !strings.Contains(text, "big=12345678901234567890") {
				t.Errorf("zip=1234: %s, want 404 naming approved and the waiting keys:\n%s", res.Status, page)
			}
			// By the typed value, it fires.
			res, _ = c.do("POST", jobPath+"/events", url.Values{"csrf": {csrf}, "event": {"approved"}, "correlation": {"big=12345678901234567890"}}, nil)
			if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "notice=event") {
				t.Fatalf("big=12345678901234567890: %s %q", res.Status, res.Header.Get("Location"))
			}
			poll.Until(t, 30*time.Second, "the job to complete once approved", func() (bool, string) {
				j, err := b.n.Store.JobGet(ctx, job.ID)
				if err != nil {
					return false, err.Error()
				}
				return j.State == record.JobComplete, string(j.State)
			})
		})
	}
}
