package engine

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// Publisher records the messages that workflows' publish rules ([workflow.PublishRule]) select,
// in the transaction that commits what they report — a task's end, an event first fired on an
// item — so a message exists if and only if its fact does (the transactional outbox; see
// internal/outbox).
type Publisher interface {
	// Publish records the publications with the transaction's SQL. It must be keyed: recording
	// a publication twice changes nothing. An error fails the transaction.
	Publish(ctx context.Context, x store.DomainSQL, ps []Publication) error
	// Committed is called, without blocking, after a transaction that recorded publications
	// committed.
	Committed()
}

// Publication is one message a publish rule selected.
type Publication struct {
	Rule *workflow.PublishRule
	// RuleIndex is the rule's index in its step's (or, for an event, the workflow's) list.
	RuleIndex       int
	Workflow        string
	WorkflowVersion int
	JobID           int64
	JobKey          string
	ItemID          int64
	ItemName        string
	// Metadata is the item's metadata with the task's own writes merged over it.
	Metadata map[string]any
	// Step and Action are the task's; empty for an event.
	Step, Action string
	// Outcome is [workflow.OutcomeComplete] or [workflow.OutcomeFailed] for a task, the event's
	// name for an event.
	Outcome string
	Event   bool
	Attempt int
	// Error is the item's error for a failed task.
	Error   string
	Outputs map[string]json.RawMessage
}

// SetPublisher sets the publisher of the messages workflows' publish rules select. Call it before
// workers start. Without one, publish rules are ignored.
func (e *Engine) SetPublisher(p Publisher) {
	e.mu.Lock()
	e.publisher = p
	e.mu.Unlock()
}

func (e *Engine) getPublisher() Publisher {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.publisher
}

// publishTask queues the publications of a task that completed or failed for good.
func (t *tx) publishTask(it *record.Item, task *record.Task, state record.TaskState, itemErr string, r *Result) error {
	if t.e.getPublisher() == nil {
		return nil
	}
	def, job, err := t.def(task.JobID)
	if err != nil {
		return err
	}
	s := def.Step(task.Step)
	if s == nil || len(s.Publish) == 0 {
		return nil
	}
	outcome := workflow.OutcomeComplete
	if state == record.TaskFailed {
		outcome = workflow.OutcomeFailed
	}
	for i := range s.Publish {
		rule := &s.Publish[i]
		if !rule.Selects(outcome) {
			continue
		}
		md := metadataObject(it.Metadata)
		maps.Copy(md, r.Metadata)
		t.pubs = append(t.pubs, Publication{Rule: rule, RuleIndex: i, Workflow: def.Name, WorkflowVersion: job.WorkflowVersion,
			JobID: job.ID, JobKey: job.Key, ItemID: it.ID, ItemName: it.Name, Metadata: md, Step: s.Name, Action: s.Action,
			Outcome: outcome, Attempt: task.Attempt, Error: itemErr, Outputs: r.Outputs})
	}
	return nil
}

// publishEvent queues the publications of an event fired on an item for the first time.
func (t *tx) publishEvent(def *workflow.Definition, job *record.Job, it *record.Item, event string) error {
	if len(def.Publish) == 0 || t.e.getPublisher() == nil {
		return nil
	}
	// A task of this transaction may have merged metadata into the row: read it as it is now.
	it, err := t.itemNow(it)
	if err != nil {
		return err
	}
	for i := range def.Publish {
		rule := &def.Publish[i]
		if len(rule.On) == 0 || !rule.Selects(event) {
			continue
		}
		t.pubs = append(t.pubs, Publication{Rule: rule, RuleIndex: i, Workflow: def.Name, WorkflowVersion: job.WorkflowVersion,
			JobID: job.ID, JobKey: job.Key, ItemID: it.ID, ItemName: it.Name, Metadata: metadataObject(it.Metadata),
			Outcome: event, Event: true, Error: it.Error})
	}
	return nil
}

// flushPublications hands the queued publications to the publisher, in the transaction.
func (t *tx) flushPublications() error {
	if len(t.pubs) == 0 {
		return nil
	}
	t.published = true
	ps := t.pubs
	t.pubs = nil
	return t.e.getPublisher().Publish(t.ctx, t.x.DomainSQL(), ps)
}
