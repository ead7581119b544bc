package engine

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// DefaultMaxBacklog is the backlog bound of a [Config] that sets none: a job's unprocessed
// items below a step that creates children, past which the step waits.
const DefaultMaxBacklog = 10_000

// The backlog bound (Overview's stall). A step that creates children runs ahead of the steps
// that process them: an archive of 100,000 entries unpacks in seconds, while converting them
// takes hours, and every child made meanwhile is a row, a blob and a ready task held for
// later. So a step admits each new child through its job's gate ([Backlog.Admit]); past
// [Config.MaxBacklog] unprocessed items the step waits, outside any transaction, until the
// backlog has drained below seven eighths of the bound (not to wake for every item processed).
//
// The backlog a step waits on is its job's items not yet processed (created or written) that
// are deeper in the tree than the step's own item. Deeper only, so that waits cannot close a
// circle: a step waits for items below it, and the deepest steps that create children wait
// for leaves, which are processed without waiting. (Counted over the whole job, an archive of
// archives deadlocked: its children's unpacks each waited for a backlog made of their own
// items.) The bound so holds per level of nesting; a job of nested archives may hold the bound
// at each depth at once.
//
// The count is read from the database (one statement, which stops at the bound) only when the
// estimate reaches the bound: the estimate is the last count plus the children admitted since,
// those admitted and not yet committed counted with it. Between two counts, the children
// that other processes, and steps of the same job at other depths, admitted are not in it:
// that, and a child a step had begun before it waited, is the slack over the bound.
type backlogs struct {
	mu      sync.Mutex
	gates   map[gateKey]*gate
	waiting map[int64]int // steps of each job waiting, in this process
}

type gateKey struct {
	job   int64
	depth int
}

// gate is the admission state of the steps of one job at one depth, in this process. It
// outlives the attempts that use it by [gateIdle]: a step that makes one child (a text
// document's PDF) holds the bound for one admission, and a gate made afresh for it counted the
// backlog each time — one statement per document, a tenth of an ingest's CPU on SQLite. Kept,
// its estimate (the last count plus the children admitted since, here by any attempt) stays an
// upper bound of what this process added, and a count comes only when it reaches the bound.
type gate struct {
	users int
	idle  time.Time // when users fell to 0
	// sem is held by the admission that reads the estimate, and counts when it must.
	sem chan struct{}
	// est estimates the backlog: the last count plus the children admitted since. inflight
	// are the children admitted and not yet settled (committed, or given up), which a count
	// does not see; est is -1 until the first count. Both are guarded by sem.
	est, inflight int
}

// Backlog is a running step's hold on its job's backlog bound: [Backlog.Admit] before each
// new child, [Backlog.Settled] once children are committed, [Backlog.Close] when the attempt
// ends. Its methods are safe for concurrent use.
type Backlog struct {
	e   *Engine
	key gateKey
	g   *gate
	mu  sync.Mutex
	n   int // admitted and not settled
}

// Backlog returns the hold of a running task of item it on its job's backlog bound.
func (e *Engine) Backlog(task *record.Task, it *record.Item) *Backlog {
	key := gateKey{job: task.JobID, depth: it.Depth}
	e.backlog.mu.Lock()
	defer e.backlog.mu.Unlock()
	if e.backlog.gates == nil {
		e.backlog.gates, e.backlog.waiting = map[gateKey]*gate{}, map[int64]int{}
	}
	g := e.backlog.gates[key]
	if g == nil {
		e.backlog.prune(time.Now())
		// Unknown (-1) until the first admission counts: a gate made afresh for each attempt
		// (one fan at a time) would else admit a bound's worth of children unseen each time.
		g = &gate{sem: make(chan struct{}, 1), est: -1}
		e.backlog.gates[key] = g
	}
	g.users++
	return &Backlog{e: e, key: key, g: g}
}

// backlogPoll bounds the wait between two counts of a waiting step; the first comes sooner.
// Short enough that the backlog does not run dry meanwhile: the step goes on once an eighth of
// the bound has drained, and the rest (8,750 items by default) keeps the downstream busy.
const backlogPoll = 200 * time.Millisecond

// Admit counts one more child of the step in its job's backlog, first waiting while the backlog
// is at the bound (see [Config.MaxBacklog]). pause, when not nil, is called with true before
// it waits and with false when it goes on: the caller gives back what a waiting step must not
// hold (a worker's slot, its attempt's timeout, children not yet committed, which a count would
// never see go); an error from pause(true) is returned at once. Admit holds no transaction while it waits. It
// returns ctx's error when ctx ends first, and a store error when the backlog cannot be
// counted.
func (b *Backlog) Admit(ctx context.Context, pause func(waiting bool) error) error {
	bound := b.e.cfg.MaxBacklog
	if bound < 0 {
		return nil
	}
	ok, err := b.try(ctx, bound, bound)
	if err != nil || ok {
		return err
	}
	b.e.backlog.setWaiting(b.key.job, +1)
	defer b.e.backlog.setWaiting(b.key.job, -1)
	if pause != nil {
		if err := pause(true); err != nil {
			return err
		}
		defer pause(false) //nolint:errcheck // going on cannot fail
	}
	low := max(1, bound-bound/8)
	d := 20 * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if ok, err := b.try(ctx, bound, low); err != nil || ok {
			return err
		}
		d = min(2*d, backlogPoll)
		t.Reset(d)
	}
}

// try admits a child when the estimate is below bound, or else when a count is below under.
func (b *Backlog) try(ctx context.Context, bound, under int) (bool, error) {
	g := b.g
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-g.sem }()
	if g.est < 0 || g.est >= bound || under < bound {
		// Those in flight are taken before the count: one that commits meanwhile is counted
		// twice, never missed.
		inflight := g.inflight
		n, err := b.e.store.ItemCountBacklog(ctx, store.ItemCountBacklogParams{JobID: b.key.job, Depth: b.key.depth, Limit: bound})
		if err != nil {
			return false, err
		}
		g.est = n + inflight
		if g.est >= under {
			return false, nil
		}
	}
	g.est++
	g.inflight++
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	return true, nil
}

// Settled tells that n admitted children are committed, or will not be: they no longer count
// as in flight (a count sees the committed ones).
func (b *Backlog) Settled(n int) {
	b.mu.Lock()
	n = min(n, b.n)
	b.n -= n
	b.mu.Unlock()
	if n <= 0 {
		return
	}
	b.g.sem <- struct{}{}
	b.g.inflight -= n
	<-b.g.sem
}

// Close settles what is left and gives up the hold. Call it once, when the attempt has ended.
func (b *Backlog) Close() {
	b.mu.Lock()
	n := b.n
	b.mu.Unlock()
	b.Settled(n)
	bl := &b.e.backlog
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if b.g.users--; b.g.users == 0 {
		b.g.idle = time.Now()
	}
}

// gateIdle is how long a gate no attempt uses is kept (see [gate]).
const gateIdle = 10 * time.Second

// prune forgets the gates no attempt has used for [gateIdle]. Called with bl.mu held, as a new
// gate is made: the map holds the keys of the jobs at work in the last seconds.
func (bl *backlogs) prune(now time.Time) {
	for k, g := range bl.gates {
		if g.users == 0 && now.Sub(g.idle) > gateIdle {
			delete(bl.gates, k)
		}
	}
}

func (bl *backlogs) setWaiting(job int64, d int) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if bl.waiting[job] += d; bl.waiting[job] <= 0 {
		delete(bl.waiting, job)
	}
}

// waitingForDownstream reports whether a step of the job waits on its backlog: one of this
// process, or as its rows say, the job's children not yet processed being at the bound.
func (e *Engine) waitingForDownstream(ctx context.Context, jobID int64) (bool, error) {
	e.backlog.mu.Lock()
	n := e.backlog.waiting[jobID]
	e.backlog.mu.Unlock()
	bound := e.cfg.MaxBacklog
	if n > 0 || bound < 0 {
		return n > 0, nil
	}
	c, err := e.store.ItemCountBacklog(ctx, store.ItemCountBacklogParams{JobID: jobID, Depth: 0, Limit: bound})
	return c >= bound, err
}
