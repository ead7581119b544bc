package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestRenewalGoesFirst: a renewal of leases queued behind a long queue of the writer's ops (on a
// loaded machine: children and results of a fan-out) is committed in the next batch, not after
// the queue — it used to wait its turn, and the leases of running tasks expired meanwhile.
func TestRenewalGoesFirst(t *testing.T) {
	t.Parallel()
	e := engine.New(engine.Config{Store: drivertest.OpenSQLite(t)})
	c := newCommitter(e, slog.New(slog.DiscardHandler), 2, 0, 1)
	ctx := t.Context()
	c.start(ctx)
	t.Cleanup(c.stop)
	var mu sync.Mutex
	var order []string
	note := func(s string) func(*engine.Tx) error {
		return func(*engine.Tx) error {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
			return nil
		}
	}
	gate := make(chan struct{})
	busy := make(chan struct{})
	if err := c.submit(ctx, func(*engine.Tx) error { close(busy); <-gate; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	<-busy // the lane is in its transaction
	for i := range 3 {
		if err := c.submit(ctx, note(string(rune('a'+i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	renewed := make(chan error, 1)
	go func() { renewed <- c.doFirst(ctx, note("renew")) }()
	poll.Until(t, 10*time.Second, "the renewal queued", func() (bool, string) { return len(c.first) == 1, "" })
	close(gate)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	if err := c.submit(ctx, note("last"), done); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 5 || order[0] != "renew" {
		t.Errorf("committed in the order %q, want the renewal first, ahead of the 3 ops queued before it", order)
	}
}

// TestCommitterStopNeverStrands reproduces the shutdown hang: an op queued while the committer
// stops (a task's result arriving as the process shuts down) waited forever in committer.await
// once no lane was left. Now an op is either committed or refused with ErrStopped, and every
// wait returns: for ops queued before the stop, during it, and after it.
func TestCommitterStopNeverStrands(t *testing.T) {
	t.Parallel()
	e := engine.New(engine.Config{Store: drivertest.OpenSQLite(t)})
	c := newCommitter(e, slog.New(slog.DiscardHandler), 2, 0, 1)
	// The caller's context ends first, as the CLI's does on SIGTERM: the lanes go on.
	ctx, cancel := context.WithCancel(context.Background())
	c.start(ctx)
	cancel()
	gate := make(chan struct{})
	busy := make(chan struct{})
	if err := c.submit(context.Background(), func(*engine.Tx) error { close(busy); <-gate; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	<-busy // the lane is in its transaction
	var committed atomic.Int32
	count := func(*engine.Tx) error { committed.Add(1); return nil }
	before := make(chan error, 1)
	go func() { before <- c.do(context.Background(), count) }()
	poll.Until(t, 10*time.Second, "the op queued", func() (bool, string) { return len(c.ops) == 1, "" })
	stopped := make(chan struct{})
	go func() { c.stop(); close(stopped) }()
	poll.Until(t, 10*time.Second, "the stop begun", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closed, ""
	})
	during := make(chan error, 1)
	go func() { during <- c.do(context.Background(), count) }()
	close(gate)
	wait := func(name string, ch chan error) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting 10s after the committer stopped", name)
			return nil
		}
	}
	if err := wait("an op queued before the stop", before); err != nil {
		t.Errorf("an op queued before the stop: %v, want it committed", err)
	}
	if err := wait("an op sent during the stop", during); !errors.Is(err, ErrStopped) {
		t.Errorf("an op sent during the stop: %v, want ErrStopped", err)
	}
	<-stopped
	after := make(chan error, 1)
	go func() { after <- c.doFirst(context.Background(), count) }()
	if err := wait("an op sent after the stop", after); !errors.Is(err, ErrStopped) {
		t.Errorf("an op sent after the stop: %v, want ErrStopped", err)
	}
	if err := c.submitAfter(context.Background(), count, func(error) { t.Error("after called for a refused op") }); !errors.Is(err, ErrStopped) {
		t.Errorf("submitAfter after the stop: %v, want ErrStopped", err)
	}
	if n := committed.Load(); n != 1 {
		t.Errorf("%d ops committed, want 1 (the one queued before the stop)", n)
	}
	c.stop() // idempotent
}
