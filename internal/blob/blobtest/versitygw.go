package blobtest

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// versityGWPath finds the versitygw binary, or returns "" if it is not installed.
func versityGWPath(t testing.TB) string {
	if p := os.Getenv("SLUICE_TEST_VERSITYGW"); p != "" {
		return p
	}
	out, err := exec.CommandContext(t.Context(), "go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return ""
	}
	// Two lines, GOBIN first; either may be empty.
	gobin, gopath, _ := strings.Cut(string(out), "\n")
	var dirs []string
	if gobin = strings.TrimSpace(gobin); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, gp := range filepath.SplitList(strings.TrimSpace(gopath)) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// VersityGW starts the real S3 server versitygw (its posix backend) on a free
// loopback port, serving a fresh directory (dataDir: each of its directories
// is a bucket) with the credentials access and secret, and returns its
// endpoint once it answers HTTP. It is stopped when t's test ends. The binary
// is $SLUICE_TEST_VERSITYGW, else versitygw in GOBIN or GOPATH/bin; without
// it the test skips, unless SLUICE_TEST_REQUIRE_S3=1 (as in CI), where it
// fails.
func VersityGW(t testing.TB, access, secret string) (endpoint, dataDir string) {
	t.Helper()
	bin := versityGWPath(t)
	if bin == "" {
		msg := "versitygw not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0, or set SLUICE_TEST_VERSITYGW)"
		if os.Getenv("SLUICE_TEST_REQUIRE_S3") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	data := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "versitygw.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	// Not CommandContext(t.Context()): t's context is cancelled before
	// Cleanup runs, and the gateway must outlive the parallel sub-tests.
	cmd := exec.Command(bin, "--port", addr, "--access", access, "--secret", secret, "posix", data)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	logTail := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}

	endpoint = "http://" + addr
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return endpoint, data // any HTTP answer (403 without credentials) means ready
		}
		select {
		case err := <-exited:
			exited <- err // for Cleanup
			t.Fatalf("versitygw exited before becoming ready: %v\n%s", err, logTail())
		case <-ctx.Done():
			t.Fatalf("versitygw not ready at %s after 30s\n%s", endpoint, logTail())
		case <-tick.C:
		}
	}
}
