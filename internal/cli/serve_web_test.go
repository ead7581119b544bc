package cli_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/cli"
	"github.com/sluice-project/sluice/internal/poll"
)

// TestServeWebUI runs `sluice serve` and checks that the one binary serves the web UI at /
// beside the API: sign-in with a token made by `sluice token create`, a page with the strict
// CSP, the API still behind its bearer token, /healthz open.
func TestServeWebUI(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	var out, errb bytes.Buffer
	if code := cli.Main(t.Context(), []string{"token", "create", "--role", "admin", "--data", data}, &out, &errb); code != 0 {
		t.Fatalf("token create: %d %s", code, errb.String())
	}
	token := strings.TrimSpace(out.String())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var serveErr bytes.Buffer
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--listen", addr, "--data", data}, io.Discard, &serveErr)
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, serveErr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context ending")
		}
	}()
	base := "http://" + addr
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	poll.Until(t, 30*time.Second, "serve to answer /healthz", func() (bool, string) {
		res, err := c.Get(base + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == 200, res.Status
	})
	res, _ := get("/")
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /: %s, want a redirect", res.Status)
	}
	res, page := get("/signin")
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET /signin: %s, headers %v", res.Status, res.Header)
	}
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-in form:\n%s", page)
	}
	res, err = c.PostForm(base+"/signin", url.Values{"csrf": {m[1]}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %s", res.Status)
	}
	res, page = get("/workflows")
	if res.StatusCode != 200 || !strings.Contains(page, "documents") {
		t.Fatalf("GET /workflows signed in: %s, the built-in documents workflow listed: %v", res.Status, strings.Contains(page, "documents"))
	}
	// The API is where it was, and still wants its bearer token.
	res, _ = get("/v1/jobs")
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/jobs with a session cookie only: %s, want 401", res.Status)
	}
	req, _ := http.NewRequest("GET", base+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("GET /v1/jobs with the token: %s", res.Status)
	}
}
