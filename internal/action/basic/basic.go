// Package basic provides the smallest built-in actions: [NewNoop] (`noop`), which does nothing,
// [NewPass] (`pass`), which does nothing inside the engine's transaction,
// [NewFail] (`fail`), which fails its item with a fixed message, and [NewEmit] (`emit`), which
// fires configured outcome events. They are the glue of workflows — routing, placeholders and
// explicit failures — and the load the engine benchmark measures.
package basic

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-project/sluice/internal/action"
)

// NewNoop returns the `noop` action, which succeeds without doing anything. Its default
// concurrency is 100 because it is what the engine benchmark runs; Run does not allocate.
func NewNoop() action.Action { return noop{} }

type noop struct{}

func (noop) Spec() action.Spec {
	return action.Spec{
		Name:        "noop",
		Version:     "1",
		Doc:         "Does nothing and succeeds; a placeholder, or a join point for events.",
		Concurrency: 1000, // no-ops cost a goroutine each while running; the engine benchmark measures the writer, not this cap
	}
}

// Policy runs noop in held batches, without a temporary directory.
func (noop) Policy() action.Policy { return action.Policy{Brief: true, NoTempDir: true} }

func (noop) Run(context.Context, *action.Task, action.Output) error { return nil }

// NewPass returns the `pass` action, which succeeds without doing anything, inline: the engine
// completes its task in the transaction that makes it ready, with no lease and no worker. It is
// the cheap join point of a workflow (the documents workflow's `final`).
func NewPass() action.Action { return pass{} }

type pass struct{}

func (pass) Spec() action.Spec {
	return action.Spec{
		Name:    "pass",
		Version: "1",
		Doc:     "Does nothing and succeeds, inside the engine's transaction (no task to lease); a join point for events.",
	}
}

// Policy runs pass inline.
func (pass) Policy() action.Policy {
	return action.Policy{Inline: action.InlineAlways, NoTempDir: true}
}

func (pass) Run(context.Context, *action.Task, action.Output) error { return nil }

// NewFail returns the `fail` action, which fails its item with the setting `message` as a
// permanent (not retried) error.
func NewFail() action.Action { return fail{} }

type fail struct{}

func (fail) Spec() action.Spec {
	return action.Spec{
		Name:    "fail",
		Version: "1",
		Doc:     "Fails the item with a fixed message, without retrying.",
		Settings: []action.Setting{
			{Name: "message", Type: action.TypeString, Required: true, Doc: "The error shown on the item."},
		},
		Validate: func(with map[string]any) error {
			_, err := failMessage(with)
			return err
		},
	}
}

// Policy runs fail in held batches, without a temporary directory.
func (fail) Policy() action.Policy { return action.Policy{Brief: true, NoTempDir: true} }

func (fail) Run(_ context.Context, t *action.Task, _ action.Output) error {
	msg, err := failMessage(t.With)
	if err != nil {
		return action.Permanent(err)
	}
	return action.Permanent(errors.New(msg))
}

func failMessage(with map[string]any) (string, error) {
	s, ok := with["message"].(string)
	if !ok || s == "" {
		return "", &action.SettingError{Key: "message", Reason: "must be a non-empty string"}
	}
	return s, nil
}

// NewEmit returns the `emit` action, which succeeds and fires the outcome events listed in the
// setting `events`. Its spec's OutcomesFor returns those events, so a workflow that consumes them
// validates.
func NewEmit() action.Action { return emit{} }

type emit struct{}

func (emit) Spec() action.Spec {
	return action.Spec{
		Name:    "emit",
		Version: "1",
		Doc:     "Fires the configured outcome events and succeeds.",
		Settings: []action.Setting{
			{Name: "events", Type: action.TypeStrings, Required: true, Doc: "The outcome events to fire."},
		},
		OutcomesFor: func(with map[string]any) []string {
			events, _ := emitEvents(with)
			return events
		},
		Validate: func(with map[string]any) error {
			_, err := emitEvents(with)
			return err
		},
	}
}

// Policy runs emit in held batches, without a temporary directory.
func (emit) Policy() action.Policy { return action.Policy{Brief: true, NoTempDir: true} }

func (emit) Run(_ context.Context, t *action.Task, out action.Output) error {
	events, err := emitEvents(t.With)
	if err != nil {
		return action.Permanent(err)
	}
	out.Emit(events...)
	return nil
}

// emitEvents reads the `events` setting, which arrives as []string from Go callers and as []any
// from decoded YAML or JSON.
func emitEvents(with map[string]any) ([]string, error) {
	var events []string
	switch v := with["events"].(type) {
	case []string:
		events = v
	case []any:
		events = make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, &action.SettingError{Key: "events", Reason: fmt.Sprintf("element %d is not a string", i)}
			}
			events[i] = s
		}
	default:
		return nil, &action.SettingError{Key: "events", Reason: "must be a list of event names"}
	}
	if len(events) == 0 {
		return nil, &action.SettingError{Key: "events", Reason: "must name at least one event"}
	}
	for i, e := range events {
		if e == "" {
			return nil, &action.SettingError{Key: "events", Reason: fmt.Sprintf("element %d is empty", i)}
		}
	}
	return events, nil
}
