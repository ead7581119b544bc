package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/sandbox"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// hunt is what a hostile tool (SANDBOX_PROBE=hostile) found while another sandbox ran beside
// it: every process it could see, what it read and wrote through them and the other run's
// directory, and the /proc/*/net/tcp files that list a port the host listens on.
type hunt struct {
	UID    int
	UserNS string
	// Self is its own pid and Tree its own process and its ancestors, in its pid namespace.
	Self  int
	Tree  []int
	Procs map[int]string // pid → command line, of every process in its /proc
	Read  []string       // "path: content" of every file of another run it could read
	Wrote []string       // every path of another run it could create a file at
	TCP   []string       // every net/tcp file listing the port
}

// victim is the other run's probe (SANDBOX_PROBE=victim): it says who it is and waits for its
// stdin to close, its directory holding its input.
func victim() {
	ns, _ := os.Readlink("/proc/self/ns/user")
	fmt.Printf("ready uid=%d userns=%s\n", os.Getuid(), ns)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// hostile hunts for the victim's files in victimDir and through /proc, and for port in the
// network tables of every process it can see.
func hostile(victimDir, port string) {
	h := hunt{UID: os.Getuid(), Self: os.Getpid(), Procs: map[int]string{}}
	h.UserNS, _ = os.Readlink("/proc/self/ns/user")
	for pid := h.Self; pid > 0 && !slices.Contains(h.Tree, pid); pid = parent(pid) {
		h.Tree = append(h.Tree, pid)
	}
	n, _ := strconv.Atoi(port)
	listed := fmt.Sprintf(":%04X ", n)
	read := func(p string) {
		if b, err := os.ReadFile(p); err == nil {
			h.Read = append(h.Read, p+": "+string(b))
		}
	}
	write := func(dir string) {
		p := filepath.Join(dir, "planted")
		if err := os.WriteFile(p, []byte("planted"), 0o644); err == nil {
			h.Wrote = append(h.Wrote, p)
		}
	}
	tcp := func(p string) {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), listed) {
			h.TCP = append(h.TCP, p)
		}
	}
	// Other processes are hunted only when they run the same program as this one (the victim,
	// when it is visible at all): the unsandboxed control run sees every process of the machine,
	// and must not plant files in the working directories of unrelated programs. Reading a
	// process's exe link takes the same permission as reaching through its cwd and root.
	exe, _ := os.Readlink("/proc/self/exe")
	read(filepath.Join(victimDir, "input-1"))
	write(victimDir)
	tcp("/proc/net/tcp")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		h.Procs[pid] = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
		dir := fmt.Sprintf("/proc/%d", pid)
		tcp(dir + "/net/tcp")
		if slices.Contains(h.Tree, pid) {
			continue
		}
		if other, err := os.Readlink(dir + "/exe"); err != nil || other != exe {
			continue
		}
		read(dir + "/cwd/input-1")
		read(dir + "/root" + victimDir + "/input-1")
		write(dir + "/cwd")
		write(dir + "/root" + victimDir)
		read(dir + "/environ")
	}
	_ = json.NewEncoder(os.Stdout).Encode(h)
}

// parent returns the parent of pid, from /proc/pid/stat, or 0.
func parent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// side is what one run of [beside] found.
type side struct {
	// Unavailable says why the sandbox could not be had (the ordinary-user helper reports it).
	Unavailable string
	Token       string
	VictimUID   int
	VictimNS    string
	Hunt        hunt
	// HuntOut is the hostile tool's whole output, to search for the token.
	HuntOut string
	// Planted lists what the victim's directory holds besides its input afterwards.
	Planted []string
}

// beside runs self as a victim tool, holding its input (a random token) in its scratch
// directory and the token in its command line, and, while it runs, self as a hostile tool in
// another scratch directory hunting for both and for port on the host's loopback.
func beside(ctx context.Context, self string, port int) (side, error) {
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	s := side{Token: "victim-" + hex.EncodeToString(tok)}
	victimDir, err := os.MkdirTemp("", "sandbox-victim-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(victimDir)
	hostileDir, err := os.MkdirTemp("", "sandbox-hostile-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(hostileDir)
	if err := os.WriteFile(filepath.Join(victimDir, "input-1"), []byte(s.Token), 0o600); err != nil {
		return s, err
	}

	inR, inW, err := os.Pipe()
	if err != nil {
		return s, err
	}
	defer inR.Close()
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return s, err
	}
	defer outR.Close()
	defer outW.Close()
	victimDone := make(chan error, 1)
	go func() {
		victimDone <- subprocess.Run(ctx, subprocess.Cmd{Path: self, Args: []string{s.Token}, Dir: victimDir,
			Env: []string{"SANDBOX_PROBE=victim", "PATH=/usr/bin"}, Stdin: inR, Stdout: outW,
			Timeout: time.Minute, Sandbox: &sandbox.Spec{}})
	}()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(outR).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if _, err := fmt.Sscanf(line, "ready uid=%d userns=%s", &s.VictimUID, &s.VictimNS); err != nil {
			return s, fmt.Errorf("the victim said %q: %w", line, err)
		}
	case err := <-victimDone:
		return s, fmt.Errorf("the victim ended before it was ready: %v", err)
	case <-time.After(time.Minute):
		return s, fmt.Errorf("the victim did not start in a minute")
	}

	var out strings.Builder
	herr := subprocess.Run(ctx, subprocess.Cmd{Path: self, Dir: hostileDir,
		Env:    []string{"SANDBOX_PROBE=hostile", "SANDBOX_ARG=" + victimDir + "\n" + strconv.Itoa(port), "PATH=/usr/bin"},
		Stdout: &out, Timeout: time.Minute, Sandbox: &sandbox.Spec{}})
	inW.Close()
	if err := <-victimDone; err != nil {
		return s, fmt.Errorf("the victim: %w", err)
	}
	if herr != nil {
		return s, fmt.Errorf("the hostile tool: %w (%s)", herr, out.String())
	}
	s.HuntOut = out.String()
	if err := json.Unmarshal([]byte(s.HuntOut), &s.Hunt); err != nil {
		return s, fmt.Errorf("the hostile tool's report %q: %w", s.HuntOut, err)
	}
	ents, err := os.ReadDir(victimDir)
	if err != nil {
		return s, err
	}
	for _, e := range ents {
		if e.Name() != "input-1" {
			s.Planted = append(s.Planted, e.Name())
		}
	}
	return s, nil
}

// besideAsUser is the ordinary-user helper (SANDBOX_PROBE=beside): it runs [beside] as the user
// it was started as and prints what it found.
func besideAsUser(port string) {
	var s side
	if st := sandbox.Check(); !st.Available {
		s.Unavailable = st.Reason
	} else {
		self, err := os.Executable()
		if err == nil {
			n, _ := strconv.Atoi(port)
			s, err = beside(context.Background(), self, n)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(s)
}

// requireCapabilities says whether a capability the test needs must be there (CI) rather than
// skipped for.
func requireCapabilities() bool {
	return os.Getenv("CI") == "true" || os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1"
}

// TestSandboxesAreIsolated runs a hostile tool beside another sandboxed run, as root and as an
// ordinary user, the way a converter taken over by a document would try to reach another task:
// it must see no process but its own in /proc (not the host's, not the other run's, not pid 1's
// command line or network table), read nothing of the other run's input through /proc/PID/cwd,
// /proc/PID/root or its path, and plant nothing in its directory. As root each run has a uid of
// its own; as another user each has a user namespace of its own.
func TestSandboxesAreIsolated(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hostPID1, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, s side) {
		t.Helper()
		h := s.Hunt
		if _, ok := h.Procs[h.Self]; !ok {
			t.Fatalf("the hostile tool did not find itself in /proc (%s)", s.HuntOut)
		}
		for pid, cmdline := range h.Procs {
			if !slices.Contains(h.Tree, pid) {
				t.Errorf("the hostile tool sees process %d (%q), not its own (its tree: %v)", pid, cmdline, h.Tree)
			}
		}
		if c := strings.TrimSpace(strings.ReplaceAll(string(hostPID1), "\x00", " ")); h.Procs[1] == c {
			t.Errorf("the hostile tool reads the host's pid 1's command line: %q", c)
		}
		if strings.Contains(s.HuntOut, s.Token) {
			t.Errorf("the hostile tool found the other run's token: %s", s.HuntOut)
		}
		if len(h.Read) > 0 || len(h.Wrote) > 0 {
			t.Errorf("the hostile tool read %q and wrote %q", h.Read, h.Wrote)
		}
		if len(s.Planted) > 0 {
			t.Errorf("the hostile tool planted %q in the other run's directory", s.Planted)
		}
		if len(h.TCP) > 0 {
			t.Errorf("the hostile tool sees the host's listener on port %d in %q", port, h.TCP)
		}
	}

	t.Run("unsandboxed", func(t *testing.T) {
		// The hostile tool finds what there is to find: without the sandbox it sees the other
		// run's command line and the host's listener.
		requireSandbox(t)
		old := sandbox.SetMode(sandbox.Off)
		defer sandbox.SetMode(old)
		s, err := beside(t.Context(), self, port)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.HuntOut, s.Token) || len(s.Hunt.TCP) == 0 {
			t.Fatalf("unsandboxed, the hostile tool found neither the token nor the port: %s", s.HuntOut)
		}
	})
	t.Run("root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("runs as root only; the test runs as uid", os.Geteuid())
		}
		requireSandbox(t)
		s, err := beside(t.Context(), self, port)
		if err != nil {
			t.Fatal(err)
		}
		check(t, s)
		if s.VictimUID == 0 || s.Hunt.UID == 0 || s.VictimUID == s.Hunt.UID {
			t.Errorf("uids: the other run %d, the hostile tool %d; want two distinct non-root uids", s.VictimUID, s.Hunt.UID)
		}
	})
	t.Run("ordinary user", func(t *testing.T) {
		var s side
		if os.Geteuid() != 0 {
			requireSandbox(t)
			s, err = beside(t.Context(), self, port)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			s = besideAsNobody(t, self, port)
		}
		if s.Unavailable != "" {
			if requireCapabilities() {
				t.Fatalf("as an ordinary user the sandbox is unavailable: %s", s.Unavailable)
			}
			t.Skipf("as an ordinary user the sandbox is unavailable (the kernel refuses its user namespaces): %s", s.Unavailable)
		}
		check(t, s)
		if s.VictimUID == 0 || s.Hunt.UID == 0 || s.VictimNS == s.Hunt.UserNS {
			t.Errorf("the other run: uid %d in %s, the hostile tool: uid %d in %s; want non-root uids in distinct user namespaces",
				s.VictimUID, s.VictimNS, s.Hunt.UID, s.Hunt.UserNS)
		}
	})
}

// besideAsNobody runs [beside] as nobody, from a copy of the test binary nobody may run.
func besideAsNobody(t *testing.T, self string, port int) side {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "sandbox.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^$")
	cmd.Env = []string{"SANDBOX_PROBE=beside", "SANDBOX_ARG=" + strconv.Itoa(port), "PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the helper as nobody: %v (%s)", err, stderr.String())
	}
	var s side
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("the helper's report %q: %v", out, err)
	}
	return s
}
