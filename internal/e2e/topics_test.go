package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-project/sluice/internal/natstest"
	"github.com/sluice-project/sluice/internal/poll"
)

// outcomeWorkflow publishes one outcome per item to the sink "bus".
const outcomeWorkflow = `name: outcomes
steps:
  digest:
    action: exec
    needs: [start]
    attempts: 100
    concurrency: 8
    with: {command: [sleep, "0.03"]}
    publish:
      - {sink: bus, subject: digest, context: FileSet}
`

// dedupConsumer consumes a subject with a durable consumer for the whole test, across server
// restarts, and counts messages by id.
type dedupConsumer struct {
	mu       sync.Mutex
	ids      map[string]int
	received int
}

func (d *dedupConsumer) seen() (distinct, received int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ids), d.received
}

// consumeDedup creates the stream with replicas when it is missing.
func consumeDedup(t *testing.T, url, stream, subject string, replicas int) *dedupConsumer {
	t.Helper()
	d := &dedupConsumer{ids: map[string]int{}}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); nc.Close() })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var cons jetstream.Consumer
		for ctx.Err() == nil {
			cctx, c := context.WithTimeout(ctx, 2*time.Second)
			if _, err := js.CreateStream(cctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Duplicates: 2 * time.Minute, Replicas: replicas}); err != nil && err != jetstream.ErrStreamNameAlreadyInUse {
				c()
				continue
			}
			cons, err = js.CreateOrUpdateConsumer(cctx, stream, jetstream.ConsumerConfig{Durable: "dedup", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second})
			c()
			if err == nil {
				break
			}
		}
		for ctx.Err() == nil {
			batch, err := cons.Fetch(500, jetstream.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				continue
			}
			for m := range batch.Messages() {
				id := m.Headers().Get(jetstream.MsgIDHeader)
				d.mu.Lock()
				d.ids[id]++
				d.received++
				d.mu.Unlock()
				_ = m.Ack()
			}
		}
	}()
	return d
}

// TestTopicsKillAndCompare runs a job of 2,000 items, each publishing one outcome to
// JetStream through the outbox, in the real binary; SIGKILLs it 10 times at random moments and
// restarts its own NATS server once mid-run. Afterwards the stream holds exactly 2,000
// messages with 2,000 distinct ids, and a consumer that deduplicates by id saw every one.
func TestTopicsKillAndCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("kill and compare: skipped in -short")
	}
	srv := natstest.Start(t)
	const items = 2000
	dir := t.TempDir()
	wf := filepath.Join(dir, "outcomes.yaml")
	if err := os.WriteFile(wf, []byte(outcomeWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(dir, "inputs")
	if err := os.MkdirAll(inputs, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if err := os.WriteFile(filepath.Join(inputs, fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dedup := consumeDedup(t, srv.URL, "KC", "kc.>", 1)
	data := filepath.Join(dir, "data")
	args := []string{"run", "--data", data, "--sink", "bus=" + srv.URL + "/kc?stream=KC", wf, inputs}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 21))
	kills := 0
	for kills < 10 {
		cmd := runSluice(ctx, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		delay := 150*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond)))
		if kills == 5 {
			// The broker dies under a running relay and comes back: publishes fail, the
			// outbox grows, and the relay catches up on its own once the server is back.
			select {
			case err := <-done:
				t.Fatalf("run %d ended before the broker restart (%v)\n%s", kills, err, out.String())
			case <-time.After(300 * time.Millisecond):
			}
			srv.Restart()
		}
		select {
		case err := <-done:
			t.Fatalf("run %d ended before its kill (%v): the job is too short for 10 kills\n%s", kills, err, out.String())
		case <-time.After(delay):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		kills++
	}
	if out, err := runSluice(ctx, args...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	out, err := runSluice(ctx, "outbox", "status", "--data", data).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("bus ")) {
		t.Fatalf("outbox status: %v\n%s", err, out)
	}
	t.Logf("outbox after the final run:\n%s", out)

	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var msgs uint64
	poll.Until(t, 20*time.Second, "2,000 messages in the stream", func() (bool, string) {
		info, err := js.Stream(ctx, "KC")
		if err != nil {
			return false, err.Error()
		}
		msgs = info.CachedInfo().State.Msgs
		return msgs >= items, fmt.Sprint(msgs)
	})
	// Every stored message, read back by an ordered consumer: 2,000 distinct ids, none twice.
	stored := storedIDs(t, js, "KC", msgs, func(m jetstream.Msg) error {
		if m.Headers().Get("status") != "ok" || m.Headers().Get("context") != "FileSet" {
			return fmt.Errorf("headers %v", m.Headers())
		}
		return nil
	})
	if msgs != items || len(stored) != items {
		t.Fatalf("the stream holds %d messages with %d distinct ids; want exactly %d", msgs, len(stored), items)
	}
	poll.Until(t, 20*time.Second, "the consumer to see every id", func() (bool, string) {
		distinct, received := dedup.seen()
		return distinct == items, fmt.Sprintf("%d distinct of %d received", distinct, received)
	})
	dedup.mu.Lock()
	for id := range dedup.ids {
		if !stored[id] {
			t.Errorf("the consumer saw %s, which the stream does not hold", id)
		}
	}
	dedup.mu.Unlock()
	distinct, received := dedup.seen()
	t.Logf("%d kills, 1 NATS restart: stream %d messages, consumer %d distinct ids of %d received", kills, msgs, distinct, received)
}
