package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
)

// TestJobIngestLockShared checks that the job's ingest lock is shared between the transactions
// that ingest its roots and takes nothing on the job's row: while one holds it, another takes it
// too and adds to the job's total (as a root's insert does) and commits. On the job's row lock
// (as before) that second transaction waited for the first's commit.
func TestJobIngestLockShared(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Metadata: []byte(`{}`), Options: []byte(`{}`), Now: time.Now(), Open: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.InTx(ctx, func(x store.Executor) error {
		got, err := x.JobIngestLock(ctx, j.ID)
		if err != nil {
			return err
		}
		if got.ID != j.ID || got.Sealed {
			return fmt.Errorf("JobIngestLock read %+v, want job %d unsealed", got, j.ID)
		}
		done := make(chan error, 1)
		go func() {
			done <- db.InTx(ctx, func(x store.Executor) error {
				if _, err := x.JobIngestLock(ctx, j.ID); err != nil {
					return err
				}
				return x.JobAddTotal(ctx, j.ID, 5)
			})
		}()
		var other error
		poll.Until(t, 20*time.Second, "a second ingesting transaction to commit beside the first", func() (bool, string) {
			select {
			case other = <-done:
				return true, ""
			default:
				return false, "it waits"
			}
		})
		return other
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.JobGet(ctx, j.ID)
	if err != nil || got.TotalBytes != 5 {
		t.Fatalf("job after both: %+v, %v; want total 5", got, err)
	}
}
