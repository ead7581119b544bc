package source_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/sink"
	"github.com/sluice-project/sluice/internal/source"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

func TestParseAndFilter(t *testing.T) {
	t.Parallel()
	s, err := source.Parse("rows", "nats://127.0.0.1:4222/meadow.rows?stream=M&workflow=w&filter.status=ok&filter.context=Sheet,FileSet")
	if err != nil {
		t.Fatal(err)
	}
	if s.Subject != "meadow.rows" || s.Durable != "sluice-rows" || s.Server.String() != "nats://127.0.0.1:4222" {
		t.Fatalf("spec = %+v", s)
	}
	c, err := source.Parse("rows", "nats://10.0.0.1:4222,10.0.0.2:4222,10.0.0.3:4222/meadow.rows?stream=M&workflow=w&replicas=3")
	if err != nil {
		t.Fatal(err)
	}
	if c.Replicas != 3 || c.Server.Host != "10.0.0.1:4222,10.0.0.2:4222,10.0.0.3:4222" || s.Replicas != 1 {
		t.Fatalf("cluster spec = %+v (server %s), single = %d replicas", c, c.Server, s.Replicas)
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]string
		want  bool
	}{
		{"match", map[string]string{"status": "ok", "context": "FileSet"}, true},
		{"status error", map[string]string{"status": "error", "context": "Sheet"}, false},
		{"no context", map[string]string{"status": "ok"}, false},
	} {
		if got := s.Accepts(source.Message{Attributes: tc.attrs}); got != tc.want {
			t.Errorf("%s: accepts = %v", tc.name, got)
		}
	}
	for _, bad := range []string{"nats://h/s?workflow=w", "webhook:?as=xml&workflow=w", "webhook:", "webhook:?workflow=w&key=k", "ftp://x?workflow=w",
		"nats://h:1,h:2,h:3/s?stream=S&workflow=w&replicas=7", "nats://h/s?stream=S&workflow=w&replicas=three"} {
		if _, err := source.Parse("x", bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// TestWebhookSource posts messages to a webhook source: each id makes one job, a repeated id
// finds the same job, a filtered message makes none, a bad signature is refused.
func TestWebhookSource(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		k := enginetest.Start(t, open, basic.NewNoop())
		k.ApplyWorkflow(t, "name: req\nsteps:\n  a: {action: noop, needs: [start]}\n")
		spec, err := source.Parse("in", "webhook:?workflow=req&filter.status=ok&secret=k3y")
		if err != nil {
			t.Fatal(err)
		}
		// Mounted as the API mounts it (the name comes from the pattern).
		mux := http.NewServeMux()
		mux.Handle("POST /v1/sources/{name}", &source.Set{Handler: &source.Handler{Engine: k.Engine, Records: k.Store, Blobs: k.Blobs}, Specs: map[string]*source.Spec{"in": spec}})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		post := func(id, status, body, sig string) (int, string) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/sources/in", strings.NewReader(body))
			req.Header.Set(sink.HeaderID, id)
			req.Header.Set("status", status)
			if sig == "" {
				sig = sink.Sign([]byte("k3y"), []byte(body))
			}
			req.Header.Set(sink.HeaderSignature, sig)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		first := `{"n": 1, "big": 12345678901234567890, "price": 1.50}`
		code, body := post("m1", "ok", first, "")
		if code != 200 || !strings.Contains(body, `"created":true`) {
			t.Fatalf("first post: %d %s", code, body)
		}
		code, body = post("m1", "ok", first, "")
		if code != 200 || strings.Contains(body, `"created":true`) || !strings.Contains(body, `"job_id":1`) {
			t.Fatalf("repeated post: %d %s", code, body)
		}
		code, body = post("m2", "error", `{"n": 2}`, "")
		if code != 200 || !strings.Contains(body, `"filtered":true`) {
			t.Fatalf("filtered post: %d %s", code, body)
		}
		code, _ = post("m3", "ok", `{"n": 3}`, "sha256=00")
		if code != http.StatusUnauthorized {
			t.Fatalf("bad signature: %d", code)
		}
		jobs, err := k.Store.JobList(t.Context(), store.JobListParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Key != source.JobKey("in", "m1") {
			t.Fatalf("jobs = %d, want the one of m1", len(jobs))
		}
		if j := k.WaitJob(t, jobs[0].ID, 10*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s", j.State)
		}
		// The body's fields are the root's metadata as written: a 20-digit id and 1.50 unchanged.
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: jobs[0].ID, Limit: 10})
		if err != nil || len(items) == 0 {
			t.Fatalf("items: %d, %v", len(items), err)
		}
		md, err := metadata.Decode(items[0].Metadata)
		if err != nil || md["big"] != json.Number("12345678901234567890") || md["price"] != json.Number("1.50") {
			t.Errorf("root metadata %s (%v): want big 12345678901234567890 and price 1.50 as posted", items[0].Metadata, err)
		}
	})
}

// TestParseHeaders checks the allow list of headers a source keeps: listed names are kept
// lowercased, and a header that carries credentials is refused, named in the error, even when
// listed. The spec's URL, for display, masks the source's secret.
func TestParseHeaders(t *testing.T) {
	t.Parallel()
	s, err := source.Parse("in", "webhook:?workflow=w&headers=X-Request-Id,Traceparent&headers=x-request-id&secret=hmac-k3y")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Headers, " ") != "x-request-id traceparent" {
		t.Errorf("headers = %q", s.Headers)
	}
	if strings.Contains(s.URL, "hmac-k3y") || !strings.Contains(s.URL, "secret=xxxxx") {
		t.Errorf("URL = %q, want the secret masked", s.URL)
	}
	for _, tc := range []struct{ name, headers, refused string }{
		{"authorization", "Authorization", "authorization"},
		{"cookie among others", "X-Request-Id,Cookie", "cookie"},
		{"proxy authorization", "Proxy-Authorization", "proxy-authorization"},
		{"set-cookie", "Set-Cookie", "set-cookie"},
		{"a token", "X-Gitlab-Token", "x-gitlab-token"},
		{"a key", "X-Api-Key", "x-api-key"},
		{"a secret", "X-Webhook-Secret", "x-webhook-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := source.Parse("in", "webhook:?workflow=w&headers="+tc.headers)
			if err == nil || !strings.Contains(err.Error(), "headers="+tc.refused+":") {
				t.Errorf("headers=%s: %v, want an error naming %s", tc.headers, err, tc.refused)
			}
		})
	}
	if _, err := source.Parse("in", "nats://user:hmac-k3y@h/%zz?workflow=w"); err == nil || strings.Contains(err.Error(), "hmac-k3y") {
		t.Errorf("a bad URL's error: %v, want one without its secret", err)
	}
}

// TestWebhookSourceKeepsOnlyDeclaredHeaders posts a request carrying Authorization, Cookie and
// a token header beside a declared X-Request-Id: the job's root keeps the declared header and
// none of the others, in source_attributes or anywhere in its metadata, while an undeclared
// header still serves the source's filter.
func TestWebhookSourceKeepsOnlyDeclaredHeaders(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		k := enginetest.Start(t, open, basic.NewNoop())
		k.ApplyWorkflow(t, "name: req\nsteps:\n  a: {action: noop, needs: [start]}\n")
		spec, err := source.Parse("in", "webhook:?workflow=req&filter.status=ok&headers=X-Request-Id")
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /v1/sources/{name}", &source.Set{Handler: &source.Handler{Engine: k.Engine, Records: k.Store, Blobs: k.Blobs}, Specs: map[string]*source.Spec{"in": spec}})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		const bearer, cookie, token = "sl_bearer-5e7c1a", "session-9d2b4f", "tok-3a8e6c"
		req, _ := http.NewRequest("POST", srv.URL+"/v1/sources/in", strings.NewReader(`{"n": 1}`))
		req.Header.Set(sink.HeaderID, "m1")
		req.Header.Set("Status", "ok")
		req.Header.Set("X-Request-Id", "req-42")
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Cookie", "sid="+cookie)
		req.Header.Set("X-Gitlab-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"created":true`) {
			t.Fatalf("post: %d %s", resp.StatusCode, b)
		}
		jobs, err := k.Store.JobList(t.Context(), store.JobListParams{Limit: 10})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("jobs = %v, %v; want one", jobs, err)
		}
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: jobs[0].ID, Limit: 10})
		if err != nil || len(items) == 0 {
			t.Fatalf("items = %v, %v", items, err)
		}
		var md struct {
			Attributes map[string]string `json:"source_attributes"`
		}
		if err := json.Unmarshal(items[0].Metadata, &md); err != nil {
			t.Fatal(err)
		}
		if len(md.Attributes) != 1 || md.Attributes["x-request-id"] != "req-42" {
			t.Errorf("source_attributes = %v, want only x-request-id", md.Attributes)
		}
		for _, sec := range []string{bearer, cookie, token} {
			if strings.Contains(string(items[0].Metadata), sec) {
				t.Errorf("the root's metadata holds %q: %s", sec, items[0].Metadata)
			}
		}
	})
}

// TestEventSourceNumericKey: an event message correlates by a metadata number as written: a
// 20-digit id in the body or an attribute matches the item's, which float64 rounded.
func TestEventSourceNumericKey(t *testing.T) {
	t.Parallel()
	k := enginetest.Start(t, drivertest.OpenSQLite, basic.NewNoop())
	job := k.StartJob(t, "name: waits\nexternal: [approved]\nsteps:\n  a: {action: noop, needs: [start, approved]}\n",
		engine.Root{Name: "a", Metadata: map[string]any{"big": json.Number("12345678901234567890")}},
		engine.Root{Name: "b", Metadata: map[string]any{"big": json.Number("12345678901234567891")}})
	spec, err := source.Parse("in", "webhook:?workflow=waits&event=approved&key=big")
	if err != nil {
		t.Fatal(err)
	}
	h := &source.Handler{Engine: k.Engine, Records: k.Store, Blobs: k.Blobs}
	for _, m := range []source.Message{
		{ID: "m1", Body: []byte(`{"big": 12345678901234567890}`)},
		{ID: "m2", Attributes: map[string]string{"big": "12345678901234567891"}},
	} {
		out, err := h.Handle(t.Context(), spec, m)
		if err != nil || out.Matched != 1 {
			t.Errorf("%s: %+v, %v; want one item matched", m.ID, out, err)
		}
	}
	if j := k.WaitJob(t, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Errorf("job %s, want complete once both items are approved", j.State)
	}
}
