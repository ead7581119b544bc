// Package action is the contract between Sluice's engine and the code that does one kind of
// work on one Item: the [Action] interface, its declared [Spec], the [Output] an action writes its
// results to, and the error classes ([Permanent], [Snooze]) that tell the engine what to do next.
//
// It is public and stable (see the compatibility promise in the README): every built-in action
// (detect, unpack, pdf, office, …) implements it, and so does an action of your own registered
// with an embedded engine (package [github.com/sluice-project/sluice]).
//
// Actions must be deterministic (DESIGN §4.2): run twice on the same input they create the same
// children, in the same order, and return the same error. The engine relies on this to replay a
// task after a crash without duplicating its effects.
package action

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// Action is code that does one kind of work on one Item. Implementations must be safe for
// concurrent use: the engine runs many tasks of the same action at once.
type Action interface {
	// Spec describes the action: its name, settings and the outcome events it can emit.
	Spec() Spec
	// Run performs the work of one task. It returns nil on success, an error wrapped with
	// [Permanent] for bad input, a [Snooze] error to be rescheduled without spending an attempt,
	// or any other error for a transient failure that is retried with backoff.
	Run(ctx context.Context, t *Task, out Output) error
}

// Spec is what an action declares about itself so that a workflow can be validated before it runs.
type Spec struct {
	// Name is the name steps use in `action:`. Lowercase, unique in a catalog.
	Name string
	// Version changes whenever the action's output for the same input and settings changes.
	// Cached results are keyed by it. Defaults to "1".
	Version string
	// Doc is a one-line description shown by `sluice workflow actions` and the API.
	Doc string
	// Settings are the keys a step may set in `with:`. Unknown keys are rejected.
	Settings []Setting
	// Outcomes are the events the action can emit at run time regardless of its settings.
	Outcomes []string
	// OutcomesFor, when set, returns the outcome events the action can emit with the given
	// (already validated) settings, in addition to Outcomes. Used by actions such as `emit`
	// whose outcomes are configured.
	OutcomesFor func(with map[string]any) []string
	// Validate, when set, checks settings beyond their declared types (ranges, combinations).
	// It returns a [SettingError] naming the offending key where it can.
	Validate func(with map[string]any) error
	// Concurrency is the default number of tasks of this action run at once in one process.
	// Defaults to 4.
	Concurrency int
	// Timeout is the default per-attempt timeout. Defaults to 10 minutes.
	Timeout time.Duration
	// ProgressWeight is the default share of an item's progress colored when the task
	// completes; the rest is handed to the children it creates. Defaults to 1.
	ProgressWeight *float64
}

// SettingType is the JSON type of a setting.
type SettingType string

// The setting types a [Setting] can declare.
const (
	TypeString   SettingType = "string"
	TypeInt      SettingType = "int"
	TypeNumber   SettingType = "number"
	TypeBool     SettingType = "bool"
	TypeDuration SettingType = "duration" // a Go duration string such as "30s"
	TypeStrings  SettingType = "strings"  // a list of strings
	TypeObject   SettingType = "object"   // a JSON object
	TypeAny      SettingType = "any"
)

// Setting declares one key of a step's `with:`.
type Setting struct {
	Name     string
	Type     SettingType
	Required bool
	Doc      string
}

// SettingError is returned by [Spec.Validate] functions to name the offending setting.
type SettingError struct {
	Key    string
	Reason string
}

func (e *SettingError) Error() string { return e.Key + ": " + e.Reason }

// Item is the read-only view of the item a task runs on.
type Item struct {
	ID          int64
	JobID       int64
	ParentID    int64 // 0 for a root item
	RootID      int64
	Ordinal     int
	Depth       int
	Name        string // derived path such as "Archive.zip/dir/report.pdf"
	ContentType string
	Size        int64
	BlobSHA256  string // hex; empty when the item has no blob
	Metadata    map[string]any
	Options     map[string]any
	// HasText reports whether the item's text is already set (for example by the action that
	// created it), so a router can treat it as final.
	HasText bool
	// HasThumbnail reports whether the item's thumbnail is set.
	HasThumbnail bool
	// Error is the item's error so far, if a task of it failed for good.
	Error string
	// NChildren is the number of children created so far.
	NChildren int
}

// Task is what an action receives for one run: the item, the step's settings and a way to read
// the item's blob.
type Task struct {
	ID       int64
	JobID    int64
	Step     string
	Action   string
	Attempt  int // 1 for the first attempt
	Item     Item
	With     map[string]any
	OpenBlob func(ctx context.Context) (io.ReadCloser, error)
	// BlobPath returns a local file path holding the blob, for tools that need a file.
	// The file must not be modified. It may be a temporary copy removed after the task.
	BlobPath func(ctx context.Context) (string, error)
	// TempDir is a directory private to this attempt, removed when it ends.
	TempDir string
}

// Child describes one item created by an action (fan-out). Children are keyed by
// (parent, ordinal) in the order they are created, so a replay recognises the ones that exist.
type Child struct {
	Name        string
	ContentType string
	Metadata    map[string]any // merged over the parent's metadata: the child's keys win
	Options     map[string]any // merged over the parent's options: the child's keys win
	// Blob is the child's content, streamed into the blob store. May be nil.
	Blob io.Reader
	// BlobSHA256, when set instead of Blob, names in hex a blob already in the blob store as the
	// child's content. CreateChild fails, permanently, if the store does not hold it.
	BlobSHA256 string
	// Text and Thumbnail, when set, are stored with the child as it is created.
	Text      *string
	Thumbnail io.Reader
	// ThumbnailType is the content type of Thumbnail, such as "image/png".
	ThumbnailType string
}

// Output is where an action writes its results. Its methods are safe to call from one goroutine
// at a time; writes become durable in order, and the task's completion commits only after all of
// them.
type Output interface {
	// CreateChild creates the next child item. Its blob is durable before the child is recorded.
	// It reads c.Blob and c.Thumbnail to the end before it returns.
	// On a replay a child that already exists is skipped; one that differs fails the task with
	// "nondeterministic action".
	CreateChild(ctx context.Context, c Child) error
	// SetText sets the item's text once; later calls are ignored (DESIGN §2, created state).
	SetText(ctx context.Context, text string) error
	// SetThumbnail sets the item's thumbnail once.
	SetThumbnail(ctx context.Context, r io.Reader, contentType string) error
	// SetContentType records the item's detected content type when the task completes, so later
	// steps see it in [Item.ContentType].
	SetContentType(contentType string)
	// SetMetadata merges keys into the item's metadata when the task completes.
	SetMetadata(md map[string]any)
	// SetOutput records a named result of the item, such as "document"; keyed by (item, kind).
	SetOutput(ctx context.Context, kind string, value json.RawMessage) error
	// Emit records outcome events fired when the task completes. Each must be declared by the
	// action's spec.
	Emit(events ...string)
	// Progress reports the fraction done (0..1) of this task, used to slice progress among children.
	Progress(fraction float64)
	// Heartbeat tells the engine the action is alive. In-process leases are renewed for the whole
	// process; long actions should still call it so a stuck action is distinguishable from a slow one.
	Heartbeat()
	// Write records a write to a domain's own tables (see [DomainWrite]), made when the task
	// completes, in its transaction: it is applied if and only if the task completes. It returns
	// an error, at once, for a domain the engine does not know or a payload that is not JSON.
	Write(w DomainWrite) error
}

// Resumer is implemented by an [Output] that knows the children earlier attempts of the task
// recorded. See [Resume].
type Resumer interface {
	// ResumeChildren returns how many children earlier attempts recorded, ordinals 0 to n-1
	// without a gap, and moves the output past them: the next CreateChild is child n.
	ResumeChildren() int
}

// Resume returns how many children an earlier attempt of this task already recorded and moves out
// past them, so an action whose children come in a deterministic order (an archive's entries)
// skips that many without reading them and resumes where the last attempt stopped. It must be
// called before the first CreateChild; it returns 0 for an output that cannot resume.
func Resume(out Output) int {
	if r, ok := out.(Resumer); ok {
		return r.ResumeChildren()
	}
	return 0
}

// DomainWrite is a write to the tables of a domain — rows a workflow keeps of its own, such as a
// dependency graph's nodes or a file set's files — committed with the task that makes it, like
// its outputs, by the applier the domain registered with the engine.
//
// A write is keyed: Key identifies it among the writes of the same step on the same item in the
// domain, and a replay of the task (after a crash, from the conversion cache, from a remote
// worker) makes the same keys, which the domain's applier does not write twice.
type DomainWrite struct {
	// Domain is the name the domain registered under.
	Domain string
	// Key identifies the write among its step's writes on the item (for example a node's id).
	Key string
	// Payload is the write's content, encoded as JSON when it is recorded: the applier gets the
	// JSON, whether the task ran here, in a remote worker or came from the cache.
	Payload any
}
