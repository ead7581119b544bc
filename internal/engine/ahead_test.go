package engine_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// TestRootsAhead checks roots added ahead on Postgres (ItemInsertRoots): once the store has
// ids reserved, a root goes in with one of them, its start fired; a replayed root among new ones,
// and a job canceled since the caller read it, fall back to the ordinary way with its outcome:
// the new root added once with its task, the canceled job's root added with none.
func TestRootsAhead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openStore(t, "postgres")
	wf := "name: ahead\nsteps:\n  a: {action: a, needs: [start]}\n"
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "a"}}, "ahead", wf, true)
	conn, err := pgx.Connect(ctx, os.Getenv("SLUICE_TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	seq := pgx.Identifier{db.(*postgres.DB).Schema(), "items"}.Sanitize()
	// drawn is the last id the items' sequence gave out.
	drawn := func() (last int64) {
		if err := conn.QueryRow(ctx, `SELECT pg_sequence_last_value(pg_get_serial_sequence($1, 'id')::regclass)`, seq).Scan(&last); err != nil {
			t.Fatal(err)
		}
		return last
	}
	tasksOf := func(jobID int64) map[int64]int {
		ts, err := db.TaskListByJob(ctx, store.TaskListParams{JobID: jobID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n := map[int64]int{}
		for _, tk := range ts {
			n[tk.ItemID]++
		}
		return n
	}
	items := func(jobID int64) []*record.Item {
		its, err := db.ItemList(ctx, store.ItemListParams{JobID: jobID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return its
	}

	// Roots in a stream, each a few milliseconds after the one before, make the store reserve ids;
	// once it has, a root goes in with an id drawn before its transaction began.
	var ahead *record.Item
	ord := 1
	poll.Until(t, 20*time.Second, "a root added with an id reserved before its transaction", func() (bool, string) {
		before, name := drawn(), fmt.Sprintf("r%d", ord)
		if err := e.AddRoots(ctx, job, []engine.Root{{Ordinal: ord, Name: name}}); err != nil {
			t.Fatal(err)
		}
		ord++
		for _, it := range items(job.ID) {
			if it.Name == name && it.ID <= before {
				ahead = it
			}
		}
		return ahead != nil, fmt.Sprintf("%d roots added", ord)
	})
	if n := tasksOf(job.ID)[ahead.ID]; n != 1 {
		t.Errorf("the root added ahead has %d tasks, want 1 (its start fired)", n)
	}

	// A replay: root 1 exists, the next is new.
	if err := e.AddRoots(ctx, job, []engine.Root{{Ordinal: 1, Name: "r1"}, {Ordinal: ord, Name: fmt.Sprintf("r%d", ord)}}); err != nil {
		t.Fatalf("AddRoots with a replayed root: %v", err)
	}
	its := items(job.ID)
	if len(its) != ord+1 {
		t.Fatalf("after the replay: %d items, want %d", len(its), ord+1)
	}
	tasks := tasksOf(job.ID)
	for _, it := range its {
		if tasks[it.ID] != 1 {
			t.Errorf("item %q has %d tasks, want 1", it.Name, tasks[it.ID])
		}
	}

	// A job canceled since the caller read it (another job: the first goes the ordinary way
	// after its replay), with the ids left in the reserve.
	job2, _, err := e.CreateJob(ctx, engine.CreateJobParams{Workflow: "ahead", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Cancel(ctx, job2.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.AddRoots(ctx, job2, []engine.Root{{Ordinal: 0, Name: "late"}}); err != nil {
		t.Fatalf("AddRoots to a job canceled since it was read: %v", err)
	}
	if its := items(job2.ID); len(its) != 1 || its[0].Name != "late" {
		t.Errorf("canceled job's items: %v, want the root added", its)
	}
	if n := len(tasksOf(job2.ID)); n != 0 {
		t.Errorf("canceled job's root got tasks of %d items, want none", n)
	}
}
