package worker

import (
	"log/slog"
	"sync"
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
