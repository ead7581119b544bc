package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/sandbox"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// The test binary is its own hostile tool: run with SANDBOX_PROBE=what, it tries one thing and
// prints what happened.
func TestMain(m *testing.M) {
	if what := os.Getenv("SANDBOX_PROBE"); what != "" {
		probe(what, os.Getenv("SANDBOX_ARG"))
		return
	}
	os.Exit(m.Run())
}

func probe(what, arg string) {
	switch what {
	case "id":
		status, _ := os.ReadFile("/proc/self/status")
		capEff := ""
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "CapEff:") {
				capEff = strings.TrimSpace(strings.TrimPrefix(l, "CapEff:"))
			}
		}
		fmt.Printf("uid=%d cap=%s", os.Getuid(), capEff)
	case "read":
		b, err := os.ReadFile(arg)
		fmt.Printf("read=%q err=%v", b, err)
	case "dial":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		fmt.Printf("dial err=%v", err)
	case "write":
		n, _ := strconv.ParseInt(arg, 10, 64)
		f, err := os.Create("big")
		if err == nil {
			_, err = f.Write(make([]byte, n))
			f.Close()
		}
		fmt.Printf("write err=%v", err)
	case "spin":
		for i := 0; ; i++ {
			_ = i * i
		}
	case "victim":
		victim()
	case "hostile":
		dir, port, _ := strings.Cut(arg, "\n")
		hostile(dir, port)
	case "beside":
		besideAsUser(arg)
	case "orphan-parent":
		orphanParent(arg)
	case "symlink":
		os.Symlink(arg, "out.pdf")
		os.WriteFile("kept.txt", []byte("kept"), 0o644)
		fmt.Print("ok")
	}
}

func requireSandbox(t *testing.T) {
	t.Helper()
	st := sandbox.Check()
	if !st.Available {
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("sandbox unavailable: %s", st.Reason)
		}
		t.Skipf("sandbox unavailable: %s", st.Reason)
	}
}

// run runs the test binary as a probe in the sandbox, with scratch as its directory.
func run(t *testing.T, scratch, what, arg string, c subprocess.Cmd) (string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	c.Path, c.Dir, c.Stdout = self, scratch, &out
	c.Env = []string{"SANDBOX_PROBE=" + what, "SANDBOX_ARG=" + arg, "PATH=/usr/bin"}
	if c.Sandbox == nil {
		c.Sandbox = &sandbox.Spec{}
	}
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	err = subprocess.Run(t.Context(), c)
	return out.String(), err
}

// secret writes a file every user may read, outside the scratch dir: only the sandbox can keep
// a tool from it.
func secret(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(p, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUnprivileged(t *testing.T) {
	requireSandbox(t)
	out, err := run(t, t.TempDir(), "id", "", subprocess.Cmd{})
	if err != nil {
		t.Fatalf("run: %v (%s)", err, out)
	}
	var uid int
	var caps string
	if _, err := fmt.Sscanf(out, "uid=%d cap=%s", &uid, &caps); err != nil {
		t.Fatalf("probe said %q: %v", out, err)
	}
	// As root, a uid of the sandbox's own; else Sluice's.
	st := sandbox.Check()
	if uid == 0 || uid < st.UID || uid >= st.UID+st.UIDs || caps != "0000000000000000" {
		t.Errorf("got %q, want a uid from %d to %d and no capabilities", out, st.UID, st.UID+st.UIDs-1)
	}
}

func TestNoFileOutsideScratch(t *testing.T) {
	requireSandbox(t)
	scratch := t.TempDir()
	for _, p := range []string{secret(t), "/etc/hostname", "/etc/shadow", "/root", "/work", fmt.Sprintf("/proc/%d/environ", os.Getpid())} {
		out, _ := run(t, scratch, "read", p, subprocess.Cmd{})
		if !strings.Contains(out, "err=open") || strings.Contains(out, "top secret") {
			t.Errorf("read %s: %s", p, out)
		}
	}
	// Its own passwd names only itself.
	out, _ := run(t, scratch, "read", "/etc/passwd", subprocess.Cmd{})
	if strings.Contains(out, "daemon:") || !strings.Contains(out, "sandbox:x:") {
		t.Errorf("/etc/passwd: %s", out)
	}
	// Its scratch dir is its own.
	if err := os.WriteFile(filepath.Join(scratch, "in.txt"), []byte("input"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, scratch, "read", filepath.Join(scratch, "in.txt"), subprocess.Cmd{}); !strings.Contains(out, `read="input"`) {
		t.Errorf("scratch file: %s", out)
	}
}

func TestNoNetwork(t *testing.T) {
	requireSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	out, err := run(t, t.TempDir(), "dial", ln.Addr().String(), subprocess.Cmd{})
	if err != nil || !strings.Contains(out, "dial err=dial tcp") {
		t.Errorf("dial: %s (%v)", out, err)
	}
	select {
	case <-accepted:
		t.Error("the listener on loopback got a connection")
	default:
	}
}

func TestLimits(t *testing.T) {
	requireSandbox(t)
	t.Run("file size", func(t *testing.T) {
		// Go ignores SIGXFSZ, and so does the sandbox's init, so the write fails with EFBIG; a C
		// tool's child dies of the signal.
		out, _ := run(t, t.TempDir(), "write", strconv.Itoa(8<<20), subprocess.Cmd{Sandbox: &sandbox.Spec{FileSize: 1 << 20}})
		if out != "write err=write big: file too large" {
			t.Errorf("got %q, want the write refused", out)
		}
	})
	t.Run("cpu", func(t *testing.T) {
		_, err := run(t, t.TempDir(), "spin", "", subprocess.Cmd{Sandbox: &sandbox.Spec{CPU: 1}})
		var ee *subprocess.ExitError
		if !errors.As(err, &ee) || (ee.Signal != "CPU time limit exceeded" && ee.Signal != "killed") {
			t.Errorf("err = %v, want death by SIGXCPU", err)
		}
	})
	t.Run("time", func(t *testing.T) {
		_, err := run(t, t.TempDir(), "spin", "", subprocess.Cmd{Timeout: 500 * time.Millisecond})
		var ee *subprocess.ExitError
		if !errors.As(err, &ee) || !ee.TimedOut {
			t.Errorf("err = %v, want a time-out", err)
		}
	})
}

// TestOutputsAreRegularFiles: a tool that replaces its output with a symlink to a host file
// must not make Sluice read that file.
func TestOutputsAreRegularFiles(t *testing.T) {
	requireSandbox(t)
	scratch := t.TempDir()
	if _, err := run(t, scratch, "symlink", secret(t), subprocess.Cmd{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(scratch, "out.pdf")); !os.IsNotExist(err) {
		t.Errorf("the symlink is still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(scratch, "kept.txt")); err != nil || string(b) != "kept" {
		t.Errorf("regular output: %q, %v", b, err)
	}
}

// TestUnavailable: without bwrap, a sandboxed run fails with a message that says why and what
// to do; it never runs the tool unsandboxed.
// TestStartError: a kernel that refuses the namespace Sluice starts the sandbox in (EPERM from
// clone) makes the run unavailable, a per-file error, not a failure to retry.
func TestStartError(t *testing.T) {
	refused := &os.SyscallError{Syscall: "clone", Err: syscall.EPERM}
	var ue *sandbox.UnavailableError
	if err := sandbox.StartError(fmt.Errorf("fork/exec /usr/bin/prlimit: %w", refused)); !errors.As(err, &ue) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("EPERM: %v", err)
	}
	other := fmt.Errorf("fork/exec /usr/bin/prlimit: %w", syscall.ENOENT)
	if err := sandbox.StartError(other); err != other {
		t.Fatalf("ENOENT: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	err := subprocess.Run(context.Background(), subprocess.Cmd{Path: "/bin/true", Dir: t.TempDir(), Sandbox: &sandbox.Spec{}})
	var ue *sandbox.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Fatalf("err = %v", err)
	}
	// Turned off on purpose, the same run goes through.
	old := sandbox.SetMode(sandbox.Off)
	defer sandbox.SetMode(old)
	if err := subprocess.Run(context.Background(), subprocess.Cmd{Path: "/bin/true", Dir: t.TempDir(), Sandbox: &sandbox.Spec{}}); err != nil {
		t.Fatalf("with the sandbox off: %v", err)
	}
}

// TestFontCache runs fontconfig's fc-list in the sandbox with a new HOME, as every conversion
// runs: it finds the fonts through the system's cache, read-only, and builds no cache of its own
// (without the cache each run scanned all the fonts under /usr again).
func TestFontCache(t *testing.T) {
	requireSandbox(t)
	fcList, err := exec.LookPath("fc-list")
	if err != nil {
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatal("fc-list (fontconfig) is not installed")
		}
		t.Skip("fc-list (fontconfig) is not installed")
	}
	if m, _ := filepath.Glob("/var/cache/fontconfig/*.cache-*"); len(m) == 0 {
		t.Fatal("/var/cache/fontconfig holds no cache: run fc-cache")
	}
	scratch := t.TempDir()
	var out strings.Builder
	c := subprocess.Cmd{Path: fcList, Dir: scratch, Stdout: &out, Timeout: time.Minute,
		Env: []string{"PATH=/usr/bin", "HOME=" + scratch}, Sandbox: &sandbox.Spec{}}
	if err := subprocess.Run(t.Context(), c); err != nil {
		t.Fatalf("fc-list: %v", err)
	}
	if strings.Count(out.String(), "\n") == 0 {
		t.Fatalf("fc-list in the sandbox found no fonts")
	}
	var own []string
	filepath.WalkDir(scratch, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			own = append(own, p)
		}
		return nil
	})
	if len(own) > 0 {
		t.Errorf("fc-list built a font cache of its own in its HOME: %v", own)
	}
	c = subprocess.Cmd{Path: "/bin/sh", Args: []string{"-c", "touch /var/cache/fontconfig/x"}, Dir: scratch,
		Timeout: time.Minute, Env: []string{"PATH=/usr/bin:/bin"}, Sandbox: &sandbox.Spec{}}
	if err := subprocess.Run(t.Context(), c); err == nil {
		t.Errorf("a tool in the sandbox wrote into the system's font cache")
	}
}
