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
	"github.com/sluice-project/sluice/internal/action/settings"
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
		Name:     "fail",
		Version:  "1",
		Doc:      "Fails the item with a fixed message, without retrying.",
		Settings: failSettings.Settings(),
		Validate: failSettings.Validate,
	}
}

var failSettings = settings.For(nil, func(c *struct {
	Message string `with:"message" required:"true" doc:"The error shown on the item."`
}) error {
	if c.Message == "" {
		return &action.SettingError{Key: "message", Reason: "must be a non-empty string"}
	}
	return nil
})

// Policy runs fail in held batches, without a temporary directory.
func (fail) Policy() action.Policy { return action.Policy{Brief: true, NoTempDir: true} }

func (fail) Run(_ context.Context, t *action.Task, _ action.Output) error {
	c, err := failSettings.Run(t.With)
	if err != nil {
		return err
	}
	return action.Permanent(errors.New(c.Message))
}

// NewEmit returns the `emit` action, which succeeds and fires the outcome events listed in the
// setting `events`. Its spec's OutcomesFor returns those events, so a workflow that consumes them
// validates.
func NewEmit() action.Action { return emit{} }

type emit struct{}

func (emit) Spec() action.Spec {
	return action.Spec{
		Name:     "emit",
		Version:  "1",
		Doc:      "Fires the configured outcome events and succeeds.",
		Settings: emitSettings.Settings(),
		OutcomesFor: func(with map[string]any) []string {
			c, _ := emitSettings.Parse(with)
			return c.Events
		},
		Validate: emitSettings.Validate,
	}
}

// Policy runs emit in held batches, without a temporary directory.
func (emit) Policy() action.Policy { return action.Policy{Brief: true, NoTempDir: true} }

func (emit) Run(_ context.Context, t *action.Task, out action.Output) error {
	c, err := emitSettings.Run(t.With)
	if err != nil {
		return err
	}
	out.Emit(c.Events...)
	return nil
}

// emitSettings are the emit action's: the events, each named.
var emitSettings = settings.For(nil, func(c *struct {
	Events []string `with:"events" required:"true" doc:"The outcome events to fire."`
}) error {
	if len(c.Events) == 0 {
		return &action.SettingError{Key: "events", Reason: "must name at least one event"}
	}
	for i, e := range c.Events {
		if e == "" {
			return &action.SettingError{Key: "events", Reason: fmt.Sprintf("element %d is empty", i)}
		}
	}
	return nil
})
