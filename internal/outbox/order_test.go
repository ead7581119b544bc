package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/outbox"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// TestLateCommitNotOvertaken holds a PostgreSQL transaction open after it wrote a message (so
// it has the lower id) while a second transaction writes one of the same subject and commits:
// the relay must not read the second while the first may still commit, and once the first
// has, it reads the first before the second. Without it the second would be sent first and the
// order per subject would depend on when the relay looked.
func TestLateCommitNotOvertaken(t *testing.T) {
	t.Parallel()
	k, o := setup(t, drivertestPostgres, outbox.Config{}) // no relay: the test reads as it would
	ctx := t.Context()
	pub := func(n int) []engine.Publication {
		return []engine.Publication{{Rule: &workflow.PublishRule{Sink: "rec", Subject: "order"}, Workflow: "w",
			JobID: 1, ItemID: int64(n), Event: true, Outcome: fmt.Sprint("e", n)}}
	}
	id := func(n int) string { return fmt.Sprintf("%s/j1/i%d/@e%d/r0", o.Installation(), n, n) }

	written, release, first := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		first <- k.Store.InTx(context.Background(), func(tx store.Executor) error {
			if err := o.Publish(ctx, tx.DomainSQL(), pub(1)); err != nil {
				return err
			}
			close(written)
			<-release // the delayed transaction
			return nil
		})
	}()
	select {
	case <-written:
	case err := <-first:
		t.Fatal(err)
	}
	if err := k.Store.InTx(ctx, func(tx store.Executor) error { return o.Publish(ctx, tx.DomainSQL(), pub(2)) }); err != nil {
		close(release)
		t.Fatal(err)
	}
	// 2 committed, but 1 may still commit before it.
	if got, err := outbox.PendingIDs(ctx, o, "rec"); err != nil || len(got) != 0 {
		close(release)
		t.Fatalf("the relay would read %q (%v) while an earlier message's transaction is open, want nothing", got, err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Another transaction open anywhere in the cluster (other tests) holds the xmin back a
	// moment: wait for the two, and check their order.
	var got []string
	poll.Until(t, 30*time.Second, "both messages readable", func() (bool, string) {
		var err error
		if got, err = outbox.PendingIDs(ctx, o, "rec"); err != nil {
			t.Fatal(err)
		}
		return len(got) == 2, fmt.Sprint(got)
	})
	if want := []string{id(1), id(2)}; !slices.Equal(got, want) {
		t.Fatalf("the relay would read %q, want %q", got, want)
	}
}
