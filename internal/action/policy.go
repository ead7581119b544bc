package action

// Policy is how Sluice runs an action's tasks: hints to the engine and the worker about what
// an action costs and touches, kept out of the public contract ([Spec]), which describes
// behaviour only. The zero Policy is always correct — a task leased, run by a worker in a
// temporary directory of its own, under a timeout of the whole attempt — and is what an action
// registered without [WithPolicy] (an embedder's) runs under; a Policy only makes some actions
// cheaper. An action gets one with [WithPolicy] where it is registered, or declares its own
// with a method Policy() Policy (as the built-in actions do), which [Catalog.Register] reads.
type Policy struct {
	// Inline, when set, tells for an item whether the engine may run the action itself, inside
	// the transaction that makes its task ready, instead of handing the task to a worker: no
	// lease, no commit of its own. It may say yes only where the action is quick and reads
	// nothing but [Task.Item] and [Task.With] — no blob, no TempDir, no children, no thumbnail.
	// An inline run's error fails the task for good (a second try would see the same item); a
	// retried task runs on a worker like any other. [InlineAlways] says yes to every item.
	Inline func(it Item) bool
	// Cacheable says the action's effects depend only on its version, the step's settings, the
	// item's options and its blob, so the worker caches them by those (the conversion cache) and
	// replays them for any item with the same input instead of running the action again.
	Cacheable bool
	// NoTempDir says the action never uses [Task.TempDir], so the worker creates none (a
	// directory made and removed per task is a measurable cost for quick actions).
	NoTempDir bool
	// Brief says the action runs in the process in microseconds, creating no children and no
	// blobs, so that a worker may run a batch of its tasks inside the transaction that leases
	// them and commits their results (a brief batch: the driver may keep the lease unwritten, see
	// store.Executor.TaskGetAvailable). On SQLite that transaction holds the database's one writer
	// while the batch runs: every other write of the process waits for it, so a brief action
	// must really be brief (it is timed out after a lease at most).
	Brief bool
	// IdleTimeout makes the timeout (Spec.Timeout, or the step's `timeout`) bound the time an
	// attempt goes without progress — a child created or a greater Progress reported; a
	// Heartbeat is not progress — instead of the whole attempt. For an action whose work grows
	// with its input without bound (unpack of an archive of 100,000 entries, which takes an hour
	// on a loaded machine): it is not cut off while it makes progress, and one that is stuck
	// still ends within the timeout.
	IdleTimeout bool
}

// InlineAlways is a [Policy.Inline] for actions that never need a worker.
func InlineAlways(Item) bool { return true }

// WithPolicy returns a, to be registered in a [Catalog] under the policy p: its Spec and Run
// are a's, and [Catalog.Lookup] returns a itself.
func WithPolicy(a Action, p Policy) Action { return withPolicy{a, p} }

type withPolicy struct {
	Action
	policy Policy
}
