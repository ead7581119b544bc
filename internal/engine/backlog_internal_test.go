package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// countingStore answers ItemCountBacklog with a set count and counts the calls; the engine
// under test calls nothing else of it.
type countingStore struct {
	store.Store
	mu           sync.Mutex
	calls, count int
}

func (s *countingStore) ItemCountBacklog(context.Context, store.ItemCountBacklogParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.count, nil
}

// TestBacklogGateOutlivesAttempts: attempts that each make one child (a text document's PDF)
// count the backlog once per bound's worth of admissions, not once each — the gate and its
// estimate outlive them — and the bound still holds: at a count at the bound, the next
// admission waits. A gate no attempt used for gateIdle is forgotten.
func TestBacklogGateOutlivesAttempts(t *testing.T) {
	t.Parallel()
	s := &countingStore{count: 5}
	e := New(Config{Store: s, MaxBacklog: 100})
	task, it := &record.Task{JobID: 1}, &record.Item{Depth: 1}
	for range 250 {
		b := e.Backlog(task, it)
		if err := b.Admit(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		b.Settled(1)
		b.Close()
	}
	// A count at the first admission (5), then each time the estimate reaches 100: at the
	// 97th and the 192nd.
	if s.calls != 3 {
		t.Errorf("%d counts for 250 one-child attempts, want 3 (one per 95 admissions)", s.calls)
	}

	s.count = 100 // the backlog at the bound: nothing more is admitted
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	b := e.Backlog(task, it)
	for i := 0; ; i++ {
		err := b.Admit(ctx, nil)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil || i > 100 {
			t.Fatalf("admission %d at a backlog at the bound: %v", i, err)
		}
	}
	b.Close()

	e.backlog.mu.Lock()
	defer e.backlog.mu.Unlock()
	if len(e.backlog.gates) != 1 {
		t.Fatalf("%d gates, want the one kept", len(e.backlog.gates))
	}
	e.backlog.prune(time.Now().Add(gateIdle / 2))
	if len(e.backlog.gates) != 1 {
		t.Fatal("a gate idle for less than gateIdle was forgotten")
	}
	e.backlog.prune(time.Now().Add(gateIdle + time.Second))
	if len(e.backlog.gates) != 0 {
		t.Fatal("a gate idle for more than gateIdle was kept")
	}
}
