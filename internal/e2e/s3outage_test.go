package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// tcpProxy forwards TCP connections to a target and can make it look down or slow: while
// dropping, each connection (open or new) is closed at once; while delaying, each response is
// held back by the delay (the first bytes the target sends after the client wrote). It is safe
// for concurrent use.
type tcpProxy struct {
	target  string
	ln      net.Listener
	mode    atomic.Int32 // proxyUp, proxyDrop or proxyDelay
	delay   time.Duration
	dropped atomic.Int64
	delayed atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

const (
	proxyUp = iota
	proxyDrop
	proxyDelay
)

func startTCPProxy(t *testing.T, target string, delay time.Duration) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: target, ln: ln, delay: delay, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.set(proxyDrop)
		p.wg.Wait()
	})
	return p
}

// set switches the mode; dropping closes every open connection too.
func (p *tcpProxy) set(mode int32) {
	p.mode.Store(mode)
	if mode != proxyDrop {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		p.dropped.Add(1)
	}
}

func (p *tcpProxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on && p.mode.Load() == proxyDrop {
		return false
	}
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c, true) {
			p.dropped.Add(1)
			c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			defer c.Close()
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			if !p.track(up, true) {
				up.Close()
				return
			}
			defer p.track(up, false)
			defer up.Close()
			var asked atomic.Bool // the client wrote since the target last answered
			done := make(chan struct{}, 2)
			go func() {
				_, _ = io.Copy(writerFunc(func(b []byte) (int, error) { asked.Store(true); return up.Write(b) }), c)
				done <- struct{}{}
			}()
			go func() {
				_, _ = io.Copy(writerFunc(func(b []byte) (int, error) {
					if asked.Swap(false) && p.mode.Load() == proxyDelay {
						p.delayed.Add(1)
						time.Sleep(p.delay) // the injected slowness, not a wait for a condition
					}
					return c.Write(b)
				}), up)
				done <- struct{}{}
			}()
			<-done
		}()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// outageWorkflow is crashWorkflow with one attempt per step: an attempt the outage spent would
// leave an item error.
const outageWorkflow = `name: outage
steps:
  detect:  {action: detect, needs: [start], attempts: 1}
  unpack:  {action: unpack, needs: [detected.archive], attempts: 1}
  hash:    {action: exec, needs: [detected.text], attempts: 1, with: {command: [sha256sum], stdout: text}}
  collect: {action: ingest, needs: [children.done], attempts: 1}
  note:    {action: noop, needs: [start], attempts: 1}
`

// TestS3Outage runs a job whose blobs live on a real S3 server (versitygw) behind a TCP proxy
// that, once the job is under way, drops every connection for outageFor, then delays every
// response by 2 s for slowFor, then passes everything again. Every step has one attempt: the
// outage is an infrastructure failure, given back, not the action's. Meanwhile /readyz answers
// 503 "blob store unreachable since …", /metrics sluice_blob_store_up 0, and a task waits
// ready with the outage as its last error; once the store answers, /readyz is ready again,
// the job completes with every item and no error, and gc leaves no orphan.
func TestS3Outage(t *testing.T) {
	if testing.Short() {
		t.Skip("S3 outage: skipped in -short")
	}
	// SLUICE_TEST_S3_OUTAGE sets the outage's length for a measurement (docs/scale-out.md: 30s);
	// CI keeps it short.
	outageFor, slowFor, slowCall := 5*time.Second, 6*time.Second, 2*time.Second
	if v := os.Getenv("SLUICE_TEST_S3_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SLUICE_TEST_S3_OUTAGE=%s: %v", v, err)
		}
		outageFor = d
	}
	endpoint := versityGW(t, "sluice")
	u := strings.TrimPrefix(endpoint, "http://")
	proxy := startTCPProxy(t, u, slowCall)
	open := func(at string, attempts int) *blob.S3 {
		s, err := blob.NewS3(t.Context(), blob.S3Config{Bucket: "sluice", Prefix: "outage", Endpoint: at, Region: "us-east-1",
			AccessKey: "sluicekey", SecretKey: "sluicesecret", PathStyle: true, RequestTimeout: 5 * time.Second, MaxAttempts: attempts, SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Two attempts a call: a call fails within the outage instead of riding it out in the
	// client's retries, so the tasks see it.
	behind, direct := open("http://"+proxy.ln.Addr().String(), 2), open(endpoint, 8)

	ctx := t.Context()
	dir := t.TempDir()
	n, err := node.Open(ctx, node.Config{DataDir: filepath.Join(dir, "data"), Engine: true, Blobs: behind})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Start(ctx)
	defer n.Stop(10 * time.Second)
	a := api.New(api.Config{Backend: workerproto.NewBackend(n.Engine, n.Blobs, n.Worker), Records: n.Store, NoAuth: true,
		Problems: n.Problems, MoreMetrics: n.WriteMetrics})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz before the outage: %d %q", code, body)
	}

	if _, _, err := n.Engine.ApplyWorkflow(ctx, []byte(outageWorkflow), "outage.yaml"); err != nil {
		t.Fatal(err)
	}
	const zips, per = 8, 60
	inputs := filepath.Join(dir, "inputs")
	makeZips(t, inputs, zips, per)
	job := jobOfFiles(t, n, "outage", inputs)
	items := func() []*record.Item {
		its, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		return its
	}
	waitFor(t, time.Minute, "the archives to be unpacked", func() bool { return len(items()) > zips })

	proxy.set(proxyDrop)
	start := time.Now()
	poll.Until(t, 30*time.Second, "/readyz to report the outage", func() (bool, string) {
		code, body := get("/readyz")
		return code == 503 && strings.Contains(body, "blob store unreachable since"), fmt.Sprintf("%d %q", code, body)
	})
	_, body := get("/readyz")
	if _, metrics := get("/metrics"); !strings.Contains(metrics, "sluice_blob_store_up 0") {
		t.Errorf("/metrics during the outage lacks sluice_blob_store_up 0")
	}
	// A task met the outage and waits, ready, its attempt given back.
	poll.Until(t, 30*time.Second, "a task to wait out the outage", func() (bool, string) {
		tasks, err := n.Store.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, State: record.TaskReady, Limit: 100_000})
		if err != nil {
			return false, err.Error()
		}
		for _, tk := range tasks {
			if strings.Contains(tk.Error, "blob store unavailable") {
				if tk.Attempt != 0 {
					t.Errorf("task %d waits at attempt %d after the outage; want its attempt given back", tk.ID, tk.Attempt)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d ready tasks, none failed on the outage", len(tasks))
	})
	if d := outageFor - time.Since(start); d > 0 {
		<-time.After(d) // the outage's length is the scenario, not a wait for a condition
	}
	completed := func() int {
		counts, err := n.Store.TaskCounts(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, c := range counts {
			if c.State == record.TaskComplete {
				done += c.Tasks
			}
		}
		return done
	}
	before := completed()
	proxy.set(proxyDelay)
	slow := time.Now()
	// How long the work takes to resume once the store answers again, slowly (the cost of the
	// outage beyond its length).
	poll.Until(t, slowFor+time.Minute, "a task to complete after the outage", func() (bool, string) {
		c := completed()
		return c > before, fmt.Sprintf("%d tasks complete, %d before the outage ended", c, before)
	})
	resumed := time.Since(slow)
	if d := slowFor - resumed; d > 0 {
		<-time.After(d) // the slow phase's length is the scenario, not a wait for a condition
	}
	proxy.set(proxyUp)
	back := time.Now()
	poll.Until(t, 60*time.Second, "/readyz to be ready again", func() (bool, string) {
		code, body := get("/readyz")
		return code == 200, fmt.Sprintf("%d %q", code, body)
	})
	waitFor(t, 3*time.Minute, "the job to end", func() bool {
		j, err := n.Store.JobGet(ctx, job.ID)
		return err == nil && j.State != record.JobRunning
	})
	t.Logf("outage %v, slow %v: work resumed %v after the outage ended, the job ended %v after the store was back; /readyz during the outage: %q; proxy dropped %d connections, delayed %d responses",
		outageFor, slowFor, resumed.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond), strings.TrimSpace(body), proxy.dropped.Load(), proxy.delayed.Load())
	if proxy.delayed.Load() == 0 {
		t.Errorf("no response was delayed: the slow phase tested nothing")
	}
	if j, _ := n.Store.JobGet(ctx, job.ID); j.State != record.JobComplete {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	its := items()
	if want := zips + zips*per; len(its) != want {
		t.Errorf("%d items, want %d", len(its), want)
	}
	refs := map[string]bool{}
	for _, it := range its {
		if it.Error != "" || it.State != record.ItemIngested {
			t.Errorf("item %q: %s %q", it.Name, it.State, it.Error)
		}
		for _, sha := range []string{it.BlobSHA256, it.ThumbnailSHA} {
			if sha != "" {
				refs[sha] = true
			}
		}
	}
	checkBlobs(t, direct, refs)
	gcLeavesNoOrphans(t, n, behind, direct, endpoint)
}
