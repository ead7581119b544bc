package e2e

import (
	"bytes"
	"context"
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
	"github.com/sluice-project/sluice/internal/record"
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
				if j.State == record.JobComplete {
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
	poll.Until(t, 60*time.Second, "every request acknowledged", allAcked(t, js, "REQ", "sluice-req"))
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

// TestMeadowChainThroughSubject runs Meadow's chain the Sequins way: examples/meadow-ingest-sheet
// in one installation publishes every row's outcome to meadow.sheet.row-validated;
// examples/meadow-file-set in another, joined to it only by a source on that subject with the
// filter status: ok, makes a file set job of each valid row — none of the invalid ones — and
// publishes each file set's completion to meadow.file-set.complete.
func TestMeadowChainThroughSubject(t *testing.T) {
	if testing.Short() {
		t.Skip("meadow chain: skipped in -short")
	}
	nats1 := natstest.Shared(t)
	dir := t.TempDir()
	stream := fmt.Sprintf("MEADOW_%d", time.Now().UnixNano())
	prefix := strings.ToLower(stream)
	sinkURL := nats1 + "/" + prefix + "?stream=" + stream
	rows := filepath.Join(dir, "rows")
	if err := os.MkdirAll(rows, 0o755); err != nil {
		t.Fatal(err)
	}
	const valid, invalid = 12, 4
	for i := range valid + invalid {
		body := fmt.Sprintf("role: access\nfile: f%02d.tif\n", i)
		if i >= valid {
			body = fmt.Sprintf("file: f%02d.tif\n", i) // no role: invalid
		}
		if err := os.WriteFile(filepath.Join(rows, fmt.Sprintf("row-%02d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fileSets := filepath.Join(dir, "file-sets")
	if out, err := exec.Command(binary, "workflow", "apply", "--data", fileSets, "../../examples/meadow-file-set.yaml").CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	source := "rows=" + nats1 + "/" + prefix + ".sheet.row-validated?stream=" + stream + "&durable=" + prefix +
		"&workflow=meadow-file-set&filter.status=ok&filter.context=Sheet"
	stop, out := serve(t, "--data", fileSets, "--listen", freeAddr(t), "--sink", "meadow="+sinkURL, "--source", source)

	// Part 1: its invalid rows fail, so the run reports a job with errors; what matters is
	// what it published.
	sheet := filepath.Join(dir, "sheet")
	res, _ := exec.Command(binary, "run", "--data", sheet, "--sink", "meadow="+sinkURL, "../../examples/meadow-ingest-sheet.yaml", rows).CombinedOutput()

	nc, err := nats.Connect(nats1)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	count := func(subject string) (uint64, error) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return 0, err
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return 0, err
		}
		return info.State.Subjects[subject], nil
	}
	poll.Until(t, 30*time.Second, "every row's outcome published", func() (bool, string) {
		n, err := count(prefix + ".sheet.row-validated")
		return n == valid+invalid, fmt.Sprintf("%d (%v)\n%s", n, err, res)
	})
	poll.Until(t, 60*time.Second, "a completed file set per valid row", func() (bool, string) {
		n, err := count(prefix + ".file-set.complete")
		return n == valid, fmt.Sprintf("%d (%v)\n%s", n, err, out.String())
	})
	stop(true)
	jobs, complete := sourceJobs(t, fileSets, "rows")
	if len(jobs) != valid || complete != valid {
		t.Fatalf("%d file set jobs (%d complete), want %d: only the rows with status ok", len(jobs), complete, valid)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
}
