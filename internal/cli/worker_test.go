package cli

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/egress"
)

// TestWorkerTokenFlagRemoved checks that a token on the command line (visible in ps) is refused
// with an error saying where to put it instead.
func TestWorkerTokenFlagRemoved(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"worker", "--data", t.TempDir(), "--action", "Pdf", "--token", "s3cret", "--", "true"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "SLUICE_TOKEN") || !strings.Contains(errb.String(), "--token-file") {
		t.Errorf("worker --token = %d, %q; want 2 naming SLUICE_TOKEN and --token-file", code, errb.String())
	}
}

// TestWorkerToken reads the token from --token-file (first line, trimmed) or SLUICE_TOKEN, and
// fails clearly without either. Not parallel: it sets the environment.
func TestWorkerToken(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	t.Setenv("SLUICE_TOKEN", "")
	if _, err := workerToken(e, ""); err == nil || !strings.Contains(err.Error(), "SLUICE_TOKEN or pass --token-file") {
		t.Errorf("no token: %v", err)
	}
	t.Setenv("SLUICE_TOKEN", " from-env\n")
	if tok, err := workerToken(e, ""); err != nil || tok != "from-env" {
		t.Errorf("env: %q, %v", tok, err)
	}
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("from-file\n"), 0o600)
	if tok, err := workerToken(e, file); err != nil || tok != "from-file" {
		t.Errorf("file: %q, %v", tok, err)
	}
	if s := e.stderr.(*bytes.Buffer).String(); s != "" {
		t.Errorf("warning for a private file: %q", s)
	}
	os.Chmod(file, 0o644)
	if _, err := workerToken(e, file); err != nil || !strings.Contains(e.stderr.(*bytes.Buffer).String(), "readable by other users") {
		t.Errorf("no warning for a world-readable token file: %v", err)
	}
	os.WriteFile(file, nil, 0o600)
	if _, err := workerToken(e, file); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty file: %v", err)
	}
}

// TestEgressFlags checks that --egress-allow and --egress-deny (and, without them, the
// SLUICE_EGRESS_* variables) reach the node's egress policy. Not parallel: it sets the environment.
func TestEgressFlags(t *testing.T) {
	t.Setenv("SLUICE_EGRESS_ALLOW", "10.0.0.0/8")
	t.Setenv("SLUICE_EGRESS_DENY", "10.9.0.0/16")
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	policy := func(args ...string) (*egress.Policy, error) {
		fs, c := newFlags(e, "run", "run")
		c.addEgressFlags(fs)
		if _, err := parse(fs, args); err != nil {
			t.Fatal(err)
		}
		cfg, err := c.nodeConfig(t.Context(), e)
		return cfg.Egress, err
	}
	check := func(p *egress.Policy, addr string) bool {
		return p.Check("", netip.MustParseAddrPort(addr)) == nil
	}
	p, err := policy()
	if err != nil || !check(p, "10.1.1.1:80") || check(p, "10.9.1.1:80") || check(p, "127.0.0.1:80") {
		t.Errorf("from the environment: %v", err)
	}
	p, err = policy("--egress-allow", "127.0.0.0/8", "--egress-allow", "192.168.0.0/16,::1")
	if err != nil || !check(p, "127.0.0.1:80") || !check(p, "192.168.1.1:80") || !check(p, "[::1]:80") || check(p, "10.1.1.1:80") {
		t.Errorf("flags replace the environment: %v", err)
	}
	if _, err := policy("--egress-deny", "not a host"); err == nil {
		t.Error("a bad rule was accepted")
	}
}

// TestWorkerBuiltinUnknown: `sluice worker --action NAME` with no command runs the built-in
// action NAME; a name no built-in action has is refused at once (exit 2), naming it and the
// actions there are. Not parallel: it sets the environment.
func TestWorkerBuiltinUnknown(t *testing.T) {
	t.Setenv("SLUICE_TOKEN", "s3cret")
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"worker", "--data", t.TempDir(), "--server", "http://127.0.0.1:1", "--action", "graph-resolv"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), `"graph-resolv"`) || !strings.Contains(errb.String(), "graph-resolve") {
		t.Errorf("worker --action graph-resolv = %d, %q; want 2 naming it and the built-in actions", code, errb.String())
	}
}
