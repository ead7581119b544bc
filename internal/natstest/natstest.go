// Package natstest runs the real NATS server (with JetStream) for tests: the shared one of the
// machine ([Shared]), or a process of a test's own ([Start]) that the test may restart. Tests
// skip without a server, unless SLUICE_TEST_REQUIRE_NATS=1 (CI), where that is a failure.
package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func unavailable(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("SLUICE_TEST_REQUIRE_NATS") == "1" {
		tb.Fatalf("NATS: %s, but SLUICE_TEST_REQUIRE_NATS=1", why)
	}
	tb.Skipf("NATS: %s (set SLUICE_TEST_REQUIRE_NATS=1 to make this a failure)", why)
}

// Shared returns the URL of the machine's NATS server: SLUICE_TEST_NATS_URL, default
// nats://127.0.0.1:4222. It skips tb (or fails it, when required) if nothing answers there.
func Shared(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("SLUICE_TEST_NATS_URL")
	if u == "" {
		u = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(u, nats.Timeout(2*time.Second))
	if err != nil {
		unavailable(tb, fmt.Sprintf("no server at %s: %v", u, err))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := contextWithTimeout(2 * time.Second)
		_, err = js.AccountInfo(ctx)
		cancel()
	}
	if err != nil {
		unavailable(tb, fmt.Sprintf("the server at %s has no JetStream: %v", u, err))
	}
	return u
}

// Server is a nats-server process of a test's own, with JetStream storing in a temporary dir.
type Server struct {
	URL  string
	port int
	dir  string
	bin  string
	tb   testing.TB
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Binary returns the nats-server executable (PATH, then /usr/sbin), skipping or failing tb
// without one.
func Binary(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	unavailable(tb, "no nats-server executable (Debian package nats-server)")
	return ""
}

// Start starts a server on a free port; it is killed when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{URL: "nats://127.0.0.1:" + strconv.Itoa(port), port: port, dir: tb.TempDir(), bin: Binary(tb), tb: tb}
	s.start()
	tb.Cleanup(s.Kill)
	return s
}

func (s *Server) start() {
	s.tb.Helper()
	cmd := exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", filepath.Join(s.dir, "js"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.Create(filepath.Join(s.dir, "server.log"))
	if err != nil {
		s.tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	// Ready once JetStream answers.
	deadline := time.Now().Add(20 * time.Second)
	for {
		nc, err := nats.Connect(s.URL, nats.Timeout(time.Second))
		if err == nil {
			js, _ := jetstream.New(nc)
			ctx, cancel := contextWithTimeout(time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			nc.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			s.tb.Fatalf("nats-server on %s not ready in 20s: %v\n%s", s.URL, err, b)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// Kill kills the server (SIGKILL) and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

// Restart kills the server and starts it again on the same port and store.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	s.start()
}
