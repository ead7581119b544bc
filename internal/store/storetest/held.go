package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// testHeldLeases checks the held-lease calls against the driver's Capabilities.HeldLeases: a
// driver without them refuses to hold or record (ErrUnsupported) and has nothing to expire; a
// driver with them holds a ready task without writing it and finishes it once, counting the
// attempt. (Postgres's own tests cover skipping, rollback and expiry in depth.)
func testHeldLeases(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "a"), "s")
	p := store.TaskLeaseManyParams{Queues: []string{"q"}, Limits: []int{5}, Owner: "w", Now: b.now, LeaseUntil: b.at(time.Minute)}
	if !b.s.Capabilities().HeldLeases {
		if _, err := b.s.TaskHoldMany(ctx, p); !errors.Is(err, store.ErrUnsupported) {
			t.Errorf("TaskHoldMany without held leases: %v, want ErrUnsupported", err)
		}
		if _, err := b.s.HeldLeaseRecord(ctx, store.HeldLeaseParams{Owner: "w", TaskIDs: []int64{tk.ID}, Attempts: []int{1}, Started: b.now, Until: b.now}); !errors.Is(err, store.ErrUnsupported) {
			t.Errorf("HeldLeaseRecord without held leases: %v, want ErrUnsupported", err)
		}
		if n, err := b.s.HeldLeaseExpire(ctx, b.at(time.Hour)); err != nil || n != 0 {
			t.Errorf("HeldLeaseExpire without held leases = %d, %v; want 0", n, err)
		}
		return
	}
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		held, err := x.TaskHoldMany(ctx, p)
		if err != nil {
			return err
		}
		if len(held) != 1 || held[0].ID != tk.ID || !held[0].Held || held[0].Attempt != 1 {
			return fmt.Errorf("held %+v, want task %d, held, at attempt 1", held, tk.ID)
		}
		if got := b.getTask(tk.ID); got.State != store.TaskReady || got.Attempt != 0 {
			t.Errorf("held task read from outside = %s at attempt %d, want ready at 0 (nothing written)", got.State, got.Attempt)
		}
		oks, err := x.TaskFinishMany(ctx, []store.TaskFinishParams{{ID: tk.ID, Attempt: 1, State: store.TaskComplete, Now: b.at(time.Second), Held: true, Started: b.now}})
		if err == nil && !oks[0] {
			t.Error("held finish not ok")
		}
		return err
	}))
	if got := b.getTask(tk.ID); got.State != store.TaskComplete || got.Attempt != 1 || !got.StartedAt.Equal(b.now) {
		t.Errorf("held task after its finish = %+v, want complete at attempt 1, started at the hold", got)
	}
}
