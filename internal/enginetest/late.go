package enginetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// LateGrants returns an Open whose stores commit late every other start a limit's key is
// granted: the transaction holding the key's first, third, … grant stays open for hold before
// it commits, as a batch with much else in it, a slow disk or a lock held elsewhere would keep
// it; the others commit at once. A grant dates the key's next start from its transaction's
// beginning, so without a further guard the late grant's task and the next one would start
// together.
func LateGrants(open Open, hold time.Duration) Open {
	return func(tb testing.TB) store.Store {
		return &lateStore{Store: open(tb), hold: hold, grants: map[string]int{}}
	}
}

type lateStore struct {
	store.Store
	hold time.Duration

	mu     sync.Mutex
	grants map[string]int // key → grants so far
}

func (s *lateStore) InTx(ctx context.Context, fn func(tx store.Executor) error) error {
	return s.Store.InTx(ctx, func(x store.Executor) error {
		lx := &lateTx{Executor: x, s: s}
		if err := fn(lx); err != nil {
			return err
		}
		if lx.late {
			// The slow commit this store stands for: the transaction stays open meanwhile.
			t := time.NewTimer(s.hold)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

type lateTx struct {
	store.Executor
	s    *lateStore
	late bool
}

func (x *lateTx) LimitAcquire(ctx context.Context, p store.LimitAcquireParams) (store.LimitAcquireResult, error) {
	r, err := x.Executor.LimitAcquire(ctx, p)
	if err == nil && r.OK {
		x.s.mu.Lock()
		x.s.grants[p.Key]++
		x.late = x.late || x.s.grants[p.Key]%2 == 1
		x.s.mu.Unlock()
	}
	return r, err
}
