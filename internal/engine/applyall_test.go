package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// countStore counts the item reads and inserts of its transactions, one by one and many at once.
type countStore struct {
	store.Store
	get, getMany, insert, insertMany atomic.Int32
}

func (s *countStore) InTx(ctx context.Context, fn func(x store.Executor) error) error {
	return s.Store.InTx(ctx, func(x store.Executor) error { return fn(countExec{x, s}) })
}

func (s *countStore) reset() {
	s.get.Store(0)
	s.getMany.Store(0)
	s.insert.Store(0)
	s.insertMany.Store(0)
}

type countExec struct {
	store.Executor
	s *countStore
}

func (x countExec) ItemGet(ctx context.Context, id int64) (*record.Item, error) {
	x.s.get.Add(1)
	return x.Executor.ItemGet(ctx, id)
}

func (x countExec) ItemGetMany(ctx context.Context, ids []int64) ([]*record.Item, error) {
	x.s.getMany.Add(1)
	return x.Executor.ItemGetMany(ctx, ids)
}

func (x countExec) ItemInsert(ctx context.Context, p store.ItemInsertParams) (*record.Item, bool, error) {
	x.s.insert.Add(1)
	return x.Executor.ItemInsert(ctx, p)
}

func (x countExec) ItemInsertMany(ctx context.Context, ps []store.ItemInsertParams) ([]*record.Item, error) {
	x.s.insertMany.Add(1)
	return x.Executor.ItemInsertMany(ctx, ps)
}

// TestApplyAllChildren checks Tx.ApplyAll on both drivers, as the worker's committer uses it for
// the results it commits together: the children of results with different parents are recorded
// with one read of the parents and one insert, each counted on its own parent; results that
// share a parent are applied one by one, as Apply does, and every child is recorded.
func TestApplyAllChildren(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := &countStore{Store: openStore(t, driver)}
			e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "b"}}, "many",
				"name: many\nsteps:\n  b: {action: b, needs: [start]}\n  c: {action: b, needs: [start]}\n", true)
			if err := e.AddRoots(ctx, job, []engine.Root{{Ordinal: 1, Name: "r1"}, {Ordinal: 2, Name: "r2"}}); err != nil {
				t.Fatal(err)
			}
			var leased []*record.Task
			err := db.InTx(ctx, func(x store.Executor) error {
				now := e.Now()
				var err error
				leased, err = x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"b", "c"}, Max: []int{10, 10}, Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute)})
				return err
			})
			if err != nil || len(leased) != 6 {
				t.Fatalf("leased %d tasks, %v; want 6 (steps b and c of 3 roots)", len(leased), err)
			}
			result := func(tk *record.Task) *engine.Result {
				r := &engine.Result{Task: tk, Owner: "w", Started: tk.StartedAt}
				r.Children = []*engine.NewChild{engine.ChildOf(tk, 0, engine.Child{Name: fmt.Sprintf("%s of %d", tk.Step, tk.ItemID)}, 0, 1)}
				return r
			}
			var bs, cs []*engine.Result
			for _, tk := range leased {
				if tk.Step == "b" {
					bs = append(bs, result(tk))
				} else {
					cs = append(cs, result(tk))
				}
			}
			db.reset()
			if err := e.Run(ctx, func(t *engine.Tx) error { return t.ApplyAll(bs) }); err != nil {
				t.Fatal(err)
			}
			if g, gm, i, im := db.get.Load(), db.getMany.Load(), db.insert.Load(), db.insertMany.Load(); g != 0 || gm != 1 || i != 0 || im != 1 {
				t.Errorf("3 results with a child each on 3 parents: %d item reads, %d reads of many, %d inserts, %d inserts of many; want 0, 1, 0, 1", g, gm, i, im)
			}
			// c's result on the root of b's first, applied again with it (a replay: its child
			// exists), then c's others.
			var same, rest []*engine.Result
			for _, r := range cs {
				if r.Task.ItemID == bs[0].Task.ItemID {
					same = append(same, r, bs[0])
				} else {
					rest = append(rest, r)
				}
			}
			if len(same) != 2 || len(rest) != 2 {
				t.Fatalf("c's results: %d on b's first root, %d others; want 1 and 2", len(same)/2, len(rest))
			}
			for _, rs := range [][]*engine.Result{same, rest} {
				if err := e.Run(ctx, func(t *engine.Tx) error { return t.ApplyAll(rs) }); err != nil {
					t.Fatal(err)
				}
			}
			for _, tk := range leased {
				kids, err := db.ItemListChildren(ctx, tk.ItemID, tk.Step)
				if err != nil || len(kids) != 1 || kids[0].Name != fmt.Sprintf("%s of %d", tk.Step, tk.ItemID) {
					t.Errorf("children of item %d at step %s = %v, %v; want its one child", tk.ItemID, tk.Step, kids, err)
				}
				it, err := db.ItemGet(ctx, tk.ItemID)
				if err != nil || it.NChildren != 2 {
					t.Errorf("item %d counts %d children, %v; want 2 (one of b, one of c)", tk.ItemID, it.NChildren, err)
				}
			}
		})
	}
}
