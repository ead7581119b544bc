package record

import (
	"fmt"
	"slices"
	"strings"
)

// JobState is the state of a [Job] (DESIGN §2, docs/state-machines.md): a job is created
// [JobRunning] and ends exactly once, as [JobComplete] (every item ingested), [JobFailed] (the
// fail event fired) or [JobCanceled]. Only a retry moves an ended job back to running. Its
// text is the wire form: the API, the CLI's JSON and the database hold these words.
type JobState string

// The job states, in the order of their machine.
const (
	JobRunning  JobState = "running"
	JobComplete JobState = "complete"
	JobFailed   JobState = "failed"
	JobCanceled JobState = "canceled"
)

var jobStates = []JobState{JobRunning, JobComplete, JobFailed, JobCanceled}

// JobStates returns every job state in the order of the machine, for counts and menus.
func JobStates() []JobState { return slices.Clone(jobStates) }

// ParseJobState returns the job state named by text, as a user typed it in a filter (?state=,
// --state); an error names the states there are.
func ParseJobState(text string) (JobState, error) { return parse("a job", text, jobStates) }

// TaskState is the state of a [Task] (DESIGN §2, docs/state-machines.md). A task row is created
// when its step becomes ready, so [TaskBlocked] and [TaskSkipped] mostly have no row: the
// exceptions are a collector of an item a retry reopened (back to blocked until the item's
// children are done again) and a step whose when: did not hold or whose deadline passed
// (inserted skipped). A ready task is leased to running, with its attempt counted; a running one
// ends complete or failed, goes back to ready (a retry or a snooze), or parks on a claim. Every
// transition is a guarded UPDATE … WHERE state = <from>, so replaying it is a no-op.
type TaskState string

// The task states, in the order of their machine.
const (
	TaskBlocked TaskState = "blocked"
	TaskReady   TaskState = "ready"
	TaskRunning TaskState = "running"
	// TaskParked is the state of a task waiting for another task's claim on its key: it holds
	// no lease and is not leased, and goes back to ready when the claim is finished. It keeps
	// its item open like a ready task.
	TaskParked   TaskState = "parked"
	TaskComplete TaskState = "complete"
	TaskFailed   TaskState = "failed"
	TaskSkipped  TaskState = "skipped"
	TaskCanceled TaskState = "canceled"
)

var taskStates = []TaskState{TaskBlocked, TaskReady, TaskRunning, TaskParked, TaskComplete, TaskFailed, TaskSkipped, TaskCanceled}

// TaskStates returns every task state in the order of the machine, for counts and menus.
func TaskStates() []TaskState { return slices.Clone(taskStates) }

// Active reports whether a task in s holds its item open: ready, running or parked (a blocked
// task waits for events that may never come, and is not counted).
func (s TaskState) Active() bool { return s == TaskReady || s == TaskRunning || s == TaskParked }

// ParseTaskState returns the task state named by text, as a user typed it in a filter; an error
// names the states there are.
func ParseTaskState(text string) (TaskState, error) { return parse("a task", text, taskStates) }

// ItemState is the state of an [Item] (DESIGN §2, docs/state-machines.md). Rows are inserted
// [ItemWritten] (the blob is durable first, so none stays [ItemCreated]); an item moves to
// [ItemProcessed] when none of its tasks can run any more, and to [ItemIngested] when every
// child is ingested too. Only a retry moves an item back (to written, or to processed when a
// descendant is open again).
type ItemState string

// The item states, in the order of their machine.
const (
	ItemCreated   ItemState = "created"
	ItemWritten   ItemState = "written"
	ItemProcessed ItemState = "processed"
	ItemIngested  ItemState = "ingested"
)

var itemStates = []ItemState{ItemCreated, ItemWritten, ItemProcessed, ItemIngested}

// ItemStates returns every item state in the order of the machine, for counts and menus.
func ItemStates() []ItemState { return slices.Clone(itemStates) }

// ParseItemState returns the item state named by text, as a user typed it in a filter; an error
// names the states there are.
func ParseItemState(text string) (ItemState, error) { return parse("an item", text, itemStates) }

// parse returns the state of states named by text; the error quotes at most 40 bytes of text,
// which is user input.
func parse[S ~string](kind, text string, states []S) (S, error) {
	if i := slices.Index(states, S(text)); i >= 0 {
		return states[i], nil
	}
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	if len(text) > 40 {
		text = text[:40] + "…"
	}
	return "", fmt.Errorf("%q is not %s state: one of %s", text, kind, strings.Join(names, ", "))
}
