// Package store is the seam between Sluice's engine and its database: one [Store] interface with
// noun-verb methods taking params structs, and the errors every driver maps its native errors to.
// The rows the methods return and the states they hold are package record's. Drivers live in subpackages (sqlite, postgres) and pass the same
// conformance suite (storetest). No SQL dialect leaks outside the drivers.
//
// Every write is idempotent and keyed (DESIGN §4.1): a child by (parent, step, ordinal), an event by
// (item, name), a task by (item, step), an output by (item, kind). Replaying a write is a no-op at
// the database level.
package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-project/sluice/internal/record"
)

// Errors every driver maps its native errors to.
var (
	ErrNotFound = errors.New("store: not found")
	ErrConflict = errors.New("store: conflict")
	// ErrRetry marks a transaction the database aborted to let another go on (a deadlock, a
	// serialization failure): nothing of it was written, and running it again may succeed.
	ErrRetry = errors.New("store: transaction aborted by the database; run it again")
	// ErrUnavailable marks a transaction that failed because the database could not be reached
	// or went away (a restart, a failover, a network cut). It is also an [ErrRetry]: the
	// transaction's writes are idempotent, so running it again once the database is back is
	// safe even when its commit went through before the connection dropped.
	ErrUnavailable = errors.New("store: database unavailable")
	// ErrFull marks a transaction that failed because the database's disk is full (SQLite's
	// SQLITE_FULL, PostgreSQL's disk_full). Nothing of it was written, and it says nothing
	// about the work it carried: it succeeds once there is space again.
	ErrFull = errors.New("store: the database's disk is full")
)

// NotFoundError is the error of a read by id of a row that does not exist, in plain words:
// "job 99 does not exist". errors.Is(err, [ErrNotFound]) holds for it. Drivers return it from
// the reads by id (JobGet, ItemGet, TaskGet, WorkflowGet and their locking forms), so every
// caller, whatever it prints, names the thing the user asked for.
type NotFoundError struct {
	Kind string // "job", "item", "task", "workflow"
	ID   string // the id as the user gave it: "99", "docs version 3"
}

func (e *NotFoundError) Error() string { return e.Kind + " " + e.ID + " does not exist" }

// Is reports whether target is [ErrNotFound].
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// WorkflowRef names a workflow's version for a [NotFoundError]: "\"docs\"" for the latest
// (version 0), "\"docs\" version 3".
func WorkflowRef(name string, version int) string {
	if version == 0 {
		return strconv.Quote(name)
	}
	return strconv.Quote(name) + " version " + strconv.Itoa(version)
}

// NotFoundFrom returns [ErrNotFound] for a driver's no-rows error: the cause stays in the chain
// (errors.Is finds it) but not in the text, which users may see.
func NotFoundFrom(cause error) error { return noRows{cause} }

type noRows struct{ cause error }

func (e noRows) Error() string   { return ErrNotFound.Error() }
func (e noRows) Unwrap() []error { return []error{ErrNotFound, e.cause} }

// NotFound returns a [NotFoundError] for the kind and id when err is [ErrNotFound] (a caller
// may so rename what a driver named: the item a user knows as a document), else err.
func NotFound(err error, kind string, id any) error {
	if errors.Is(err, ErrNotFound) {
		return &NotFoundError{Kind: kind, ID: fmt.Sprint(id)}
	}
	return err
}

// Capabilities declares what a driver can do, so callers adapt without switching on driver names.
type Capabilities struct {
	// MultiProcess is true when several processes may run engines on the same store at once
	// (Postgres). False for the embedded SQLite store, which a data-dir lock keeps to one engine.
	MultiProcess bool
	// Listen is true when the driver can wake waiting processes on new work (LISTEN/NOTIFY).
	Listen bool
	// ConcurrentWrites is true when writes on separate connections of one process run at the
	// same time (Postgres). False for SQLite, whose one writer connection serialises them: a
	// write outside the group-commit writer waits for it and commits on its own.
	ConcurrentWrites bool
}

// Locker elects one of the processes sharing a store for work done on behalf of all, such as
// the maintenance loop. Every driver provides it: on a store only one engine process opens at a
// time (SQLite, behind the data dir's lock) that process holds every lock.
type Locker interface {
	// TryLock takes the lock called name for this process without waiting. ok is false, with a
	// nil Lock, when another process holds it. The lock is held until [Lock.Release], or until the
	// process dies or loses its connection to the database, which then releases it by itself.
	TryLock(ctx context.Context, name string) (l Lock, ok bool, err error)
}

// Lock is a lock taken with [Locker.TryLock]. Its methods may be called from one goroutine at a
// time.
type Lock interface {
	// Check returns an error when the lock may have been lost: the connection that holds it
	// failed, so the database may already have handed it to another process.
	Check(ctx context.Context) error
	// Release releases the lock. It is idempotent.
	Release()
}

// Notifier announces new work. Notify returns a channel that receives after each notification
// of new work — never missing one since the call, unlike a loop of Waits — and once as soon as
// the listener is connected, since what was announced before that was not heard. After a
// receive, take returns the queues announced since the last take, or all=true when any queue
// may have work (on connecting). stop releases it. On a store without Capabilities.Listen the
// channel never receives: nothing is announced that its one process does not know.
type Notifier interface {
	Notify() (ch <-chan struct{}, take func() (queues []string, all bool), stop func())
	// NotifyOthers is Notify without the notifications this store's own transactions sent: a
	// process whose transactions wake their own workers as they commit hears the others' only.
	NotifyOthers() (ch <-chan struct{}, take func() (queues []string, all bool), stop func())
}

// Store is a database holding Sluice's state. It is safe for concurrent use.
type Store interface {
	Executor
	Locker
	Notifier
	// InTx runs fn in one write transaction and commits it if fn returns nil. On SQLite this is an
	// IMMEDIATE transaction on the single writer connection. A driver may send a write whose
	// result is only its error with the transaction's next statement (Postgres does): its error
	// then comes from that call, or from the commit, and the transaction fails either way.
	// A transaction that called [Executor.ItemInsertRoots] may be rolled back and fn run once
	// more (see there): fn must then start over from what it reads.
	InTx(ctx context.Context, fn func(tx Executor) error) error
	Capabilities() Capabilities
	// Wait blocks until another process signals new work, ctx ends, or d passes. Drivers without
	// Listen just wait for d or ctx.
	Wait(ctx context.Context, d time.Duration)
	// MigrateDomain applies the domain's migrations not yet applied to this store, in order, each
	// in a transaction of its own with its record in domain_migrations (domain, version), and
	// returns the versions it applied. Safe to call from several processes at once.
	MigrateDomain(ctx context.Context, domain string, ms []DomainMigration) ([]int, error)
	Close() error
}

// Executor holds the queries; both the [Store] (one statement, autocommit) and a transaction
// implement it.
type Executor interface {
	WorkflowInsert(ctx context.Context, p WorkflowInsertParams) (*record.Workflow, error)
	WorkflowGet(ctx context.Context, name string, version int) (*record.Workflow, error)
	WorkflowList(ctx context.Context) ([]*record.Workflow, error)

	JobInsert(ctx context.Context, p JobInsertParams) (*record.Job, error)
	JobGet(ctx context.Context, id int64) (*record.Job, error)
	// JobLock locks the job's row for the rest of the transaction where the driver needs it
	// (Postgres: SELECT … FOR UPDATE) and returns it, so that transactions that may each end the
	// job (the one that seals it, those that ingest its last roots) take turns and see each
	// other's writes.
	JobLock(ctx context.Context, id int64) (*record.Job, error)
	// JobIngestLock returns the job as committed when this transaction holds its ingest lock
	// shared, until the transaction ends (Postgres: an advisory lock; [Executor.JobSeal] takes it
	// exclusive). A transaction that ingested a root of a job that may be unsealed takes it before
	// deciding whether the job ends: transactions ingesting roots of one job do not wait for each
	// other (as they did on the job's row), and a seal beside one of them either looks for the
	// job's open items after it committed, or committed before it reads the job sealed (and then
	// takes [Executor.JobLock] to decide).
	JobIngestLock(ctx context.Context, id int64) (*record.Job, error)
	JobGetByKey(ctx context.Context, key string) (*record.Job, error)
	JobList(ctx context.Context, p JobListParams) ([]*record.Job, error)
	// JobSetState moves a running job to a final state; false when it was not running.
	JobSetState(ctx context.Context, p JobSetStateParams) (bool, error)
	JobAddTotal(ctx context.Context, id int64, bytes float64) error
	// JobReopen moves a failed, canceled or complete job back to running, clearing its error
	// and finish time (a retry); false when it was in none of those states.
	JobReopen(ctx context.Context, id int64) (bool, error)
	// JobSeal marks that no more roots will be added; false when it was sealed already. It then
	// takes the job's ingest lock exclusive (see [Executor.JobIngestLock]) until the transaction
	// ends: what the transaction reads next sees every ingesting transaction that took it before.
	JobSeal(ctx context.Context, id int64) (bool, error)
	// JobHasOpenItems reports whether any item of the job is not yet ingested.
	JobHasOpenItems(ctx context.Context, id int64) (bool, error)
	JobProgress(ctx context.Context, id int64) (*JobProgress, error)
	// JobListRunning lists running jobs oldest first.
	JobListRunning(ctx context.Context) ([]*record.Job, error)

	// ItemInsert inserts an item unless one exists at (job, parent, step, ordinal); it returns the
	// stored item and whether it was inserted.
	ItemInsert(ctx context.Context, p ItemInsertParams) (*record.Item, bool, error)
	// ItemInsertMany is ItemInsert for many items in one statement where the driver can: it
	// returns the items it inserted, in id order, and leaves out those whose key exists.
	ItemInsertMany(ctx context.Context, ps []ItemInsertParams) ([]*record.Item, error)
	// ItemInsertRoots is ItemInsertMany for root items of job, job as the caller read it. When
	// asGiven is true the transaction may take job as given for the rest of its life, without
	// reading it: the driver checks, before the commit, that the job still is (its state,
	// whether sealed) and that no item's key existed, and when either does not hold it rolls the
	// transaction back and [Store.InTx] runs its fn again, in which this call reads first. A
	// driver may so add a root without a round trip of its own (Postgres, from item ids it
	// reserved before: docs/performance.md, "Adding a root in one round trip").
	ItemInsertRoots(ctx context.Context, job *record.Job, ps []ItemInsertParams) (items []*record.Item, asGiven bool, err error)
	ItemGet(ctx context.Context, id int64) (*record.Item, error)
	// ItemGetMany is ItemGet for many items at once, in id order; missing ids are left out.
	ItemGetMany(ctx context.Context, ids []int64) ([]*record.Item, error)
	// ItemLock locks the item's row for the rest of the transaction where the driver needs it
	// (Postgres: SELECT … FOR UPDATE) and returns it.
	ItemLock(ctx context.Context, id int64) (*record.Item, error)
	// ItemLockMany is ItemLock for many items at once, in id order; missing ids are left out.
	ItemLockMany(ctx context.Context, ids []int64) ([]*record.Item, error)
	ItemList(ctx context.Context, p ItemListParams) ([]*record.Item, error)
	// ItemSetStateMany moves the items that are in From to To at once, coloring all of each
	// one's share when ColorAll is set; it returns how many moved.
	ItemSetStateMany(ctx context.Context, p ItemSetStateManyParams) (int64, error)
	// ItemColorMany sets the colored progress of many items at once: colored[i] on ids[i].
	ItemColorMany(ctx context.Context, ids []int64, colored []float64) error
	// ItemReopen moves an item back to an earlier state for a retry, clearing its error when asked;
	// false when the item is not in a state it may leave that way (see [ItemReopenParams]).
	ItemReopen(ctx context.Context, p ItemReopenParams) (bool, error)
	// ItemUpdate applies a task's effects on its item: text and thumbnail (each set once),
	// metadata merged, content type, error (set once), added progress.
	ItemUpdate(ctx context.Context, p ItemUpdateParams) error
	// ItemAddChild records n created children on their parent: n_children+n, share reduced by
	// length (their lengths summed), never below zero.
	ItemAddChild(ctx context.Context, p ItemAddChildParams) error
	// ItemCountBacklog counts the job's items not yet processed (created or written) deeper
	// than p.Depth, up to p.Limit: a count that stops at the bound costs what the bound does,
	// however many items the job has. It is what a step that creates children waits on (see
	// engine's backlog bound).
	ItemCountBacklog(ctx context.Context, p ItemCountBacklogParams) (int, error)
	// ItemHasChildInState reports whether the parent has a child in one of the states.
	ItemHasChildInState(ctx context.Context, parentID int64, states []record.ItemState) (bool, error)
	ItemListChildren(ctx context.Context, parentID int64, step string) ([]*record.Item, error)
	// ItemListChildrenFrom returns up to limit of the children ItemListChildren returns, those
	// from ordinal from on, in ordinal order: a page of them, for a reader that must not hold
	// every child of a large fan-out at once.
	ItemListChildrenFrom(ctx context.Context, parentID int64, step string, from, limit int) ([]*record.Item, error)
	// ItemListByMetadata returns the items of a job whose metadata holds a key with a value, in
	// id order, through an index (Postgres) or a scan of the job's items in the database
	// (SQLite): what correlates an external event with the items it fires on.
	ItemListByMetadata(ctx context.Context, p ItemMetadataParams) ([]*record.Item, error)

	// EventInsert records an event; false when it had already fired.
	EventInsert(ctx context.Context, p EventInsertParams) (bool, error)
	// EventInsertMany records events in as few statements as the driver can; one that had
	// already fired is left alone. The engine uses it for events it knows are new.
	EventInsertMany(ctx context.Context, es []EventInsertParams) error
	EventListByItem(ctx context.Context, itemID int64) ([]string, error)
	// EventListByItems returns the events of many items in one statement, by item; an item
	// with none has no entry.
	EventListByItems(ctx context.Context, itemIDs []int64) (map[int64][]string, error)
	// EventListNamed returns, of the events names[i] on items itemIDs[i], those that have
	// fired, by item, in one statement: whether a batch's events are new, without each item's
	// whole set. An item with none of them has no entry.
	EventListNamed(ctx context.Context, itemIDs []int64, names []string) (map[int64][]string, error)

	// TaskInsert inserts a ready task (or an ended one, [TaskInsertParams.Done]) unless one exists
	// for (item, step); false when it existed.
	TaskInsert(ctx context.Context, p TaskInsertParams) (bool, error)
	// TaskInsertMany is TaskInsert for many tasks, in as few statements as the driver can. The
	// engine uses it for the tasks of items created in the same transaction, which cannot exist.
	TaskInsertMany(ctx context.Context, ps []TaskInsertParams) error
	TaskGet(ctx context.Context, id int64) (*record.Task, error)
	// TaskLease moves up to Limit ready tasks of the queue whose run_after has passed to running,
	// oldest job first and depth-first within a tree, and returns them with attempt incremented.
	TaskLease(ctx context.Context, p TaskLeaseParams) ([]*record.Task, error)
	// TaskGetAvailable leases ready tasks of several queues, in as few statements as the driver
	// can: up to Max[i] tasks of Queues[i], picked as TaskLease picks them. It returns the tasks of
	// each queue in lease order, the queues in the order given, as running: attempt counted,
	// owner, start and lease set. Each must be finished with TaskSetStateIfRunningMany (or
	// TaskFinish) at that attempt, or its lease expires and TaskGetStuck reclaims it.
	//
	// With p.Brief, inside a transaction, the caller runs the tasks at once and finishes them in
	// that transaction before it commits (a brief batch). The driver may then lease them without
	// writing them, their rows' locks being their lease and its commit their only write, while it
	// keeps a dead process's attempts counted: the lease is durable (TaskGetStuck reclaims the
	// tasks of a process that died) by the time the transaction's next statement returns, so the
	// caller runs none before that. A brief get is its transaction's first write. If the
	// transaction rolls back, its tasks stay leased to p.Owner until p.LeaseUntil, written, as
	// without Brief: the caller finishes or gives them back in transactions of their own (or
	// they are ready again at their attempt, if the lease was never made durable).
	TaskGetAvailable(ctx context.Context, p TaskGetAvailableParams) ([]*record.Task, error)
	// TaskFinish ends a running attempt: complete, failed, or back to ready (retry/snooze). It
	// returns false when the task is no longer running this attempt (its lease was lost).
	TaskFinish(ctx context.Context, p TaskFinishParams) (bool, error)
	// TaskSetStateIfRunningMany applies each TaskFinish in order, in as few statements as the
	// driver can, and reports for each whether it ended its attempt.
	TaskSetStateIfRunningMany(ctx context.Context, ps []TaskFinishParams) ([]bool, error)
	// TaskGetStuck returns up to limit running tasks whose lease expired before now, for the
	// engine to put back or fail, the tasks of brief batches whose process died (see
	// TaskGetAvailable) among them.
	TaskGetStuck(ctx context.Context, now time.Time, limit int) ([]*record.Task, error)
	// WaitInsert records that a step of an item waits for external events until p.Due; a wait
	// already recorded for the (item, step) is left alone (its deadline counts from the first).
	WaitInsert(ctx context.Context, p Wait) error
	// WaitDelete deletes the wait of the item's step, if any.
	WaitDelete(ctx context.Context, itemID int64, step string) error
	// WaitListDue returns up to limit waits due at or before now, earliest first.
	WaitListDue(ctx context.Context, now time.Time, limit int) ([]Wait, error)
	// WaitListByJob returns the waits of the job's items, by item and step.
	WaitListByJob(ctx context.Context, jobID int64) ([]Wait, error)
	// TaskRenewLeases extends the leases of the running tasks p.TaskIDs that p.Owner holds, and
	// those of p.Owner's brief batches that run (see TaskGetAvailable); it returns how many tasks
	// of p.TaskIDs it extended. Only the ids given are renewed, never every lease of the owner: a
	// task whose result its worker could not commit must be left to expire, so the leader
	// reclaims it.
	TaskRenewLeases(ctx context.Context, p TaskRenewLeasesParams) (int64, error)
	// TaskListExpired returns running tasks whose lease expired before now, without a brief
	// batch's (see TaskGetStuck), oldest lease first.
	TaskListExpired(ctx context.Context, now time.Time, limit int) ([]*record.Task, error)
	TaskListByItem(ctx context.Context, itemID int64) ([]*record.Task, error)
	// TaskListByItems returns the tasks of many items, ordered by item and id.
	TaskListByItems(ctx context.Context, itemIDs []int64) ([]*record.Task, error)
	TaskListByJob(ctx context.Context, p TaskListParams) ([]*record.Task, error)
	// TaskCancelJob cancels the job's ready tasks and returns the running ones' ids.
	TaskCancelJob(ctx context.Context, p TaskCancelJobParams) (running []int64, err error)
	// TaskRetry puts a failed, canceled or blocked task back to ready for a retry of its job
	// (or, with p.Blocked, a complete, failed or canceled one to blocked); false when the task
	// is in none of those states.
	TaskRetry(ctx context.Context, p TaskRetryParams) (bool, error)
	// TaskNextRunAfter returns the earliest run_after of a ready task that has one (a backoff:
	// run_after > 0), or zero. A ready task due at once (run_after 0) is not counted.
	TaskNextRunAfter(ctx context.Context) (time.Time, error)
	// TaskReadyQueues returns those of queues that have a ready task due by now (run_after ≤
	// now), in no order: every queue a pick at now could take a task of, and perhaps one whose
	// ready tasks other transactions hold. One statement: a worker asks it before it spends a
	// held batch (a transaction and a connection) on a queue nobody woke.
	TaskReadyQueues(ctx context.Context, queues []string, now time.Time) ([]string, error)
	// TaskCounts counts the job's tasks by state, step, action and queue in one pass (see
	// TaskStats), ordered by those.
	TaskCounts(ctx context.Context, jobID int64) ([]record.TaskCount, error)
	// QueueStats counts, per queue and action over every job, the ready tasks due by p.Now
	// (with the oldest one's ready time), the running tasks, and the tasks completed since
	// p.Since; in no order.
	QueueStats(ctx context.Context, p QueueStatsParams) ([]QueueStat, error)

	// ClaimTake claims p.Key for the running task p.TaskID unless another task holds it, and
	// returns the claim as it stands: held by p.TaskID (it runs), held by another task (park it
	// with ClaimPark in the same transaction), or done (reuse its result). A claim held by a
	// task that is neither ready, running nor parked (its job canceled) is taken over. The
	// claim's row stays locked until the transaction ends (Postgres: FOR UPDATE), so that a
	// task parks only while the claim is held.
	ClaimTake(ctx context.Context, p ClaimTakeParams) (*Claim, error)
	// ClaimPark moves the running task to parked (its attempt given back, no lease) to wait
	// for the claim of key: false when the task was not running that attempt.
	ClaimPark(ctx context.Context, p ClaimParkParams) (bool, error)
	// ClaimFinish finishes the claim held by p.TaskID, if any (see [ClaimFinishParams]), and
	// puts the tasks parked on it back to ready, announcing them like any ready task; it
	// returns their queues.
	ClaimFinish(ctx context.Context, p ClaimFinishParams) ([]string, error)
	// ClaimReleaseJob drops the claims held by the job's tasks that are not running (canceled
	// with the job: a running one drops its claim as it finishes) and readies the tasks parked
	// on them; it returns their queues.
	ClaimReleaseJob(ctx context.Context, jobID int64, now time.Time) ([]string, error)
	// LimitAcquire grants the running task a slot of a limit's key, or says when to ask again.
	// Slots of tasks no longer running that attempt are freed as it counts. Calls for one key
	// are serialised (Postgres: the key's row is locked until the transaction ends).
	LimitAcquire(ctx context.Context, p LimitAcquireParams) (LimitAcquireResult, error)

	AttemptInsert(ctx context.Context, p AttemptInsertParams) error
	AttemptList(ctx context.Context, taskID int64) ([]*record.Attempt, error)

	// OutputPut stores an output unless one exists for (item, kind).
	OutputPut(ctx context.Context, p OutputPutParams) error
	OutputList(ctx context.Context, p OutputListParams) ([]*record.Output, error)
	// DocumentList returns the documents (outputs of kind [OutputDocument]) that p's filters
	// keep, with their items, in p.Order, after p's key, up to p.Limit.
	DocumentList(ctx context.Context, p DocumentListParams) ([]*Document, error)
	// DocumentCounts counts the documents that p's filters keep (p's order, key and limit are
	// ignored), per content type of their items: the most numerous first, then by type.
	DocumentCounts(ctx context.Context, p DocumentListParams) ([]TypeCount, error)
	// OutputSupersede moves the item's output of the kind, if any, to the item's output
	// history, stamped p.Now: a later result of the item replaced it. Outputs are never
	// deleted; false when the item had no output of the kind.
	OutputSupersede(ctx context.Context, p OutputSupersedeParams) (bool, error)
	// OutputHistoryList returns the outputs of the item that were superseded, oldest first.
	OutputHistoryList(ctx context.Context, itemID int64) ([]*record.SupersededOutput, error)

	CacheGet(ctx context.Context, key string) ([]byte, error)
	// CachePut stores an entry; an entry already under the key is kept (the first wins).
	CachePut(ctx context.Context, p CachePutParams) error
	// CacheDelete removes an entry (a cached error a retry is about to replace); no error when
	// there is none.
	CacheDelete(ctx context.Context, key string) error

	// BlobIsReferenced reports whether any row references the blob.
	BlobIsReferenced(ctx context.Context, sha256 string) (bool, error)

	// DomainSQL returns the executor's raw statements for a domain's own tables (see
	// [DomainSQL]): inside a transaction, in it.
	DomainSQL() DomainSQL
}

// WorkflowInsertParams stores a new version unless one with the same digest exists.
type WorkflowInsertParams struct {
	Name       string
	Digest     string
	Definition []byte
	Source     []byte
	Now        time.Time
}

// JobInsertParams creates a running job.
type JobInsertParams struct {
	// Open creates the job unsealed: roots will follow in batches, and [Executor.JobSeal] ends that.
	Open            bool
	Key             string
	WorkflowName    string
	WorkflowVersion int
	Metadata        []byte
	Options         []byte
	Now             time.Time
}

// JobListParams filters jobs; newest first. Every filter set must hold.
type JobListParams struct {
	State   record.JobState // "" for every state
	AfterID int64           // ids below this, for pagination (0: from the newest)
	Limit   int
	// Workflow keeps the jobs of this workflow, any version.
	Workflow string
	// CreatedFrom and CreatedUntil keep the jobs created at or after CreatedFrom and before
	// CreatedUntil; a zero time does not bound.
	CreatedFrom, CreatedUntil time.Time
	// Meta keeps the jobs whose metadata has each key with the value, compared as text: a
	// string's characters, or the JSON text of a number or a boolean ("7", "true").
	Meta []KeyValue
	// Text keeps the jobs whose id it is, or whose workflow name, key, error or metadata JSON
	// contains it (ASCII letters in any case).
	Text string
}

// KeyValue is a metadata key and a value of it.
type KeyValue struct{ Key, Value string }

// JobSetStateParams ends a running job.
type JobSetStateParams struct {
	ID    int64
	State record.JobState
	Error string
	Now   time.Time
}

// JobProgress is derived from the items of a job.
type JobProgress struct {
	Total   float64
	Colored float64
	Items   map[record.ItemState]int
}

// ItemInsertParams creates an item in the written state (its blob is already durable).
type ItemInsertParams struct {
	JobID         int64
	ParentID      int64
	RootID        int64 // 0 for a root: set to its own id
	Step          string
	Ordinal       int
	Depth         int
	SortKey       string
	Name          string
	ContentType   string
	BlobSHA256    string
	Size          int64
	Metadata      []byte
	Options       []byte
	Text          *string
	ThumbnailSHA  string
	ThumbnailType string
	RangeLo       float64
	RangeLen      float64
	Now           time.Time
}

// QueueStatsParams asks [Executor.QueueStats] for the queues as of Now, with the tasks
// completed since Since.
type QueueStatsParams struct {
	Now, Since time.Time
}

// QueueStat is one queue's tasks of one action.
type QueueStat struct {
	Queue, Action string
	// Ready counts the ready tasks due now; OldestReady is when the longest waiting of them
	// became ready (its creation, or the end of its retry backoff), zero when there is none.
	Ready       int
	OldestReady time.Time
	Running     int
	// Completed counts the tasks completed since [QueueStatsParams.Since].
	Completed int
}

// ItemListParams lists a job's items in tree order.
type ItemListParams struct {
	JobID       int64
	ParentID    *int64
	States      []record.ItemState
	AfterSort   string
	Limit       int
	WithText    bool
	OnlyErrored bool
}

// ItemCountBacklogParams names the backlog [Executor.ItemCountBacklog] counts: the job's
// unprocessed items of depth greater than Depth, at most Limit of them.
type ItemCountBacklogParams struct {
	JobID int64
	Depth int
	Limit int
}

// ItemAddChildParams counts N children created under a parent whose lengths sum to Length.
type ItemAddChildParams struct {
	ParentID int64
	N        int
	Length   float64
}

// TaskCancelJobParams cancels a job's ready and parked tasks with Reason as their error.
type TaskCancelJobParams struct {
	JobID  int64
	Reason string
	Now    time.Time
}

// ClaimParkParams parks the running task (at its Attempt) on the claim of Key.
type ClaimParkParams struct {
	Key     string
	TaskID  int64
	Attempt int
	Now     time.Time
}

// CachePutParams is a conversion cache entry.
type CachePutParams struct {
	Key   string
	Value []byte
	Now   time.Time
}

// ItemSetStateManyParams moves many items between the same two states.
type ItemSetStateManyParams struct {
	IDs      []int64
	From, To record.ItemState
	Now      time.Time
	// ColorAll sets each item's colored progress to its whole share.
	ColorAll bool
}

// ItemReopenParams moves an item back for a retry: to written from processed or ingested (its
// tasks may run again), or to processed from ingested (a child of it is open again). Moving
// to the state the item is in is allowed, so ClearError alone can be applied to a written item.
// An item reopened to written loses its colored progress (ingesting colored all of it); one
// reopened to processed keeps it.
type ItemReopenParams struct {
	ID         int64
	To         record.ItemState // written or processed
	ClearError bool
}

// ItemUpdateParams applies a finished task's effects on its item.
type ItemUpdateParams struct {
	ID            int64
	Text          *string
	ThumbnailSHA  string
	ThumbnailType string
	Metadata      []byte // merged: new keys are added, keys the item already has are kept
	ContentType   string
	Error         string // set only if the item has none, unless ReplaceError
	// ReplaceError sets the item's error to Error even when it has one, and clears it when
	// Error is empty: the error a retried task's earlier attempt left, which a new result
	// replaced.
	ReplaceError bool
	// AddColored colors this fraction of the item's range (capped at its own share).
	AddColored float64
}

// TaskStats counts the job's tasks by state.
func TaskStats(ctx context.Context, x Executor, jobID int64) (map[record.TaskState]int, error) {
	counts, err := x.TaskCounts(ctx, jobID)
	if err != nil {
		return nil, err
	}
	out := map[record.TaskState]int{}
	for _, c := range counts {
		out[c.State] += c.Tasks
	}
	return out, nil
}

// TaskInsertParams creates a ready task.
type TaskInsertParams struct {
	JobID          int64
	ItemID         int64
	Step           string
	Action         string
	Queue          string
	MaxAttempts    int
	SortKey        string
	ProgressWeight float64
	Now            time.Time
	// Done, when set, inserts the task already ended, started and finished at Now, instead of
	// ready: a step the engine ran inline in this transaction (one attempt), or skipped (none).
	Done *TaskDone
	// New says the caller knows the task is not in the database: it holds the item's lock and
	// inserts the task as the event that meets its needs fires for the first time. The driver
	// may then insert it without looking for an existing row; one there fails the insert (and
	// the transaction) instead of being left alone. TaskInsertMany only.
	New bool
}

// EventInsertParams is one event to record (EventInsert, EventInsertMany).
type EventInsertParams struct {
	ItemID int64
	Name   string
	Now    time.Time
	// New says the caller knows the event has not fired: it holds the item's lock and has read
	// its events in the transaction (events are written only under the item's lock). The driver
	// may then insert it without looking for an existing row; one there fails the insert (and
	// the transaction) instead of being left alone. EventInsertMany only.
	New bool
}

// TaskDone is how a task ended as it was inserted: complete or failed (a step run inline), or
// skipped (a step whose when: condition does not hold for the item).
type TaskDone struct {
	State record.TaskState
	Error string
	// Worker ran the step inline (the engine's name); it becomes the task's LastWorker.
	Worker string
}

// Attempt is the attempt number the ended task is inserted with: 1 for a step run inline, 0 for
// a skipped one, which never ran.
func (d *TaskDone) Attempt() int {
	if d.State == record.TaskSkipped {
		return 0
	}
	return 1
}

// TaskLeaseParams leases ready tasks of one queue.
type TaskLeaseParams struct {
	Queue      string
	Limit      int
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
}

// TaskGetAvailableParams leases ready tasks of several queues; Queues and Max have the same
// length.
type TaskGetAvailableParams struct {
	Queues     []string
	Max        []int
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
	// Brief says the tasks run at once, in the transaction, and are finished in it (see
	// [Executor.TaskGetAvailable]).
	Brief bool
}

// Wait is a step of an item waiting for external events until a deadline.
type Wait struct {
	JobID  int64
	ItemID int64
	Step   string
	Due    time.Time
}

// TaskRenewLeasesParams names the leases a process still needs: the tasks it runs (or whose
// results wait to be committed); its brief batches that run are renewed with them.
type TaskRenewLeasesParams struct {
	Owner   string
	TaskIDs []int64
	Until   time.Time
}

// TaskFinishParams ends the running attempt Attempt of task ID.
type TaskFinishParams struct {
	ID      int64
	Attempt int
	// State is complete, failed, canceled or ready (a retry or a snooze).
	State    record.TaskState
	Error    string
	RunAfter time.Time
	// Refund gives the attempt back (a snooze, or a lease lost to a crash that should not count).
	Refund bool
	Now    time.Time
	// Started is when the attempt began (the task's StartedAt as its lease returned it): a
	// driver that did not write the lease (a brief batch) writes it with the finish.
	Started time.Time
	// Worker ran the attempt (its lease owner); the finish keeps it as the task's LastWorker.
	Worker string
}

// TaskRetryParams puts a failed, canceled or blocked task back to ready, runnable at Now, with
// no error. Its attempt number is kept, so the attempts of every run stay in the task's history
// (attempts are keyed by number); MaxAttempts is the new bound, normally the attempt number plus
// the step's attempts: a fresh budget. Zero keeps the task's bound.
type TaskRetryParams struct {
	ID          int64
	MaxAttempts int
	Now         time.Time
	// Blocked puts a complete, failed or canceled task to blocked instead: a collector of a
	// retried item, which runs again once the item's children are done again (a blocked row
	// is never leased; see [record.TaskBlocked]).
	Blocked bool
}

// TaskListParams lists a job's tasks.
type TaskListParams struct {
	JobID   int64
	State   record.TaskState // "" for every state
	AfterID int64
	Limit   int
}

// AttemptInsertParams records a finished attempt.
type AttemptInsertParams = record.Attempt

// OutputPutParams stores an output unless one exists for (item, kind).
type OutputPutParams struct {
	ItemID int64
	JobID  int64
	Kind   string
	Value  []byte
	Now    time.Time
}

// OutputSupersedeParams names the output of an item that a later result replaces.
type OutputSupersedeParams struct {
	ItemID int64
	Kind   string
	Now    time.Time
}

// OutputListParams lists outputs of a job (or all jobs when JobID is 0) by kind, in item order.
type OutputListParams struct {
	JobID     int64
	Kind      string
	AfterItem int64
	Limit     int
}

// DocumentOrder is the order of [Store.DocumentList].
type DocumentOrder string

// The orders of documents. Each is total: the item id breaks ties.
const (
	// DocumentsInTree is a job's tree order (the items' sort keys), the order its files were
	// given in; it needs a JobID. Its key is AfterKey (a sort key) and AfterItem.
	DocumentsInTree DocumentOrder = "tree"
	// DocumentsNewest is the newest first (item id, descending). Its key is AfterItem.
	DocumentsNewest DocumentOrder = "newest"
	// DocumentsByTitle is by the item's name, ascending. Its key is AfterKey (a name) and
	// AfterItem.
	DocumentsByTitle DocumentOrder = "title"
	// DocumentsBySize is the largest first. Its key is AfterSize and AfterItem.
	DocumentsBySize DocumentOrder = "size"
)

// DocumentListParams filters and orders documents. Every filter set must hold.
type DocumentListParams struct {
	JobID       int64  // 0: every job
	ContentType string // the item's content type; "": any
	// Meta keeps the documents whose item's metadata has each key with the value, compared as
	// [JobListParams.Meta] compares a job's.
	Meta  []KeyValue
	Order DocumentOrder // "": DocumentsNewest
	// AfterKey, AfterSize and AfterItem are the last row of the page before, in Order's terms;
	// AfterItem 0 is the first page.
	AfterKey  string
	AfterSize int64
	AfterItem int64
	Limit     int // default 100
}

// Document is a document with its item (without its text).
type Document struct {
	Item      *record.Item
	Value     []byte // the output's value
	CreatedAt time.Time
}

// TypeCount is how many documents have items of a content type.
type TypeCount struct {
	ContentType string
	N           int64
}

// OutputDocument is the kind of output that is a document, the unit of search (see
// internal/docsearch).
const OutputDocument = "document"

// OutputError is the kind of output that reports an item's error, its value an [ErrorValue].
const OutputError = "error"

// ErrorValue is the value of an output of kind [OutputError].
type ErrorValue struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}
