package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/workflow"
)

// upload builds a multipart job creation of the docs workflow with one file per content.
func upload(contents ...string) (string, *bytes.Buffer) { return uploadJobs(1, contents...) }

// uploadJobs is upload with the job part repeated n times.
func uploadJobs(n int, contents ...string) (string, *bytes.Buffer) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for range n {
		jp, _ := mw.CreateFormField("job")
		jp.Write([]byte(`{"workflow":"docs"}`))
	}
	for i, c := range contents {
		fp, _ := mw.CreateFormFile("file", fmt.Sprintf("f%d.txt", i))
		fp.Write([]byte(c))
	}
	mw.Close()
	return mw.FormDataContentType(), &buf
}

// apiError decodes an error body.
func apiError(t *testing.T, data []byte) (e struct{ Code, Message, Limit string }) {
	t.Helper()
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("error body %q: %v", data, err)
	}
	return e
}

// noJobs fails unless no job exists.
func (b *bundle) noJobs(t *testing.T) {
	t.Helper()
	var jobs struct{ Jobs []any }
	b.json(t, "GET", "/v1/jobs", nil, 200, &jobs)
	if len(jobs.Jobs) != 0 {
		t.Fatalf("a refused request created jobs: %+v", jobs.Jobs)
	}
}

// TestUploadLimits checks the caps on multipart parts, upload bytes and roots: one past each cap is
// 413 naming the flag that raises it and creates no job; exactly the cap is accepted.
func TestUploadLimits(t *testing.T) {
	t.Parallel()
	b := setupWith(t, drivertest.OpenSQLite, func(c *api.Config) {
		c.Limits = api.Limits{MaxParts: 5, MaxUploadBytes: 100, MaxRoots: 3}
	})
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	os.MkdirAll(filepath.Join(b.dir, "inbox"), 0o700)
	var paths []string
	for i := range 4 {
		p := filepath.Join(b.dir, "inbox", fmt.Sprintf("p%d.txt", i))
		os.WriteFile(p, []byte("x"), 0o600)
		paths = append(paths, p)
	}
	for _, tt := range []struct {
		name  string
		jobs  int
		files []string
		limit string
	}{
		{"six parts", 3, []string{"a", "b", "c"}, "max-parts"},
		{"101 bytes", 1, []string{strings.Repeat("a", 60), strings.Repeat("b", 41)}, "max-upload-bytes"},
		{"four roots", 1, []string{"a", "b", "c", "d"}, "max-roots"},
	} {
		ct, body := uploadJobs(tt.jobs, tt.files...)
		code, data := b.do(t, "POST", "/v1/jobs", b.admin, ct, body)
		e := apiError(t, data)
		if code != 413 || e.Code != "too_large" || e.Limit != tt.limit || !strings.Contains(e.Message, "sluice serve --"+tt.limit) {
			t.Errorf("%s: %d %+v; want 413 too_large naming --%s", tt.name, code, e, tt.limit)
		}
	}
	four, _ := json.Marshal(map[string]any{"workflow": "docs", "paths": paths})
	code, data := b.do(t, "POST", "/v1/jobs", b.admin, "application/json", bytes.NewReader(four))
	if e := apiError(t, data); code != 413 || e.Limit != "max-roots" {
		t.Errorf("four paths: %d %+v; want 413 naming --max-roots", code, e)
	}
	b.noJobs(t)

	// At the caps: five parts, 100 bytes, three roots.
	ct, body := upload(strings.Repeat("a", 60), strings.Repeat("b", 39), "c")
	if code, data := b.do(t, "POST", "/v1/jobs", b.admin, ct, body); code != 201 {
		t.Errorf("upload at the caps: %d %s", code, data)
	}
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "docs", "paths": paths[:3]}, 201, nil)
}

// slowBody is a request body that sends head, then, if gap is set, one more byte every gap until
// n bytes are sent; with no gap it sends nothing more and stays open until the request ends.
func slowBody(ctx context.Context, head string, n int, gap time.Duration) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
		if _, err := io.WriteString(pw, head); err != nil {
			return
		}
		if gap == 0 {
			<-ctx.Done()
			return
		}
		tick := time.NewTicker(gap)
		defer tick.Stop()
		for range n - len(head) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	return pr
}

// TestBodyReadTimeout checks that a body that stops arriving is answered 408 naming the flag,
// while an upload that keeps sending outlives the timeout, and a progress stream (no body) is
// not cut by it.
func TestBodyReadTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 400 * time.Millisecond
	b := setupWith(t, drivertest.OpenSQLite, func(c *api.Config) { c.Limits.BodyReadTimeout = timeout })
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(rctx, "POST", b.srv.URL+"/v1/workflows", slowBody(rctx, "name: docs\n", 0, 0))
	req.Header.Set("Authorization", "Bearer "+b.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("stalled body: %v (the server kept waiting)", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	stop()
	if e := apiError(t, data); resp.StatusCode != 408 || e.Code != "timeout" || e.Limit != "body-read-timeout" ||
		!strings.Contains(e.Message, "--body-read-timeout") {
		t.Errorf("stalled body: %d %+v; want 408 naming --body-read-timeout", resp.StatusCode, e)
	}

	// An upload sending a byte every timeout/4 takes about three timeouts, and is accepted.
	ct, full := upload("")
	head := full.String()
	tail := head[strings.LastIndex(head, "\r\n--"):]
	head = head[:len(head)-len(tail)]
	body := io.MultiReader(slowBody(ctx, head, len(head)+12, timeout/4), strings.NewReader(tail))
	req, _ = http.NewRequestWithContext(ctx, "POST", b.srv.URL+"/v1/jobs", body)
	req.Header.Set("Authorization", "Bearer "+b.admin)
	req.Header.Set("Content-Type", ct)
	start := time.Now()
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || time.Since(start) < 2*timeout {
		t.Errorf("slow upload: %d %s after %s; want 201 after more than %s", resp.StatusCode, data, time.Since(start), 2*timeout)
	}
	var job struct{ ID int64 }
	json.Unmarshal(data, &job)

	// The progress stream outlives the body timeout: keep-alives for over two timeouts, then the end.
	req, _ = http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/jobs/%d/progress?token=%s", b.srv.URL, job.ID, url.QueryEscape(b.reader)), nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	start = time.Now()
	for time.Since(start) < 2*timeout && sc.Scan() {
	}
	b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", job.ID), nil, 200, nil)
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	if !strings.Contains(rest.String(), "event: end") {
		t.Errorf("progress stream ended without its end event after %s: %q", time.Since(start), rest.String())
	}
}

// TestServerTimeouts checks that API.Server sets the header timeout: a client that sends part of
// its headers and stops is disconnected.
func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	b := setupWith(t, drivertest.OpenSQLite, func(c *api.Config) { c.Limits.ReadHeaderTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a connection whose headers never ended")
	}
	srv := b.apiForRoutes(t).Server()
	if srv.ReadHeaderTimeout != api.DefaultReadHeaderTimeout || srv.IdleTimeout != api.DefaultIdleTimeout || srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Errorf("default server timeouts: header %s idle %s read %s write %s", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.ReadTimeout, srv.WriteTimeout)
	}
}

// TestUnauthenticatedBodyUnread checks that a request refused for its token is answered while
// its body is still being sent.
func TestUnauthenticatedBodyUnread(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", b.srv.URL+"/v1/jobs", slowBody(ctx, "{", 0, 0))
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%v (the server waited for the body)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("status %d, want 401", resp.StatusCode)
	}
}

// TestJSONBodyBounds: bodies are read only as far as their parsers accept. A workflow over
// workflow.MaxSourceBytes is a 413, to /v1/workflows/validate (a reader's) and to
// /v1/workflows, not read up to 4 MiB and refused by the parser; the requests JSON of
// /v1/filesets is refused with a 413 naming --max-roots when it holds more values than that many
// requests could need (with MaxRoots 3: 300), spread over the list or hidden in one request, and
// no job is made.
func TestJSONBodyBounds(t *testing.T) {
	t.Parallel()
	b := setupWith(t, drivertest.OpenSQLite, func(c *api.Config) { c.Limits.MaxRoots = 3 })
	big := "name: docs\n#" + strings.Repeat("x", workflow.MaxSourceBytes) + "\n"
	for _, c := range []struct {
		name, path, token, body string
		limit, msg              string
	}{
		{"validate a workflow over 1 MiB", "/v1/workflows/validate", b.reader, big, "", "a workflow may be at most 1 MiB"},
		{"apply a workflow over 1 MiB", "/v1/workflows", b.admin, big, "", "a workflow may be at most 1 MiB"},
		{"a list of 301 requests", "/v1/filesets", b.admin, `{"requests":[` + strings.Repeat(`0,`, 300) + `0]}`, "max-roots",
			"the requests JSON holds over 300 values, more than 3 requests (a job's most roots) could need; raise it with sluice serve --max-roots"},
		{"one request of 301 values", "/v1/filesets", b.admin, `{"requests":[{"base_url":"http://127.0.0.1:1/record/5","edit_extra":[` + strings.Repeat(`0,`, 300) + `0]}]}`, "max-roots",
			"the requests JSON holds over 300 values, more than 3 requests (a job's most roots) could need; raise it with sluice serve --max-roots"},
	} {
		code, data := b.do(t, "POST", c.path, c.token, "application/json", strings.NewReader(c.body))
		if e := apiError(t, data); code != 413 || e.Code != "too_large" || e.Limit != c.limit || e.Message != c.msg {
			t.Errorf("%s: %d %+v; want 413 too_large: %s", c.name, code, e, c.msg)
		}
	}
	b.noJobs(t)
	// At the bound: three requests and a key, 300 values in all.
	three := `{"base_url":"http://127.0.0.1:1/record/5","edit_extra":[` + strings.Repeat(`0,`, 95) + `0]}`
	b.json(t, "POST", "/v1/filesets", `{"key":"k","requests":[`+three+`,`+three+`,`+three+`]}`, 201, nil)
}
