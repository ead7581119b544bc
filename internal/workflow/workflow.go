// Package workflow defines workflows as data: named, versioned sets of steps wired by events
// (a Petri net over each item, DESIGN §3). It parses YAML and JSON definitions, validates them
// against the catalog of actions with messages that name the step, the field and the line, and
// renders them as DOT and SVG.
package workflow

import (
	"slices"
	"time"
)

// Built-in event names with engine-defined meaning.
const (
	EventStart        = "start"         // fired when an item is created
	EventChildrenDone = "children.done" // fired once the item's tasks are finished and every child is processed
	EventFail         = "fail"          // marks the job failed
	EventOK           = "ok"            // a readable no-op
)

// Definition is one workflow version as the engine uses it. A stored Definition is immutable.
type Definition struct {
	Name     string   `json:"name"`
	External []string `json:"external,omitempty"`
	// Publish lists rules that publish events fired on items (see [PublishRule]).
	Publish []PublishRule `json:"publish,omitempty"`
	// Steps in the order they appear in the source.
	Steps []*Step `json:"steps"`

	pos *defPos // source positions, set by Parse; nil for definitions built in Go
}

// Step is an action placed in a workflow.
type Step struct {
	Name   string   `json:"name"`
	Action string   `json:"action"`
	Needs  []string `json:"needs"`
	// When is the step's condition (package when): the step applies only to the items for
	// which it holds; for the others its task is skipped as the item is created, and it never
	// fires its events. Empty means every item.
	When    string         `json:"when,omitempty"`
	Success []string       `json:"success,omitempty"`
	Failure []string       `json:"failure,omitempty"`
	With    map[string]any `json:"with,omitempty"`
	// Concurrency limits tasks of this step running at once in one process; 0 means the action's default.
	Concurrency int `json:"concurrency,omitempty"`
	// Deadline bounds how long the step waits for the external events it needs, from the moment
	// its other needs have all fired; when it passes, the step is skipped with a deadline error
	// (the item's error) and fires its failure events. 0 means it waits as long as it takes.
	Deadline Duration `json:"deadline,omitempty"`
	// Claim, when set, makes the step's tasks claim a key or park until its claimer finishes
	// (see [Claim]).
	Claim *Claim `json:"claim,omitempty"`
	// Limit, when set, bounds the step's tasks per key across processes (see [Limit]).
	Limit *Limit `json:"limit,omitempty"`
	// Correlate maps an external event the step needs to how its body finds the items it
	// fires on and what of it lands in their metadata (see [Correlation]).
	Correlate map[string]*Correlation `json:"correlate,omitempty"`
	// Timeout is the per-attempt timeout; 0 means the action's default.
	Timeout Duration `json:"timeout,omitempty"`
	// Attempts bounds attempts (crashes, timeouts, transient errors); 0 means 3.
	Attempts int `json:"attempts,omitempty"`
	// ProgressWeight is the share of the item's progress colored when the task completes; nil means the action's default.
	ProgressWeight *float64 `json:"progress_weight,omitempty"`
	// Publish lists rules that publish the step's outcomes (see [PublishRule]).
	Publish []PublishRule `json:"publish,omitempty"`
	// Line is the source line of the step's key, for messages. Not part of the definition's identity.
	Line int `json:"-"`

	pos *stepPos // source positions of fields, set by Parse
}

// DefaultAttempts is the attempt bound of a step that does not set one.
const DefaultAttempts = 3

// MaxAttempts returns the step's attempt bound.
func (s *Step) MaxAttempts() int {
	if s.Attempts > 0 {
		return s.Attempts
	}
	return DefaultAttempts
}

// Duration is a time.Duration that reads and writes as a Go duration string ("30s").
type Duration time.Duration

// Step returns the named step, or nil.
func (d *Definition) Step(name string) *Step {
	for _, s := range d.Steps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// IsExternal reports whether event is declared external.
func (d *Definition) IsExternal(event string) bool {
	for _, e := range d.External {
		if e == event {
			return true
		}
	}
	return false
}

// Consumers returns the steps whose needs include event, in source order.
func (d *Definition) Consumers(event string) []*Step {
	var out []*Step
	for _, s := range d.Steps {
		for _, n := range s.Needs {
			if n == event {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// used reports whether anything uses event: a step that needs it, or a workflow-level
// publish: rule that publishes it. An event only published is not an unused one.
func (d *Definition) used(event string) bool {
	if len(d.Consumers(event)) > 0 {
		return true
	}
	for _, r := range d.Publish {
		if slices.Contains(r.On, event) {
			return true
		}
	}
	return false
}

// NeedsChildrenDone reports whether any step waits for children.done.
func (d *Definition) NeedsChildrenDone() bool { return len(d.Consumers(EventChildrenDone)) > 0 }
