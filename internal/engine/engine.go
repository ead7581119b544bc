// Package engine is Sluice's scheduler: it turns events into ready tasks (the AND-join of a step's
// needs), applies finished tasks' effects, fans in with children.done, settles items through
// written → processed → ingested bottom-up, and ends jobs — all inside store transactions, so
// everything it knows is derived from the database and survives a crash at any instant (DESIGN §3–4).
//
// The engine runs no action itself except inline ones ([action.Spec.Inline]: quick steps that read
// only their item, run inside the transaction that makes them ready); package worker leases the
// other tasks, runs them and hands their results to [Engine.Apply] in batches.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/queue"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// ErrNondeterministic is returned when a replayed task creates a child that differs from the one
// recorded at the same ordinal (DESIGN §4.2).
var ErrNondeterministic = errors.New("nondeterministic action")

// Config configures an [Engine].
type Config struct {
	Store   store.Store
	Catalog *action.Catalog
	Logger  *slog.Logger
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// OnReady is called (without blocking) after a transaction made tasks ready, to wake workers,
	// with the queues of those tasks; nil means any queue may have ready tasks.
	OnReady func(queues []string)
	// OnCancel is called with the ids of running tasks whose job was canceled or failed.
	OnCancel func(taskIDs []int64)
	// OnJobEnd is called after a job reached a final state.
	OnJobEnd func(jobID int64, state string)
	// Remote lists actions whose tasks go to the queue "remote:<name>" for remote workers. Keys
	// match action names case-insensitively and are used as written ("Pdf" → "remote:Pdf").
	Remote map[string]bool
	// MaxItemDepth bounds how deep a job's item tree may grow (roots are depth 0). Defaults to
	// [DefaultMaxItemDepth].
	MaxItemDepth int
	// MaxJobItems bounds how many children a job may make in one process. Defaults to
	// [DefaultMaxJobItems].
	MaxJobItems int64
}

// Engine applies workflow semantics to the store. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	store store.Store
	log   *slog.Logger
	mu    sync.RWMutex
	defs  map[defKey]*workflow.Definition
	plans map[*workflow.Definition]*plan
	// remote maps a lowercased action name to the name remote workers poll for ("pdf" → "Pdf").
	remote map[string]string
	// domains are the registered domains by name (see RegisterDomain), guarded by mu.
	domains map[string]Domain
	counts  itemCounts
	live    liveProgress
	// publisher records publications (see SetPublisher), guarded by mu.
	publisher Publisher
}

type defKey struct {
	name    string
	version int
}

// New returns an engine.
func New(cfg Config) *Engine {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxItemDepth <= 0 {
		cfg.MaxItemDepth = DefaultMaxItemDepth
	}
	if cfg.MaxJobItems <= 0 {
		cfg.MaxJobItems = DefaultMaxJobItems
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnReady == nil {
		cfg.OnReady = func([]string) {}
	}
	if cfg.OnCancel == nil {
		cfg.OnCancel = func([]int64) {}
	}
	if cfg.OnJobEnd == nil {
		cfg.OnJobEnd = func(int64, string) {}
	}
	if cfg.Catalog == nil {
		cfg.Catalog = &action.Catalog{}
	}
	remote := map[string]string{}
	for name, on := range cfg.Remote {
		if on {
			remote[strings.ToLower(name)] = name
		}
	}
	return &Engine{cfg: cfg, store: cfg.Store, log: cfg.Logger, defs: map[defKey]*workflow.Definition{}, plans: map[*workflow.Definition]*plan{}, remote: remote}
}

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.store }

// Catalog returns the engine's action catalog.
func (e *Engine) Catalog() *action.Catalog { return e.cfg.Catalog }

// Now returns the engine's clock time in UTC.
func (e *Engine) Now() time.Time { return e.cfg.Now().UTC() }

// ApplyWorkflow validates and stores a workflow definition, returning the stored version (an existing
// one when the definition is unchanged) and validation warnings.
func (e *Engine) ApplyWorkflow(ctx context.Context, src []byte, filename string) (*store.Workflow, []workflow.Diagnostic, error) {
	def, err := workflow.Parse(src, filename)
	if err != nil {
		return nil, nil, err
	}
	warnings, err := workflow.Validate(def, e.cfg.Catalog.Spec, e.cfg.Catalog.Names()...)
	if err != nil {
		return nil, warnings, err
	}
	canon, err := workflow.Marshal(def)
	if err != nil {
		return nil, warnings, err
	}
	wf, err := e.store.WorkflowInsert(ctx, store.WorkflowInsertParams{
		Name: def.Name, Digest: workflow.Digest(def), Definition: canon, Source: src, Now: e.Now(),
	})
	return wf, warnings, err
}

// workflowNotFoundError says how to fix a lookup of a workflow never applied, and wraps the
// store's [store.ErrNotFound] so callers (the API's 404) match it with errors.Is.
type workflowNotFoundError struct {
	name string
	err  error
}

func (e *workflowNotFoundError) Error() string {
	return fmt.Sprintf("workflow %q not found: apply it first with `sluice workflow apply`", e.name)
}

func (e *workflowNotFoundError) Unwrap() error { return e.err }

// Definition returns the parsed definition of a stored workflow version (0: the latest). For
// a workflow or version never applied, the error wraps [store.ErrNotFound].
func (e *Engine) Definition(ctx context.Context, name string, version int) (*workflow.Definition, int, error) {
	if version != 0 {
		e.mu.RLock()
		d := e.defs[defKey{name, version}]
		e.mu.RUnlock()
		if d != nil {
			return d, version, nil
		}
	}
	wf, err := e.store.WorkflowGet(ctx, name, version)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, 0, &workflowNotFoundError{name: name, err: err}
		}
		return nil, 0, err
	}
	d, err := workflow.Parse(wf.Definition, fmt.Sprintf("%s v%d", name, wf.Version))
	if err != nil {
		return nil, 0, fmt.Errorf("decode workflow %q v%d: %w", name, wf.Version, err)
	}
	e.mu.Lock()
	e.defs[defKey{name, wf.Version}] = d
	e.mu.Unlock()
	return d, wf.Version, nil
}

// Queue returns the queue a step's tasks go to. A step with its own concurrency limit gets its own
// queue so the limit applies to it alone.
func (e *Engine) Queue(def *workflow.Definition, s *workflow.Step) string {
	if name, ok := e.remote[strings.ToLower(s.Action)]; ok {
		return queue.Remote(name).String()
	}
	if s.Action == "remote" {
		if n, ok := s.With["name"].(string); ok {
			return queue.Remote(n).String()
		}
	}
	if s.Concurrency > 0 || s.Claim != nil || s.Limit != nil {
		// A claim or a limit is checked by the worker before the action runs: never in a
		// held batch or inline (see worker.queues).
		return queue.Step(s.Action, def.Name, s.Name).String()
	}
	return queue.Action(s.Action).String()
}

// weight returns the step's progress weight. A task colors weight/N of its item's share, N being
// the workflow's number of steps, so an item that runs several steps is not shown done after
// the first; whatever is left is colored when the item is ingested.
func (e *Engine) weight(s *workflow.Step) float64 {
	if s.ProgressWeight != nil {
		return *s.ProgressWeight
	}
	if spec, ok := e.cfg.Catalog.Spec(s.Action); ok && spec.ProgressWeight != nil {
		return *spec.ProgressWeight
	}
	return 1
}

// tx is the state of one engine transaction: caches and the items to settle at the end.
type tx struct {
	e      *Engine
	ctx    context.Context
	x      store.Executor
	now    time.Time
	jobs   map[int64]*store.Job
	events map[int64]map[string]bool
	items  map[int64]*store.Item // locked in this transaction, kept in step with its writes
	// stale holds the cached items whose row got writes the cache does not mirror (merged
	// metadata, content type, thumbnail, a reopened error): read again before an inline run.
	stale   map[int64]bool
	colored map[int64]bool          // items whose colored progress changed in memory
	busy    map[int64]bool          // items that got a ready task in this transaction: not settling
	dirty   map[int64]int           // item id → depth
	tasks   map[int64][]*store.Task // tasks of the level being settled, read in one statement
	moves   map[int64][2]string     // item → (state in the database, new state), written by flushMoves
	touched map[int64]bool
	// closing holds the jobs this transaction may end: it sealed them or ingested one of their
	// roots (the last item of a job to be ingested is a root).
	closing map[int64]bool
	ready   bool
	// readyQueues are the queues of the tasks made ready, unless readyAll says they are not known.
	readyQueues map[string]bool
	readyAll    bool
	cancel      []int64
	ended       map[int64]string
	results     []*Result // queued by Tx.Apply, applied together in finish
	// pubs are the publications queued for the publisher; published says some were recorded.
	pubs      []Publication
	published bool
	// fresh holds the items created in this transaction, each with the tasks it got here (see
	// pending.go); freshStale says those task states may have changed since (a job's tasks were
	// canceled) and must be read.
	fresh        map[int64][]*store.Task
	kids         map[int64][]*store.Item // parent → its children created in this transaction
	freshStale   bool
	pendTasks    []store.TaskInsertParams
	pendEvents   []store.EventInsertParams
	pendChildren map[int64]childCount
}

func (e *Engine) newTx(ctx context.Context, x store.Executor) *tx {
	return &tx{e: e, ctx: ctx, x: x, now: e.Now(), jobs: map[int64]*store.Job{}, events: map[int64]map[string]bool{}, readyQueues: map[string]bool{}, items: map[int64]*store.Item{}, stale: map[int64]bool{}, colored: map[int64]bool{}, busy: map[int64]bool{},
		dirty: map[int64]int{}, tasks: map[int64][]*store.Task{}, moves: map[int64][2]string{}, touched: map[int64]bool{}, closing: map[int64]bool{}, ended: map[int64]string{},
		fresh: map[int64][]*store.Task{}, kids: map[int64][]*store.Item{}, pendChildren: map[int64]childCount{}}
}

// Run runs fn in one store transaction with engine state, settles what fn touched, and fires
// the in-memory notifications after commit. fn may be called again if the transaction is retried.
func (e *Engine) Run(ctx context.Context, fn func(t *Tx) error) error {
	var t *tx
	err := e.store.InTx(ctx, func(x store.Executor) error {
		t = e.newTx(ctx, x)
		if err := fn(&Tx{t: t}); err != nil {
			return err
		}
		if err := t.finish(); err != nil {
			return err
		}
		if err := t.flushPublications(); err != nil {
			return err
		}
		return t.flushPending()
	})
	if err != nil {
		return err
	}
	t.notify()
	return nil
}

// Tx is the engine's view of one transaction, handed to [Engine.Run] callbacks.
type Tx struct{ t *tx }

// Executor returns the store transaction.
func (t *Tx) Executor() store.Executor { return t.t.x }

// Now is the transaction's time.
func (t *Tx) Now() time.Time { return t.t.now }

// LockItems locks the items (in id order, as results lock them) and returns them. They are the
// transaction's own copies, which applying results updates: read them before [Tx.Apply].
func (t *Tx) LockItems(ids []int64) ([]*store.Item, error) {
	if err := t.t.lockItems(ids); err != nil {
		return nil, err
	}
	out := make([]*store.Item, 0, len(ids))
	for _, id := range ids {
		if it := t.t.items[id]; it != nil {
			out = append(out, it)
		}
	}
	return out, nil
}

func (t *tx) notify() {
	if t.ready {
		var qs []string
		if !t.readyAll {
			qs = make([]string, 0, len(t.readyQueues))
			for q := range t.readyQueues {
				qs = append(qs, q)
			}
		}
		t.e.cfg.OnReady(qs)
	}
	if len(t.cancel) > 0 {
		t.e.cfg.OnCancel(t.cancel)
	}
	for id, st := range t.ended {
		t.e.cfg.OnJobEnd(id, st)
	}
	if t.published {
		t.e.getPublisher().Committed()
	}
}

func (t *tx) job(id int64) (*store.Job, error) {
	if j, ok := t.jobs[id]; ok {
		return j, nil
	}
	j, err := t.x.JobGet(t.ctx, id)
	if err != nil {
		return nil, err
	}
	if j.State == store.JobFailed || j.State == store.JobComplete {
		// A job in a state a retry reopens: decide on it under its lock. Otherwise this
		// transaction could settle an item as a stopped job's (without waiting for its
		// collector) while a retry, in another process, reopens the job and its items, and
		// commit after it: the job would complete without the collector.
		if j, err = t.x.JobLock(t.ctx, id); err != nil {
			return nil, err
		}
	}
	t.jobs[id] = j
	return j, nil
}

func (t *tx) def(jobID int64) (*workflow.Definition, *store.Job, error) {
	j, err := t.job(jobID)
	if err != nil {
		return nil, nil, err
	}
	d, _, err := t.e.Definition(t.ctx, j.WorkflowName, j.WorkflowVersion)
	return d, j, err
}

// lockItems locks and caches the items not yet locked in this transaction, in one call.
func (t *tx) lockItems(ids []int64) error {
	var want []int64
	for _, id := range ids {
		if _, ok := t.items[id]; !ok {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	slices.Sort(want)
	want = slices.Compact(want)
	items, err := t.x.ItemLockMany(t.ctx, want)
	if err != nil {
		return err
	}
	for _, it := range items {
		t.items[it.ID] = it
	}
	return nil
}

// item returns the item, locking it on first use in this transaction.
func (t *tx) item(id int64) (*store.Item, error) {
	if it, ok := t.items[id]; ok {
		return it, nil
	}
	it, err := t.x.ItemLock(t.ctx, id)
	if err != nil {
		return nil, err
	}
	t.items[id] = it
	return it, nil
}

func (t *tx) itemEvents(itemID int64) (map[string]bool, error) {
	if ev, ok := t.events[itemID]; ok {
		return ev, nil
	}
	names, err := t.x.EventListByItem(t.ctx, itemID)
	if err != nil {
		return nil, err
	}
	ev := make(map[string]bool, len(names))
	for _, n := range names {
		ev[n] = true
	}
	t.events[itemID] = ev
	return ev, nil
}

func (t *tx) markDirty(it *store.Item) {
	t.dirty[it.ID] = it.Depth
	t.touched[it.JobID] = true
}

// fire records event on the item and makes ready every step whose needs are now all met.
func (t *tx) fire(it *store.Item, event string) error {
	inserted, err := t.addEvent(it, event)
	if err != nil {
		return err
	}
	if !inserted {
		if event == workflow.EventFail {
			// fail ends a running job even where it fired before: after a retry
			// ([Engine.Retry]), the same failure must fail the job again.
			_, job, err := t.def(it.JobID)
			if err != nil {
				return err
			}
			return t.endJob(job, store.JobFailed, fmt.Sprintf("fail fired on %q", it.Name))
		}
		return nil // events are a set
	}
	t.markDirty(it)
	def, job, err := t.def(it.JobID)
	if err != nil {
		return err
	}
	if err := t.publishEvent(def, job, it, event); err != nil {
		return err
	}
	if event == workflow.EventFail {
		return t.endJob(job, store.JobFailed, fmt.Sprintf("fail fired on %q", it.Name))
	}
	if event == workflow.EventStart {
		// Before anything runs, and whatever the job's state: a retry must find the skips.
		if err := t.decideWhen(def, it); err != nil {
			return err
		}
	}
	if job.State != store.JobRunning {
		return nil
	}
	if event == workflow.EventStart {
		// Steps that need only external events wait from the item's creation.
		for _, s := range t.e.plan(def).waitsFromStart {
			if err := t.startWait(def, it, s); err != nil {
				return err
			}
		}
	}
	for _, s := range def.Consumers(event) {
		if len(s.Needs) > 1 {
			// Only a step with other needs reads the item's events (this one among them).
			ev, err := t.itemEvents(it.ID)
			if err != nil {
				return err
			}
			met := true
			for _, n := range s.Needs {
				if !ev[n] {
					met = false
					break
				}
			}
			if !met {
				if s.Deadline > 0 {
					if err := t.startWait(def, it, s); err != nil {
						return err
					}
				}
				continue
			}
		}
		if s.When != "" || s.Deadline > 0 {
			ok, err := t.applies(it, s.Name)
			if err != nil {
				return err
			}
			if !ok {
				continue // skipped (or its wait expired): it never runs, and never fires its events
			}
		}
		if s.Deadline > 0 {
			if err := t.x.WaitDelete(t.ctx, it.ID, s.Name); err != nil {
				return err
			}
		}
		p := store.TaskInsertParams{
			JobID: it.JobID, ItemID: it.ID, Step: s.Name, Action: s.Action, Queue: t.e.Queue(def, s),
			MaxAttempts: s.MaxAttempts(), SortKey: it.SortKey, ProgressWeight: t.e.weight(s) / float64(len(def.Steps)), Now: t.now,
		}
		if act, spec, ok := t.e.inlineAction(s.Action); ok && s.Claim == nil && s.Limit == nil {
			delete(t.tasks, it.ID)
			ran, err := t.runInline(it, s, act, spec, p)
			if err != nil {
				return err
			}
			if ran {
				continue
			}
		}
		t.addTask(p)
		delete(t.tasks, it.ID)
		t.ready = true
		t.readyQueues[p.Queue] = true
		// A task made ready here cannot also finish in this transaction (it is leased and run
		// after the commit), so the item cannot settle now: skip looking.
		t.busy[it.ID] = true
	}
	return nil
}

// endJob moves a running job to a final state, canceling its ready tasks and asking running ones to stop.
func (t *tx) endJob(job *store.Job, state, reason string) error {
	ok, err := t.x.JobSetState(t.ctx, store.JobSetStateParams{ID: job.ID, State: state, Error: reason, Now: t.now})
	if err != nil || !ok {
		return err
	}
	job.State = state
	t.ended[job.ID] = state
	if state == store.JobComplete {
		return nil
	}
	// The held-back tasks are canceled with the others, and the known ones change state.
	if err := t.flushTasks(); err != nil {
		return err
	}
	t.freshStale = true
	running, err := t.x.TaskCancelJob(t.ctx, job.ID, "canceled", t.now)
	if err != nil {
		return err
	}
	clear(t.tasks) // their states changed
	t.cancel = append(t.cancel, running...)
	return t.releaseJobClaims(t.ctx, job.ID)
}

// finish settles dirty items deepest first (so a batch of children settles before their parent,
// once), then ends the touched jobs that have nothing left open.
func (t *tx) finish() error {
	if err := t.applyResults(); err != nil {
		return err
	}
	for len(t.dirty) > 0 {
		// Sorted with their depths at hand: a map lookup per comparison cost 5 % of a
		// batch of 1,000 results' CPU.
		byDepth := make([][2]int64, 0, len(t.dirty)) // depth, id
		for id, d := range t.dirty {
			byDepth = append(byDepth, [2]int64{int64(d), id})
		}
		slices.SortFunc(byDepth, func(a, b [2]int64) int {
			if a[0] != b[0] {
				return cmp.Compare(b[0], a[0])
			}
			return cmp.Compare(a[1], b[1])
		})
		ids := make([]int64, len(byDepth))
		for i, p := range byDepth {
			ids[i] = p[1]
		}
		// Settle only the deepest level now; parents marked dirty meanwhile join the map.
		depth := t.dirty[ids[0]]
		level := ids[:0]
		for _, id := range ids {
			if t.dirty[id] != depth {
				break
			}
			delete(t.dirty, id)
			level = append(level, id)
		}
		if err := t.loadLevel(level); err != nil {
			return err
		}
		for _, id := range level {
			if err := t.settle(id); err != nil {
				return err
			}
		}
		clear(t.tasks)
		if err := t.flushMoves(); err != nil {
			return err
		}
	}
	var cids []int64
	var cvals []float64
	for id := range t.colored {
		it := t.items[id]
		if it == nil || it.State == store.ItemIngested {
			continue // ingesting wrote colored = share
		}
		cids, cvals = append(cids, id), append(cvals, it.Colored)
	}
	if err := t.x.ItemColorMany(t.ctx, cids, cvals); err != nil {
		return err
	}
	jobs := make([]int64, 0, len(t.touched))
	for id := range t.touched {
		jobs = append(jobs, id)
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i] < jobs[j] })
	for _, id := range jobs {
		job, err := t.job(id)
		if err != nil {
			return err
		}
		if t.closing[id] && job.State == store.JobRunning {
			// Without the lock two transactions that each close the job's last open items (or
			// one that seals it and one that ingests its last root) could each miss the other's
			// uncommitted writes, and the job would never end (Postgres, READ COMMITTED).
			locked, err := t.x.JobLock(t.ctx, id)
			if err != nil {
				return err
			}
			*job = *locked
		}
		if job.State != store.JobRunning || !job.Sealed {
			continue // an unsealed job may still get roots
		}
		open := false
		for _, it := range t.items {
			if it.JobID == id && it.State != store.ItemIngested {
				open = true // one of its items, locked here, is still open
				break
			}
		}
		if !open {
			if open, err = t.x.JobHasOpenItems(t.ctx, id); err != nil {
				return err
			}
		}
		if !open {
			if err := t.endJob(job, store.JobComplete, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

var openStates = []string{store.ItemCreated, store.ItemWritten}
var unfinishedStates = []string{store.ItemCreated, store.ItemWritten, store.ItemProcessed}

// settle moves an item as far along written → processed → ingested as the database allows.
func (t *tx) settle(id int64) error {
	if t.busy[id] {
		return nil
	}
	it, err := t.item(id)
	if err != nil {
		return err
	}
	def, job, err := t.def(it.JobID)
	if err != nil {
		return err
	}
	if it.State == store.ItemWritten {
		tasks, ok := t.tasks[id]
		if !ok {
			tasks, ok = t.freshTasks(id)
		}
		if !ok {
			if err := t.flushTasks(); err != nil {
				return err
			}
			if tasks, err = t.x.TaskListByItem(t.ctx, id); err != nil {
				return err
			}
		}
		has := make(map[string]bool, len(tasks))
		for _, tk := range tasks {
			if tk.State == store.TaskReady || tk.State == store.TaskRunning || tk.State == store.TaskParked {
				return nil // still working
			}
			has[tk.Step] = true
		}
		openChildren, err := t.hasChildIn(it, openStates)
		if err != nil {
			return err
		}
		if job.State == store.JobRunning {
			if def.NeedsChildrenDone() && !openChildren {
				// fire leaves an event that fired alone: only a cached set saves the try.
				if ev, ok := t.events[id]; !ok || !ev[workflow.EventChildrenDone] {
					// Not while a step that may create children can still run.
					creating, err := t.mayCreateChildren(def, it, has)
					if err != nil {
						return err
					}
					if creating {
						return nil // that step waits for an event to come, and holds the item open
					}
					wasReady := t.ready
					t.ready = false
					if err := t.fire(it, workflow.EventChildrenDone); err != nil {
						return err
					}
					madeReady := t.ready
					t.ready = t.ready || wasReady
					if madeReady {
						return nil // a collector is now ready
					}
				}
			}
			if len(has) < len(def.Steps) {
				waiting, err := t.waiting(def, it, has, openChildren)
				if err != nil || waiting {
					return err
				}
			}
		}
		if it.NChildren == 0 {
			// No children: processed and ingested at once, in one write.
			return t.moveItem(it, store.ItemIngested)
		}
		if err := t.moveItem(it, store.ItemProcessed); err != nil {
			return err
		}
	}
	if it.State == store.ItemProcessed {
		open, err := t.hasChildIn(it, unfinishedStates)
		if err != nil || open {
			return err
		}
		return t.moveItem(it, store.ItemIngested)
	}
	return nil
}

// hasChildIn reports whether the item has a child in one of the states: from memory when every
// child was created in this transaction (their states are kept in step), else from the database.
func (t *tx) hasChildIn(it *store.Item, states []string) (bool, error) {
	if it.NChildren == 0 {
		return false, nil
	}
	if kids := t.kids[it.ID]; len(kids) == it.NChildren {
		for _, k := range kids {
			if slices.Contains(states, k.State) {
				return true, nil
			}
		}
		return false, nil
	}
	return t.x.ItemHasChildInState(t.ctx, it.ID, states)
}

// moveItem moves the item to state (coloring all of its share when ingested) and marks its parent
// for settling, since a child's progress may let the parent move too.
// The write is queued and made for the whole level at once by flushMoves, before anything reads
// these items' states back (the parent level, the job's open items).
func (t *tx) moveItem(it *store.Item, state string) error {
	m, ok := t.moves[it.ID]
	if !ok {
		m[0] = it.State
	}
	m[1] = state
	t.moves[it.ID] = m
	it.State = state
	if state == store.ItemIngested {
		it.Colored = it.Share
		t.touched[it.JobID] = true
	}
	if state == store.ItemIngested && it.ParentID == 0 {
		t.closing[it.JobID] = true
	}
	if it.ParentID != 0 {
		t.dirty[it.ParentID] = it.Depth - 1
	}
	return nil
}

// flushMoves writes the queued item moves, one statement per (from, to) pair.
func (t *tx) flushMoves() error {
	if len(t.moves) == 0 {
		return nil
	}
	// An ingested item is colored with its share as the database has it: write the held-back
	// child counts (which reduce shares) first.
	for id := range t.pendChildren {
		if err := t.flushChildCount(id); err != nil {
			return err
		}
	}
	groups := map[[2]string][]int64{}
	var keys [][2]string
	for id, m := range t.moves {
		if groups[m] == nil {
			keys = append(keys, m)
		}
		groups[m] = append(groups[m], id)
	}
	clear(t.moves)
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, key := range keys {
		ids := groups[key]
		slices.Sort(ids)
		p := store.ItemSetStateManyParams{IDs: ids, From: key[0], To: key[1], Now: t.now, ColorAll: key[1] == store.ItemIngested}
		if _, err := t.x.ItemSetStateMany(t.ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// loadLevel reads what settling a level needs in a few statements: the items not yet read, and
// the tasks of those still written.
func (t *tx) loadLevel(level []int64) error {
	if len(level) < 2 {
		return nil
	}
	if err := t.lockItems(level); err != nil {
		return err
	}
	var need []int64
	for _, id := range level {
		if _, known := t.freshTasks(id); known {
			continue
		}
		if _, known := t.tasks[id]; known {
			continue
		}
		if it := t.items[id]; it != nil && it.State == store.ItemWritten && !t.busy[id] {
			need = append(need, id)
		}
	}
	if len(need) < 2 {
		return nil
	}
	if err := t.flushTasks(); err != nil {
		return err
	}
	tasks, err := t.x.TaskListByItems(t.ctx, need)
	if err != nil {
		return err
	}
	for _, id := range need {
		t.tasks[id] = nil
	}
	for _, tk := range tasks {
		t.tasks[tk.ItemID] = append(t.tasks[tk.ItemID], tk)
	}
	return nil
}

// waiting reports whether a step of the item that has not run could still be unblocked by an
// event to come: a declared external event, or children.done while children are open.
func (t *tx) waiting(def *workflow.Definition, it *store.Item, has map[string]bool, openChildren bool) (bool, error) {
	// A need can only be waited for if it is external, or children.done with children open: a
	// step with no such need can never be unblocked, whatever the item's events (and they are
	// read only when some step has one).
	var ev map[string]bool
	for _, s := range def.Steps {
		if has[s.Name] {
			continue
		}
		waitable := false
		for _, n := range s.Needs {
			if def.IsExternal(n) || (n == workflow.EventChildrenDone && openChildren) {
				waitable = true
				break
			}
		}
		if !waitable {
			continue
		}
		if ev == nil {
			var err error
			if ev, err = t.itemEvents(it.ID); err != nil {
				return false, err
			}
		}
		possible := true
		missing := 0
		for _, n := range s.Needs {
			if ev[n] {
				continue
			}
			missing++
			switch {
			case def.IsExternal(n):
			case n == workflow.EventChildrenDone && openChildren:
			default:
				possible = false
			}
		}
		if possible && missing > 0 {
			return true, nil
		}
	}
	return false, nil
}
