package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-project/sluice/internal/natstest"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/source"
	"github.com/sluice-project/sluice/internal/store"
)

const requestWorkflow = `name: handle-request
steps:
  handle: {action: noop, needs: [start]}
`

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serve starts `sluice serve` with args; the returned function SIGKILLs it (or, with term,
// stops it with SIGTERM) and waits.
func serve(t *testing.T, args ...string) (stop func(term bool), out *bytes.Buffer) {
	t.Helper()
	cmd := runSluice(t.Context(), append([]string{"serve"}, args...)...)
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stopped := false
	stop = func(term bool) {
		if stopped {
			return
		}
		stopped = true
		sig := syscall.SIGKILL
		if term {
			sig = syscall.SIGTERM
		}
		_ = syscall.Kill(-cmd.Process.Pid, sig)
		<-done
	}
	t.Cleanup(func() { stop(false) })
	return stop, out
}

// sourceJobs counts the jobs a source made, by message id, reading the data dir.
func sourceJobs(t *testing.T, data, name string) (byMsg map[string]int, complete int) {
	t.Helper()
	n, err := node.Open(t.Context(), node.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	byMsg = map[string]int{}
	after := int64(0)
	for {
		jobs, err := n.Store.JobList(t.Context(), store.JobListParams{AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if id, ok := strings.CutPrefix(j.Key, source.JobKey(name, "")); ok {
				byMsg[id]++
				if j.State == store.JobComplete {
					complete++
				}
			}
		}
		if len(jobs) < 1000 {
			break
		}
		after = jobs[len(jobs)-1].ID
	}
	return byMsg, complete
}

// TestSourceKilledMidStream feeds a JetStream source 1,000 requests and SIGKILLs the serving
// process twice while it turns them into jobs: afterwards there are exactly 1,000 jobs, one per
// message id, every one complete — a message redelivered after a kill found its job.
func TestSourceKilledMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("source kill: skipped in -short")
	}
	srv := natstest.Start(t)
	const requests = 1000
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	wf := filepath.Join(dir, "handle.yaml")
	if err := os.WriteFile(wf, []byte(requestWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary, "workflow", "apply", "--data", data, wf).CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "REQ", Subjects: []string{"req.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range requests {
		m := nats.NewMsg("req.in")
		m.Data = fmt.Appendf(nil, `{"request": %d}`, i)
		m.Header.Set("status", "ok")
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprintf("req-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--data", data, "--listen", "", "--source-ack-wait", "1s",
		"--source", "req=" + srv.URL + "/req.in?stream=REQ&workflow=handle-request&filter.status=ok"}
	for kill := 0; kill < 2; kill++ {
		args[3] = freeAddr(t)
		stop, _ := serve(t, args...)
		// Kill once some requests became jobs, mid-stream.
		info := func() (*jetstream.ConsumerInfo, error) {
			c, err := js.Consumer(ctx, "REQ", "sluice-req")
			if err != nil {
				return nil, err
			}
			return c.Info(ctx)
		}
		poll.Until(t, 30*time.Second, "the consumer to be under way", func() (bool, string) {
			ci, err := info()
			if err != nil {
				return false, err.Error()
			}
			return ci.Delivered.Stream >= uint64(150+350*kill), fmt.Sprintf("delivered up to %d", ci.Delivered.Stream)
		})
		stop(false)
		jobs, _ := sourceJobs(t, data, "req")
		if len(jobs) == 0 || len(jobs) >= requests {
			t.Fatalf("kill %d: %d jobs; the kill was not mid-stream", kill, len(jobs))
		}
		t.Logf("kill %d after %d jobs", kill+1, len(jobs))
	}
	args[3] = freeAddr(t)
	stop, out := serve(t, args...)
	poll.Until(t, 60*time.Second, "every request acknowledged", func() (bool, string) {
		c, err := js.Consumer(ctx, "REQ", "sluice-req")
		if err != nil {
			return false, err.Error()
		}
		ci, err := c.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return ci.NumPending == 0 && ci.NumAckPending == 0, fmt.Sprintf("%d pending, %d unacknowledged", ci.NumPending, ci.NumAckPending)
	})
	stop(true)
	jobs, complete := sourceJobs(t, data, "req")
	if len(jobs) != requests {
		t.Fatalf("%d jobs, want %d\n%s", len(jobs), requests, out.String())
	}
	for i := range requests {
		id := fmt.Sprintf("req-%04d", i)
		if jobs[id] != 1 {
			t.Fatalf("message %s made %d jobs", id, jobs[id])
		}
	}
	// Jobs complete in the background; the last ones may still run when serve stopped.
	if complete < requests-50 {
		t.Errorf("only %d of %d jobs complete", complete, requests)
	}
}
