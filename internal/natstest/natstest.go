// Package natstest runs the real NATS server (with JetStream) for tests: the shared one of the
// machine ([Shared]), a process of a test's own ([Start]) that the test may restart, or a
// cluster of them ([StartCluster]) whose nodes the test may kill and restart. Tests
// skip without a server, unless SLUICE_TEST_REQUIRE_NATS=1 (CI), where that is a failure.
package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// args are the cluster's arguments of a node of [StartCluster]; none for [Start].
	args []string
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
	port := freePort(tb)
	s := &Server{URL: "nats://127.0.0.1:" + strconv.Itoa(port), port: port, dir: tb.TempDir(), bin: Binary(tb), tb: tb}
	s.start()
	tb.Cleanup(s.Kill)
	return s
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Cluster is a JetStream cluster of nats-server processes of a test's own, each on its own
// client and route ports with its own store dir, every node routing to every other.
type Cluster struct {
	Nodes []*Server
}

// URL returns the nodes' addresses as one URL, nats://HOST:PORT,HOST:PORT,HOST:PORT: the form
// both nats.Connect and a Sluice sink's or source's URL take for a cluster.
func (c *Cluster) URL() string {
	hosts := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		hosts[i] = strings.TrimPrefix(n.URL, "nats://")
	}
	return "nats://" + strings.Join(hosts, ",")
}

// StartCluster starts a JetStream cluster of n nodes (3 for R3 streams) and waits until it has
// a meta leader; the nodes are killed when the test ends. A node may be killed and restarted
// ([Server.Kill], [Server.Restart]) on the same ports and store.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	bin := Binary(tb)
	name := fmt.Sprintf("sluice-test-%d", os.Getpid())
	routes := make([]string, n)
	clusterPorts := make([]int, n)
	for i := range n {
		clusterPorts[i] = freePort(tb)
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(clusterPorts[i])
	}
	c := &Cluster{}
	for i := range n {
		port := freePort(tb)
		s := &Server{URL: "nats://127.0.0.1:" + strconv.Itoa(port), port: port, dir: tb.TempDir(), bin: bin, tb: tb,
			args: []string{"--server_name", fmt.Sprintf("n%d", i+1), "--cluster_name", name,
				"--cluster", routes[i], "--routes", strings.Join(routes, ",")}}
		tb.Cleanup(s.Kill)
		c.Nodes = append(c.Nodes, s)
	}
	// The nodes start together: a node's JetStream answers only once the cluster has a meta
	// leader, which needs a quorum of the nodes.
	for _, s := range c.Nodes {
		s.launch()
	}
	for _, s := range c.Nodes {
		s.ready()
	}
	return c
}

func (s *Server) start() {
	s.tb.Helper()
	s.launch()
	s.ready()
}

// launch starts the process.
func (s *Server) launch() {
	s.tb.Helper()
	args := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", filepath.Join(s.dir, "js")}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
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
}

// ready waits until the server's JetStream answers (for a cluster's node: until the cluster
// has a meta leader and this node is part of it).
func (s *Server) ready() {
	s.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
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
			s.tb.Fatalf("nats-server on %s not ready in 30s: %v\n%s", s.URL, err, b)
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
