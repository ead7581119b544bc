package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/cli"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/sink"
)

// TestSecretsNeverShown plants distinct secrets where an installation meets them — the admin
// token, a cookie and a token header on a request to a webhook source; a webhook sink's
// password, query token and signing secret; the source's signing secret — runs `sluice serve`
// in-process with logs and OTLP traces on, lets the sink fail (its receiver is down), and reads
// every output: the log, the API's jobs, items and errors with a reader token, the web UI's
// pages, /metrics, the exported traces, `outbox status` (table and JSON) and `config show`
// (table and JSON). No secret appears in any of them, while each shows what it should (the
// declared header, the masked URL), so the search is not vacuous.
//
// Not parallel: traces are switched on by the OTEL_* environment.
func TestSecretsNeverShown(t *testing.T) {
	var (
		mu     sync.Mutex
		traces [][]byte
	)
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		traces = append(traces, b)
		mu.Unlock()
	}))
	defer otlp.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

	data := t.TempDir()
	// run runs a command and returns its output, stdout then stderr.
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		var out, errb bytes.Buffer
		if code := cli.Main(t.Context(), args, &out, &errb); code != 0 {
			t.Fatalf("sluice %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		return out.String(), errb.String()
	}
	main := func(args ...string) string { o, e := run(args...); return o + e }
	admin, _ := run("token", "create", "--role", "admin", "--data", data)
	reader, _ := run("token", "create", "--role", "reader", "--data", data)
	admin, reader = strings.TrimSpace(admin), strings.TrimSpace(reader)
	wf := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(wf, []byte("name: hooked\nsteps:\n  handle:\n    action: noop\n    needs: [start]\n    publish: [{sink: hook}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main("workflow", "apply", "--data", data, wf)

	const (
		cookie      = "cookie-7f3a91c2"
		headerToken = "hdrtok-4b8e2d60"
		sinkPass    = "sinkpass-9c1d7e3a"
		sinkToken   = "sinktok-2e6f8a14"
		sinkHMAC    = "sinkhmac-5a0b3c9d"
		sourceHMAC  = "srchmac-8d4c1f7b"
	)
	secrets := map[string]string{
		"the admin token (Authorization)": admin, "a cookie": cookie, "a token header": headerToken,
		"the sink's password": sinkPass, "the sink's query token": sinkToken, "the sink's signing secret": sinkHMAC,
		"the source's signing secret": sourceHMAC,
	}
	down := freeAddr(t) // the sink's receiver is down: every delivery fails, naming the URL
	topics := []string{
		"--sink", "hook=http://hookuser:" + sinkPass + "@" + down + "/in?token=" + sinkToken + "&secret=" + sinkHMAC,
		"--source", "in=webhook:?workflow=hooked&headers=X-Request-Id&secret=" + sourceHMAC,
	}

	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var serveOut, serveLog poll.Buffer
	go func() {
		done <- cli.Main(ctx, append([]string{"serve", "--listen", addr, "--data", data, "-v", "--log-format", "json"}, topics...), &serveOut, &serveLog)
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, serveLog.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context ending")
		}
	}
	defer stop()

	base := "http://" + addr
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(token, path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %s %s", path, res.Status, b)
		}
		return string(b)
	}
	poll.Until(t, 30*time.Second, "serve to answer /healthz", func() (bool, string) {
		res, err := c.Get(base + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == 200, res.Status
	})

	// A request to the source carrying credentials beside a declared header.
	body := `{"n": 1}`
	req, _ := http.NewRequest("POST", base+"/v1/sources/in", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Cookie", "sid="+cookie)
	req.Header.Set("X-Api-Token", headerToken)
	req.Header.Set("X-Request-Id", "req-kept-1")
	req.Header.Set(sink.HeaderID, "m1")
	req.Header.Set(sink.HeaderSignature, sink.Sign([]byte(sourceHMAC), []byte(body)))
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var outcome struct {
		JobID int64 `json:"job_id"`
	}
	if res.StatusCode != 200 || json.Unmarshal(b, &outcome) != nil || outcome.JobID == 0 {
		t.Fatalf("POST /v1/sources/in: %s %s", res.Status, b)
	}
	job := fmt.Sprint(outcome.JobID)
	outputs := map[string]string{}
	poll.Until(t, 30*time.Second, "the source's job to complete", func() (bool, string) {
		j := get(reader, "/v1/jobs/"+job)
		return strings.Contains(j, `"state":"complete"`), j
	})
	// The publish rule's message fails against the down receiver; the failure is recorded.
	poll.Until(t, 30*time.Second, "a failed delivery to the sink", func() (bool, string) {
		m := get(reader, "/metrics")
		return regexp.MustCompile(`sluice_outbox_delivery_failures_total\{sink="hook"\} [1-9]`).MatchString(m), ""
	})
	outputs["GET /metrics"] = get(reader, "/metrics")

	// The API, as a reader.
	for _, p := range []string{"/v1/jobs", "/v1/jobs/" + job, "/v1/jobs/" + job + "/items", "/v1/jobs/" + job + "/errors", "/v1/jobs/" + job + "/documents"} {
		outputs["GET "+p] = get(reader, p)
	}
	var items struct {
		Items []struct {
			ID int64 `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(outputs["GET /v1/jobs/"+job+"/items"]), &items); err != nil || len(items.Items) == 0 {
		t.Fatalf("items of job %s: %v %s", job, err, outputs["GET /v1/jobs/"+job+"/items"])
	}
	root := fmt.Sprint(items.Items[0].ID)
	outputs["GET /v1/items/"+root] = get(reader, "/v1/items/"+root)
	if !strings.Contains(outputs["GET /v1/items/"+root], `"x-request-id":"req-kept-1"`) {
		t.Errorf("the root lost its declared header: %s", outputs["GET /v1/items/"+root])
	}

	// The web UI, signed in with the reader token.
	jar, _ := cookiejar.New(nil)
	web := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err = web.Get(base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no sign-in form: %s", b)
	}
	res, err = web.PostForm(base+"/signin", url.Values{"csrf": {string(m[1])}, "token": {reader}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, p := range []string{"/jobs", "/jobs/" + job, "/jobs/" + job + "/items", "/items/" + root, "/operations", "/workflows/hooked"} {
		res, err := web.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("web GET %s: %s", p, res.Status)
		}
		outputs["web "+p] = string(b)
	}

	stop() // flushes the traces and ends the log
	outputs["serve's log"] = serveLog.String() + serveOut.String()
	mu.Lock()
	outputs["OTLP traces"] = string(bytes.Join(traces, nil))
	spans := len(traces)
	mu.Unlock()
	if spans == 0 {
		t.Error("no traces were exported: the search of traces proves nothing")
	}

	// The CLI: outbox status and config show.
	outputs["outbox status"] = main(append([]string{"outbox", "status", "--data", data}, topics...)...)
	outputs["outbox status --json"] = main(append([]string{"outbox", "status", "--json", "--data", data}, topics...)...)
	if !strings.Contains(outputs["outbox status"], "token=xxxxx") {
		t.Errorf("outbox status does not show the sink's failure with its masked URL:\n%s", outputs["outbox status"])
	}
	outputs["config show"] = main(append([]string{"config", "show", "--data", data}, topics...)...)
	outputs["config show --output json"] = main(append([]string{"config", "show", "--output", "json", "--data", data}, topics...)...)
	if !strings.Contains(outputs["config show"], "hook=http://hookuser:xxxxx@") {
		t.Errorf("config show does not show the sink, masked:\n%s", outputs["config show"])
	}

	for where, out := range outputs {
		for what, secret := range secrets {
			if strings.Contains(out, secret) {
				i := strings.Index(out, secret)
				t.Errorf("%s shows %s: …%s…", where, what, out[max(0, i-200):min(len(out), i+len(secret)+50)])
			}
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
