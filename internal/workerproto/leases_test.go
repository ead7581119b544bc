package workerproto

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
)

// fakeLeases hands out tasks numbered from 1, up to ready of them, and records each round's
// size; a round waits for gate when set.
type fakeLeases struct {
	mu     sync.Mutex
	rounds []int
	next   int64
	ready  int
	gate   chan struct{}
}

func (f *fakeLeases) lease(ctx context.Context, name, owner string, n int) ([]*record.Task, []*record.Item, error) {
	f.mu.Lock()
	f.rounds = append(f.rounds, n)
	gate := f.gate
	f.gate = nil
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var tasks []*record.Task
	var items []*record.Item
	for range n {
		if f.ready == 0 {
			break
		}
		f.ready--
		f.next++
		tasks = append(tasks, &record.Task{ID: f.next, ItemID: 100 + f.next})
		items = append(items, &record.Item{ID: 100 + f.next})
	}
	return tasks, items, nil
}

func (f *fakeLeases) roundsSoFar() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.rounds...)
}

func (l *leaseRounds) queued(name, owner string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting[leaseKey{name, owner}])
}

type taken struct {
	task *record.Task
	item *record.Item
	err  error
}

// TestLeaseRoundsCoalesce: polls that wait while a round is under way are leased for together
// in the next round, each gets a task of its own with its item, and polls that find fewer
// ready tasks than they are get none (and no error). Another owner's polls are leased apart.
func TestLeaseRoundsCoalesce(t *testing.T) {
	var l leaseRounds
	f := &fakeLeases{ready: 8, gate: make(chan struct{})}
	gate := f.gate
	out := make(chan taken, 10)
	take := func(owner string) {
		task, item, err := l.take(t.Context(), "Pdf", owner, f.lease)
		out <- taken{task, item, err}
	}
	go take("a") // its round waits at the gate
	poll.Until(t, 10*time.Second, "the first round", func() (bool, string) { return len(f.roundsSoFar()) == 1, "" })
	for range 9 {
		go take("a")
	}
	poll.Until(t, 10*time.Second, "nine polls queued", func() (bool, string) { return l.queued("Pdf", "a") == 9, "" })
	close(gate)
	seen := map[int64]bool{}
	none := 0
	for range 10 {
		r := <-out
		switch {
		case r.err != nil:
			t.Fatalf("take: %v", r.err)
		case r.task == nil:
			none++
		case seen[r.task.ID] || r.item == nil || r.item.ID != r.task.ItemID:
			t.Fatalf("task %+v with item %+v: a task twice, or not its item", r.task, r.item)
		default:
			seen[r.task.ID] = true
		}
	}
	if got := f.roundsSoFar(); len(got) != 2 || got[0] != 1 || got[1] != 9 {
		t.Errorf("rounds leased for %v polls, want [1 9]", got)
	}
	if len(seen) != 8 || none != 2 {
		t.Errorf("%d polls got a task and %d none, want 8 and 2 (8 ready)", len(seen), none)
	}
	// Another owner is never leased for in a's rounds.
	f.mu.Lock()
	f.ready = 1
	f.mu.Unlock()
	go take("b")
	if r := <-out; r.task == nil || r.err != nil {
		t.Errorf("b's poll: %+v", r)
	}
	if got := f.roundsSoFar(); len(got) != 3 || got[2] != 1 {
		t.Errorf("rounds %v, want b's own round of 1", got)
	}
}

// TestLeaseRoundsLeft: a poll that leaves while queued is leased for by no round; one that
// leaves during its round gets its task back with its context's error, for the caller to give
// back.
func TestLeaseRoundsLeft(t *testing.T) {
	var l leaseRounds
	f := &fakeLeases{ready: 5, gate: make(chan struct{})}
	gate := f.gate
	during, cancelDuring := context.WithCancel(t.Context())
	queued, cancelQueued := context.WithCancel(t.Context())
	out := make(chan taken, 2)
	go func() {
		task, item, err := l.take(during, "Pdf", "a", f.lease)
		out <- taken{task, item, err}
	}()
	poll.Until(t, 10*time.Second, "the first round", func() (bool, string) { return len(f.roundsSoFar()) == 1, "" })
	go func() {
		task, item, err := l.take(queued, "Pdf", "a", f.lease)
		out <- taken{task, item, err}
	}()
	poll.Until(t, 10*time.Second, "a poll queued", func() (bool, string) { return l.queued("Pdf", "a") == 1, "" })
	cancelQueued()
	if r := <-out; r.task != nil || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the poll that left while queued: %+v, want no task and its context's error", r)
	}
	cancelDuring()
	close(gate)
	if r := <-out; r.task == nil || r.task.ID != 1 || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the poll that left during its round: %+v, want task 1 and its context's error", r)
	}
	if got := f.roundsSoFar(); len(got) != 1 {
		t.Errorf("rounds %v: the poll that left while queued was leased for", got)
	}
}
