package worker

import (
	"context"
	"slices"
	"sync"
)

// slots is the worker's scheduler state: how many tasks run per queue (against each queue's
// limit), the brief batches running, which queues are idle, and how to cancel each running task.
// It is safe for concurrent use; its lock is held only for bookkeeping, never across I/O.
//
// Its invariants:
//   - A queue is idle when its last lease found fewer ready tasks than it asked for: leases and
//     brief batches skip it (a statement each, a round trip each on Postgres) until a wake names it, any
//     wake does, or the poll interval passes.
//   - A brief queue is unknown when it may have ready tasks that nobody announced: at the start
//     (unless a wake named it before), and when a wake of every queue (not naming it) came while
//     it was idle or while its brief batch ran. Brief batches skip it until one statement over all the
//     unknown queues (Worker.check, store.TaskReadyQueues) finds ready tasks in it; one it finds
//     none in becomes idle. A brief batch costs a transaction and a connection, and on a new
//     connection its first pick took 11–40 ms: the start of a burndown gave two of its three
//     batch slots to the other, empty, brief queues. Leases do not wait for the check (one
//     statement leases every queue).
//   - Wakes are counted (all and per queue), so a lease that ran while a queue was woken does not
//     mark that queue idle (see [slots.leased]), nor does a brief batch unless another brief batch
//     of the queue started after the wake (see [slots.endBrief]).
//   - Once stopping, nothing more is leased: wants and startBrief refuse, and tasks leased
//     meanwhile are given back.
type slots struct {
	mu       sync.Mutex
	stopping bool
	inflight map[string]int
	running  map[int64]context.CancelFunc
	// missed are the tasks a cancel named while they had no cancel func: leased as their job
	// was canceled (the cancel lists the running tasks once the lease committed), their run not
	// yet begun. Some are other processes' tasks, or ended already: bounded by clearing it.
	missed     map[int64]struct{}
	idle       map[string]bool
	unknown    map[string]bool // brief queues to check before a brief batch
	brief      map[string]bool // the brief queues (see [slots.serve])
	checking   bool            // a check runs
	batches    int             // brief batches running (see Worker.startBriefBatches)
	maxBatches int             // how many may run at once: briefBatches, or 1 with one writer (see Worker.runBrief)
	// batchMark is, per queue, the wake counts when its latest brief batch started.
	batchMark map[string]wakeMark
	wakeAll   uint64
	wakeQueue map[string]uint64
}

func newSlots(maxBatches int) *slots {
	return &slots{maxBatches: maxBatches, inflight: map[string]int{}, running: map[int64]context.CancelFunc{}, missed: map[int64]struct{}{}, idle: map[string]bool{}, unknown: map[string]bool{}, brief: map[string]bool{}, wakeQueue: map[string]uint64{},
		batchMark: map[string]wakeMark{}}
}

// wakeMark is the wake counts when a lease began, for the queues it asked for.
type wakeMark struct {
	all    uint64
	queues []uint64
}

// want is a queue and how many of its tasks a lease asks for.
type want struct {
	q    queueInfo
	free int
}

// wakeAny notes that tasks may be ready in any queue: the idle brief ones become unknown (to
// check before a brief batch; see [slots.checked]).
func (s *slots) wakeAny() {
	s.mu.Lock()
	s.wakeAll++
	for q := range s.idle {
		if s.brief[q] {
			s.unknown[q] = true
		}
	}
	clear(s.idle)
	s.mu.Unlock()
}

// wakeQueues notes that tasks became ready in these queues.
func (s *slots) wakeQueues(queues []string) {
	s.mu.Lock()
	for _, q := range queues {
		s.wakeQueue[q]++
		delete(s.idle, q)
		delete(s.unknown, q)
	}
	s.mu.Unlock()
}

// serve notes which queues are brief (the worker serves queues, and learns of new ones, as
// workflows are applied). With begin, at the worker's start, it also marks unknown the brief
// queues no wake named yet: tasks made ready before the start may wait in any of them, but a
// brief batch of one that has none would take a slot (see [slots.checked]).
func (s *slots) serve(queues []queueInfo, begin bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.brief)
	for _, q := range queues {
		if !q.brief {
			continue
		}
		s.brief[q.name] = true
		if begin && s.wakeQueue[q.name] == 0 {
			s.unknown[q.name] = true
		}
	}
}

// toCheck returns the unknown queues to check, sorted, with the wake counts as they are now, and
// notes that a check runs; nothing when there is none, or a check runs already, or the worker
// is stopping.
func (s *slots) toCheck() ([]string, wakeMark) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.checking || len(s.unknown) == 0 {
		return nil, wakeMark{}
	}
	s.checking = true
	names := make([]string, 0, len(s.unknown))
	for q := range s.unknown {
		names = append(names, q)
	}
	slices.Sort(names)
	m := wakeMark{all: s.wakeAll, queues: make([]uint64, len(names))}
	for i, q := range names {
		m.queues[i] = s.wakeQueue[q]
	}
	return names, m
}

// checked records what a check of names that began at m found: the queues with ready tasks are
// no longer unknown, and those without become idle unless a wake came since m (then a wake of
// every queue leaves them unknown, for the next check, and one naming them already made them
// known). A check that failed (err) leaves every queue to pick.
func (s *slots) checked(names []string, m wakeMark, ready []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checking = false
	for i, q := range names {
		switch {
		case !s.unknown[q]:
		case err != nil || slices.Contains(ready, q):
			delete(s.unknown, q)
		case s.wakeAll == m.all && s.wakeQueue[q] == m.queues[i]:
			delete(s.unknown, q)
			s.idle[q] = true
		}
	}
}

// polled forgets which queues were idle: tasks may have become ready elsewhere (another process,
// a backoff ending).
func (s *slots) polled() {
	s.mu.Lock()
	clear(s.idle)
	clear(s.unknown)
	s.mu.Unlock()
}

// wants returns the queues (not brief: see Worker.startBriefBatches) to lease from and how many tasks each,
// with the wake counts as they are now. A busy queue waits until a quarter of its slots are
// free: its running tasks keep the machine busy meanwhile, and one lease (one statement, one
// turn of the writer) then starts several tasks instead of one per finished task.
func (s *slots) wants(queues []queueInfo) ([]want, wakeMark) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, wakeMark{}
	}
	var wants []want
	for _, q := range queues {
		if q.brief {
			continue
		}
		running := s.inflight[q.name]
		if free := q.limit - running; free > 0 && (running == 0 || free*4 >= q.limit) {
			if !s.idle[q.name] {
				wants = append(wants, want{q, free})
			}
		}
	}
	m := wakeMark{all: s.wakeAll, queues: make([]uint64, len(wants))}
	for i, wt := range wants {
		m.queues[i] = s.wakeQueue[wt.q.name]
	}
	return wants, m
}

// leased records what a lease that began at m got (counts by queue), marking idle the queues
// that had no more unless they were woken meanwhile, and takes a slot for each task. It reports
// false, taking none, when the worker is stopping: the tasks must be given back.
func (s *slots) leased(wants []want, m wakeMark, counts map[string]int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wakeAll == m.all {
		for i, wt := range wants {
			switch {
			case counts[wt.q.name] == wt.free:
				delete(s.idle, wt.q.name) // there may be more
			case s.wakeQueue[wt.q.name] == m.queues[i]:
				s.idle[wt.q.name] = true
			}
		}
	}
	if s.stopping {
		return false
	}
	for q, n := range counts {
		s.inflight[q] += n
	}
	return true
}

// startBrief takes a brief-batch slot for the queue. It reports stop when no more batches may
// start now (the worker is stopping, or maxBatches run), and ok when this one may.
func (s *slots) startBrief(queue string) (ok, stop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.batches >= s.maxBatches {
		return false, true
	}
	if s.idle[queue] || s.unknown[queue] {
		return false, false
	}
	s.batches++
	s.batchMark[queue] = wakeMark{all: s.wakeAll, queues: []uint64{s.wakeQueue[queue]}}
	return true, false
}

// endBrief gives back a brief batch's slot. A batch that found fewer tasks than it asked for
// (more false) marks its queue idle unless it was woken since the latest brief batch of the
// queue started: a wake before that batch's start is that batch's to answer, since its pick
// began after the commit that sent the wake and sees what it made ready. (Measured against
// the mark of the batch that ends, a task inserted while one batch ran started a second batch,
// which ran it, and then a third that found nothing: one empty pick in two at 200 inserts/s.)
// A batch that filled its limit (more) leaves the queue not idle. Woken since by a wake of every
// queue but not by name, the queue is unknown: whether it has tasks is one check's question
// (the wake at the start of a node's listening, say, or another process's, is not about it).
func (s *slots) endBrief(queue string, more bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches--
	if more {
		delete(s.idle, queue)
		return
	}
	m := s.batchMark[queue]
	switch {
	case s.wakeQueue[queue] != m.queues[0]:
	case s.wakeAll == m.all:
		s.idle[queue] = true
	default:
		s.unknown[queue] = true
	}
}

// briefRunning reports whether a brief batch is running.
func (s *slots) briefRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches > 0
}

// run records how to cancel a running task. It reports whether a cancel named the task before
// (see missed): then the caller checks whether its job still runs.
func (s *slots) run(id int64, cancel context.CancelFunc) (missed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[id] = cancel
	if _, missed = s.missed[id]; missed {
		delete(s.missed, id)
	}
	return missed
}

// ran forgets a task of a brief batch, which takes no slot of its own.
func (s *slots) ran(id int64) {
	s.mu.Lock()
	delete(s.running, id)
	s.mu.Unlock()
}

// done frees the slot of a task that ended.
func (s *slots) done(queue string, id int64) {
	s.mu.Lock()
	if !s.stopping {
		s.inflight[queue]--
	}
	delete(s.running, id)
	s.mu.Unlock()
}

// wait gives back the slot of a running task of queue while it waits for its job's backlog to
// drain (engine.Backlog), or takes it again (waiting false) when the task goes on. A waiting task
// holds no slot, so that the tasks that drain the backlog run though its queue (or the one slot
// of a worker) is full of waiting ones; one that goes on may take its queue past its limit for
// a while, and the dispatcher leases none of the queue until it is back under.
func (s *slots) wait(queue string, waiting bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	if waiting {
		s.inflight[queue]--
	} else {
		s.inflight[queue]++
	}
}

// cancel cancels the running tasks among ids.
func (s *slots) cancel(ids []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if c := s.running[id]; c != nil {
			c()
			continue
		}
		if len(s.missed) >= maxMissed {
			clear(s.missed)
		}
		s.missed[id] = struct{}{}
	}
}

// maxMissed bounds slots.missed: far more than the tasks a worker leases at once.
const maxMissed = 10000

// cancelAll cancels every running task.
func (s *slots) cancelAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.running {
		c()
	}
}

// stop stops leasing for good.
func (s *slots) stop() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
}
