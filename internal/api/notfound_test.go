package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// implementationWords are what an error sent to a client must not hold: the words of a
// database driver, of the Go library or of a Go type.
var implementationWords = regexp.MustCompile(`sql:|store:|objects:|pgx|pgconn|sqlite|SQLSTATE|no rows|strconv\.|json:|invalid character|\*[a-z]+\.[A-Z]|%!|<nil>`)

// TestMissingIDsAreNotFound: every route of the OpenAPI document with an {id} in its path,
// given an id that does not exist, answers 404 naming it in plain words ("job 99 does not
// exist") — lists under a missing job included, which answered 200 with an empty list — on
// both drivers. A list of a job that exists stays 200 when it is empty.
func TestMissingIDsAreNotFound(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		b := setupFull(t, open, nil, &objects.Service{})
		code, raw := b.do(t, "GET", "/v1/openapi.json", b.reader, "", nil)
		if code != 200 {
			t.Fatalf("openapi.json: %d %s", code, raw)
		}
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		bodies := map[string]string{
			"POST /v1/jobs/{id}/events": `{"event":"approved","key":"batch","value":"b1"}`,
		}
		var tried []string
		for path, ops := range doc.Paths {
			// The worker protocol's task ids are leases a worker holds, answered in its own
			// protocol (workerproto's tests).
			if !strings.Contains(path, "{id}") || strings.HasPrefix(path, "/v1/workers/") {
				continue
			}
			for method := range ops {
				method = strings.ToUpper(method)
				if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, method) {
					continue
				}
				route := method + " " + path
				tried = append(tried, route)
				url := strings.NewReplacer("{id}", "99", "{content}", "text").Replace(path)
				var body io.Reader
				if s, ok := bodies[route]; ok {
					body = strings.NewReader(s)
				}
				code, raw := b.do(t, method, url, b.admin, "application/json", body)
				var e struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				}
				json.Unmarshal(raw, &e)
				if code != 404 || e.Code != "not_found" || !strings.Contains(e.Message, "99") || !strings.Contains(e.Message, "does not exist") {
					t.Errorf("%s = %d %s; want 404 saying what 99 names does not exist", route, code, raw)
				}
				if w := implementationWords.FindString(e.Message); w != "" {
					t.Errorf("%s: the message holds %q: %s", route, w, e.Message)
				}
			}
		}
		for _, want := range []string{"GET /v1/jobs/{id}/items", "GET /v1/jobs/{id}/documents", "GET /v1/jobs/{id}/errors",
			"GET /v1/sheets/{id}", "GET /v1/sheets/{id}/rows", "GET /v1/objects/{id}", "GET /v1/graphs/{id}", "GET /v1/items/{id}/{content}"} {
			if !slices.Contains(tried, want) {
				t.Errorf("%s is not in the OpenAPI document's paths %v", want, tried)
			}
		}

		// A search in a job that does not exist says so.
		code, raw = b.do(t, "GET", "/v1/documents/search?q=x&job_id=99", b.reader, "", nil)
		if code != 404 || !strings.Contains(string(raw), "job 99 does not exist") {
			t.Errorf("search of job 99: %d %s; want 404 job 99 does not exist", code, raw)
		}

		// The lists of a job that exists are 200, empty or not; a parent item that does not exist
		// in the job is named.
		b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
		var job struct {
			ID int64 `json:"id"`
		}
		b.json(t, "POST", "/v1/jobs", `{"workflow":"docs"}`, 201, &job)
		for _, list := range []string{"items", "documents", "errors"} {
			if code, raw := b.do(t, "GET", fmt.Sprintf("/v1/jobs/%d/%s", job.ID, list), b.reader, "", nil); code != 200 {
				t.Errorf("the %s of job %d, which exists: %d %s; want 200", list, job.ID, code, raw)
			}
		}
		code, raw = b.do(t, "GET", fmt.Sprintf("/v1/jobs/%d/items?parent_id=99", job.ID), b.reader, "", nil)
		if want := fmt.Sprintf("item 99 of job %d does not exist", job.ID); code != 404 || !strings.Contains(string(raw), want) {
			t.Errorf("items under a missing parent: %d %s; want 404 %q", code, raw, want)
		}
	})
}
