package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// TestGraphRequests: POST /v1/graphs answers at once with the job and links; GET answers 204
// with Traverse-State until the result is there (no worker runs yet), then the result in the
// request's format or ?format=; DELETE removes the workspace (GET is 404 after it); a local
// source outside the path roots is refused, a bad request named. Every answer must match the
// OpenAPI document (the 204, 200 and errors with their Traverse-State).
func TestGraphRequests(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		dir := t.TempDir()
		proxy := filepath.Join(dir, "proxy")
		for path, mod := range map[string]string{
			"example.com/a/@v/v1.0.0.mod": "module example.com/a\nrequire example.com/b v1.0.0\n",
			"example.com/b/@v/v1.0.0.mod": "module example.com/b\n",
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(proxy, path)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(proxy, path), []byte(mod), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		db := open(t)
		g := graph.New(graph.Config{})
		acts := append(g.Actions(), basic.NewPass())
		cat := &action.Catalog{}
		cat.Register(acts...)
		e := engine.New(engine.Config{Store: db, Catalog: cat})
		if err := graph.Register(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		a := api.New(api.Config{Backend: workerproto.NewBackend(e, nil, nil), Records: db, NoAuth: true, PathRoots: []string{dir}})
		srv := httptest.NewServer(a.Handler())
		defer srv.Close()
		do := func(method, path, body string) (*http.Response, string) {
			req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			matchDocument(t, req, resp, b)
			return resp, string(b)
		}

		resp, body := do("POST", "/v1/graphs", fmt.Sprintf(`{"type": "gomod", "source": %q, "roots": ["example.com/a@v1.0.0"], "format": "path"}`, proxy))
		if resp.StatusCode != 201 {
			t.Fatalf("POST: %d %s", resp.StatusCode, body)
		}
		var created struct {
			ID    int64             `json:"id"`
			Links map[string]string `json:"links"`
		}
		if err := json.Unmarshal([]byte(body), &created); err != nil {
			t.Fatal(err)
		}
		self := fmt.Sprintf("/v1/graphs/%d", created.ID)
		if resp.Header.Get("Location") != self || created.Links["job"] != fmt.Sprintf("/v1/jobs/%d", created.ID) {
			t.Errorf("Location %q, links %v", resp.Header.Get("Location"), created.Links)
		}
		// No worker runs yet: the request is traversing.
		resp, _ = do("GET", self, "")
		if resp.StatusCode != 204 || resp.Header.Get("Traverse-State") != "TRAVERSING" {
			t.Errorf("GET while traversing: %d, Traverse-State %q", resp.StatusCode, resp.Header.Get("Traverse-State"))
		}
		// Workers on the same store run it.
		enginetest.StartWith(t, func(testing.TB) store.Store { return db },
			enginetest.Config{Domains: map[string]engine.Domain{graph.DomainName: graph.Domain{}}}, acts...)
		poll.Until(t, time.Minute, "the graph's result", func() (bool, string) {
			resp, body = do("GET", self, "")
			return resp.StatusCode != 204, resp.Header.Get("Traverse-State")
		})
		if resp.StatusCode != 200 || body != "example.com/a@v1.0.0\nexample.com/a@v1.0.0 > example.com/b@v1.0.0\n" {
			t.Errorf("GET: %d %q", resp.StatusCode, body)
			items, _ := db.ItemList(t.Context(), store.ItemListParams{JobID: created.ID})
			for _, it := range items {
				tasks, _ := db.TaskListByItem(t.Context(), it.ID)
				for _, tk := range tasks {
					t.Logf("item %d %s: %s %s %s", it.ID, it.Metadata, tk.Step, tk.State, tk.Error)
				}
			}
		}
		resp, body = do("GET", self+"?format=json", "")
		var res graph.Result
		if err := json.Unmarshal([]byte(body), &res); err != nil || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET json: %v %q", err, body)
		}
		if want := []string{"example.com/a@v1.0.0", "example.com/b@v1.0.0"}; !reflect.DeepEqual(res.Nodes, want) {
			t.Errorf("nodes %v, want %v", res.Nodes, want)
		}
		// A root the source does not have: a result of one node (the root, failed) and no edge,
		// whose JSON still has the array the document promises ([], not null).
		resp, body = do("POST", "/v1/graphs", fmt.Sprintf(`{"type": "gomod", "source": %q, "roots": ["example.com/missing@v1.0.0"], "format": "json"}`, proxy))
		if resp.StatusCode != 201 {
			t.Fatalf("POST missing: %d %s", resp.StatusCode, body)
		}
		missing := resp.Header.Get("Location")
		poll.Until(t, time.Minute, "the edgeless graph's result", func() (bool, string) {
			resp, body = do("GET", missing, "")
			return resp.StatusCode != 204, resp.Header.Get("Traverse-State")
		})
		var edgeless map[string]any
		if err := json.Unmarshal([]byte(body), &edgeless); resp.StatusCode != 200 || err != nil {
			t.Fatalf("GET missing: %d %v %q", resp.StatusCode, err, body)
		}
		if a, ok := edgeless["edges"].([]any); !ok || len(a) != 0 {
			t.Errorf("edges of a graph with no edge: %#v, want []", edgeless["edges"])
		}
		if errs, _ := edgeless["errors"].([]any); len(errs) != 1 {
			t.Errorf("errors of a graph whose root is missing: %#v, want one", edgeless["errors"])
		}

		if resp, body = do("DELETE", self, ""); resp.StatusCode != 204 {
			t.Errorf("DELETE: %d %s", resp.StatusCode, body)
		}
		if resp, _ = do("GET", self, ""); resp.StatusCode != 404 {
			t.Errorf("GET after DELETE: %d, want 404", resp.StatusCode)
		}

		for _, c := range []struct {
			body   string
			status int
			msg    string
		}{
			{`{"source": "/etc", "roots": ["a@v1"]}`, 400, `source \"/etc\": it is not under a configured path root`},
			{fmt.Sprintf(`{"source": %q, "roots": []}`, proxy), 400, "at least one root"},
			{fmt.Sprintf(`{"source": %q, "roots": ["a@v1"], "format": "svg"}`, proxy), 400, "want one of node, path, dot, json"},
		} {
			resp, body := do("POST", "/v1/graphs", c.body)
			if resp.StatusCode != c.status || !strings.Contains(body, c.msg) {
				t.Errorf("POST %s: %d %s, want %d with %q", c.body, resp.StatusCode, body, c.status, c.msg)
			}
		}
	})
}
