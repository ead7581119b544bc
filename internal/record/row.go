// Package record holds the rows Sluice's store returns to its readers — [Workflow], [Job],
// [Item], [Task], [Attempt], [Output] — and the typed states of jobs, tasks and items with
// their state machines' invariants. It imports only the standard library, so every layer (the
// drivers, the engine, the workers, the API, the web UI, the CLI, the domains) can name a row
// or a state without importing the store's interface, as River's rivertype does.
//
// A state's text is its wire form: what the database, the API's JSON and the CLI's output hold,
// so a typed state marshals and scans as that word. User input becomes a state once, at the
// edge, through [ParseJobState], [ParseTaskState] or [ParseItemState].
package record

import "time"

// Workflow is a stored, immutable workflow version.
type Workflow struct {
	Name       string
	Version    int
	Digest     string
	Definition []byte // canonical JSON
	Source     []byte // as applied (YAML or JSON)
	CreatedAt  time.Time
}

// Job is one run of a workflow.
type Job struct {
	ID              int64
	Key             string // idempotency key (for example the ingest command's arguments); may be empty
	WorkflowName    string
	WorkflowVersion int
	State           JobState
	Error           string
	Metadata        []byte // JSON object
	Options         []byte // JSON object
	TotalBytes      float64
	// Sealed is false while the job's creator may still add roots: it cannot complete before.
	Sealed     bool
	CreatedAt  time.Time
	FinishedAt time.Time
}

// Item is one node of a job's tree.
type Item struct {
	ID            int64
	JobID         int64
	ParentID      int64 // 0 for roots
	RootID        int64
	Step          string // the step that created it; "" for roots
	Ordinal       int
	Depth         int
	SortKey       string
	Name          string
	ContentType   string
	BlobSHA256    string
	Size          int64
	Metadata      []byte
	Options       []byte
	HasText       bool
	Text          string // only filled by ItemGet/ItemList with text
	ThumbnailSHA  string
	ThumbnailType string
	State         ItemState
	Error         string
	NChildren     int
	RangeLo       float64
	RangeLen      float64
	Share         float64
	Colored       float64
	CreatedAt     time.Time
}

// TaskCount is how many of a job's tasks share a state, a step, an action and a queue, and
// their attempts beyond the first.
type TaskCount struct {
	State               TaskState
	Step, Action, Queue string
	Tasks, Retries      int
}

// Task is one step applied to one item.
type Task struct {
	ID             int64
	JobID          int64
	ItemID         int64
	Step           string
	Action         string
	Queue          string
	State          TaskState
	Attempt        int
	MaxAttempts    int
	RunAfter       time.Time
	LeaseOwner     string
	LeaseExpires   time.Time
	Error          string
	SortKey        string
	ProgressWeight float64
	CreatedAt      time.Time
	StartedAt      time.Time
	FinishedAt     time.Time
	// LastWorker is the worker that ran the task's last ended attempt (a lease owner, or the
	// engine's own name for a step it ran inline), kept after the lease ends; "" when no attempt
	// has ended. It names the worker of the attempt the task row holds, which the attempts table
	// records only when it failed or was canceled.
	LastWorker string
}

// Attempt records one run of a task.
type Attempt struct {
	TaskID     int64
	Attempt    int
	Owner      string
	StartedAt  time.Time
	FinishedAt time.Time
	Error      string
	Stack      string
}

// Output is a named result of an item, such as a document.
type Output struct {
	ItemID    int64
	JobID     int64
	Kind      string
	Value     []byte
	CreatedAt time.Time
}

// SupersededOutput is an output that a later result of its item replaced.
type SupersededOutput struct {
	Output
	SupersededAt time.Time
}
