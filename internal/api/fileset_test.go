package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestFilesets creates a fileset job through POST /v1/filesets (a bad request named by its
// index), waits for it, and lists stored results through GET /v1/filesets by status and page;
// every answer must match the OpenAPI document.
func TestFilesets(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		b := setupOn(t, open)
		b.matchDoc = true
		var bad struct{ Code, Message string }
		b.json(t, "POST", "/v1/filesets", `{"requests":[{"base_url":"https://zenodo.org/record/1"},{"link_source":"x"}]}`, 400, &bad)
		if !strings.Contains(bad.Message, "requests[1]: no base_url") {
			t.Errorf("bad request: %+v", bad)
		}
		var job struct {
			ID       int64
			Workflow string
		}
		// Loopback is refused by the default egress policy: the request ends skip-url-blocklist.
		b.json(t, "POST", "/v1/filesets", `{"key":"k1","requests":[{"ingest_type":"dataset","base_url":"http://127.0.0.1:1/record/5"}]}`, 201, &job)
		if job.Workflow != fileset.WorkflowName {
			t.Errorf("job of workflow %q", job.Workflow)
		}
		waitState(t, b, job.ID, "complete")
		b.json(t, "POST", "/v1/filesets", `{"key":"k1","requests":[{"ingest_type":"dataset","base_url":"http://127.0.0.1:1/record/5"}]}`, 200, nil)

		// No result yet: [] (the document's array is not nullable; matchDoc checks it too).
		code, data := b.do(t, "GET", "/v1/filesets", b.reader, "", nil)
		wantEmpty(t, code, data, "results")

		// Rows as the result step writes them.
		writes := []engine.DomainWrite{}
		for i, st := range []string{"success", "platform-404", "success"} {
			res := fileset.Result{Status: st, Hit: st == "success", PlatformName: "zenodo", PlatformDomain: "zenodo.org", PlatformID: fmt.Sprint(i),
				Request: json.RawMessage(fmt.Sprintf(`{"ingest_type":"dataset","base_url":"https://zenodo.org/record/%d"}`, i))}
			p, _ := json.Marshal(map[string]any{"updated": 1, "result": res})
			writes = append(writes, engine.DomainWrite{Domain: fileset.DomainName, Key: fmt.Sprint(i), Payload: p, JobID: job.ID, ItemID: 1})
		}
		if err := (fileset.Domain{}).Apply(context.Background(), b.db.DomainSQL(), writes); err != nil {
			t.Fatal(err)
		}
		var page struct {
			Results []struct {
				BaseURL string `json:"base_url"`
				Status  string
				Result  fileset.Result
			}
			Next string `json:"next_cursor"`
		}
		b.json(t, "GET", "/v1/filesets?status=success&limit=1", nil, 200, &page)
		if len(page.Results) != 1 || page.Results[0].BaseURL != "https://zenodo.org/record/0" || page.Next == "" || page.Results[0].Result.PlatformID != "0" {
			t.Fatalf("first page: %+v", page)
		}
		next := page.Next
		page.Results, page.Next = nil, ""
		b.json(t, "GET", "/v1/filesets?status=success&limit=1&cursor="+next, nil, 200, &page)
		if len(page.Results) != 1 || page.Results[0].BaseURL != "https://zenodo.org/record/2" {
			t.Fatalf("second page: %+v", page)
		}
		code, data = b.do(t, "GET", "/v1/filesets?status=no-such-status", b.reader, "", nil)
		wantEmpty(t, code, data, "results")
		page.Results = nil
		b.json(t, "GET", "/v1/filesets", nil, 200, &page)
		if len(page.Results) != 3 {
			t.Errorf("all results: %+v", page)
		}
	})
}
