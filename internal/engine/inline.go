package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// ActionItem is the read-only view of an item that an action receives.
func ActionItem(it *record.Item) action.Item {
	ai := action.Item{ID: it.ID, JobID: it.JobID, ParentID: it.ParentID, RootID: it.RootID, Ordinal: it.Ordinal, Depth: it.Depth,
		Name: it.Name, ContentType: it.ContentType, Size: it.Size, BlobSHA256: it.BlobSHA256, HasText: it.HasText,
		HasThumbnail: it.ThumbnailSHA != "", Error: it.Error, NChildren: it.NChildren}
	ai.Metadata, ai.Options = metadataObject(it.Metadata), jsonObject(it.Options)
	return ai
}

// jsonObject decodes stored options, never nil, numbers as json.Number ([metadata.Decode]):
// options are the user's data as much as metadata is, and an action passes them on (to a
// service, a template, a child), so a 20-digit option must come out as it went in.
func jsonObject(raw []byte) map[string]any { return cachedObject(raw) }

// metadataObject decodes stored metadata, never nil, numbers as json.Number ([metadata.Decode]):
// what an action reads, publishes or passes on comes out as the user gave it.
func metadataObject(raw []byte) map[string]any { return cachedObject(raw) }

// cachedObject decodes a stored JSON object. Most items have no options ("{}"), and the items
// of one job share their options: a flat object is decoded once (a few hundred at most are
// kept) and each caller gets its own copy.
func cachedObject(raw []byte) map[string]any {
	if len(raw) == 0 || string(raw) == "{}" {
		return map[string]any{}
	}
	if len(raw) > 256 {
		return decodeObject(raw)
	}
	key := string(raw)
	objects.Lock()
	m, ok := objects.m[key]
	objects.Unlock()
	if !ok {
		m = decodeObject(raw)
		for _, v := range m {
			switch v.(type) {
			case map[string]any, []any:
				return m // nested: a shallow copy would share it, so it is not kept
			}
		}
		objects.Lock()
		if len(objects.m) >= 512 {
			clear(objects.m)
		}
		objects.m[key] = m
		objects.Unlock()
	}
	return maps.Clone(m)
}

// objects caches small decoded objects by their JSON; the maps in it are never handed out.
var objects = struct {
	sync.Mutex
	m map[string]map[string]any
}{m: map[string]map[string]any{}}

func decodeObject(raw []byte) map[string]any {
	m, err := metadata.Decode(raw)
	if err != nil {
		return map[string]any{}
	}
	return m
}

// inlineAction returns the action of the step and its policy when the engine may run it inline.
func (e *Engine) inlineAction(name string) (action.Action, action.Policy, bool) {
	policy := e.cfg.Catalog.Policy(name)
	if policy.Inline == nil {
		return nil, policy, false
	}
	act, ok := e.cfg.Catalog.Lookup(name)
	return act, policy, ok
}

// runInline runs the step's task on the item inside this transaction when the action's
// [action.Policy.Inline] allows it for the item, and reports whether it did: the task is inserted
// already ended, and its effects are applied at once, as a worker's result would be — so the
// step costs neither a lease nor a commit of its own, and nothing a crash could split. p is the
// task the step would otherwise get.
func (t *tx) runInline(it *record.Item, s *workflow.Step, act action.Action, policy action.Policy, p store.TaskInsertParams) (bool, error) {
	// The cached item is kept in step with state and counters, not with every column a task
	// may have written (metadata is merged by the database): where such a write was made, read
	// the row as it is now.
	view, err := t.itemNow(it)
	if err != nil {
		return false, err
	}
	ai := ActionItem(view)
	if !policy.Inline(ai) {
		return false, nil
	}
	with := s.With
	if with == nil {
		with = map[string]any{}
	}
	at := &action.Task{JobID: it.JobID, Step: s.Name, Action: s.Action, Attempt: 1, Item: ai, With: with,
		OpenBlob: func(context.Context) (io.ReadCloser, error) {
			return nil, fmt.Errorf("%s runs inline and cannot read blobs", s.Action)
		},
		BlobPath: func(context.Context) (string, error) {
			return "", fmt.Errorf("%s runs inline and cannot read blobs", s.Action)
		},
	}
	out := &inlineOutput{action: s.Action, e: t.e}
	runErr, stack := safeInline(t.ctx, act, at, out)
	if runErr == nil {
		runErr = out.err
	}
	task := &record.Task{JobID: it.JobID, ItemID: it.ID, Step: s.Name, Action: s.Action, Queue: p.Queue, Attempt: 1,
		MaxAttempts: p.MaxAttempts, ProgressWeight: p.ProgressWeight, CreatedAt: t.now, StartedAt: t.now}
	pf := pendingFinish{r: &Result{Task: task, Owner: t.e.cfg.Owner, Err: runErr, Stack: stack, Started: t.now}}
	if runErr == nil {
		pf.finish.State = record.TaskComplete
		pf.r.Effects = out.ef
		pf.fire = append(append(pf.fire, s.Success...), out.ef.Events...)
	} else {
		// Nothing an inline action does can go better on a second try: it fails for good.
		pf.finish.State, pf.finish.Error, pf.itemErr = record.TaskFailed, runErr.Error(), runErr.Error()
		pf.fire = append(pf.fire, s.Failure...)
		if action.IsPermanent(runErr) {
			pf.fire = append(pf.fire, out.ef.Events...) // as a worker's permanent failure does
		}
	}
	p.Done = &store.TaskDone{State: pf.finish.State, Error: pf.finish.Error, Worker: t.e.cfg.Owner}
	t.addTask(p)
	return true, t.applyEffects(pf)
}

func safeInline(ctx context.Context, act action.Action, t *action.Task, out action.Output) (err error, stack string) {
	err = action.Safe(func() error { return act.Run(ctx, t, out) })
	if pe := (*action.PanicError)(nil); errors.As(err, &pe) {
		stack = pe.Stack
	}
	return err, stack
}

// errNotInline is what an inline action gets for the writes only a worker can make.
var errNotInline = errors.New("not allowed in an inline action")

// inlineOutput records what an inline action does into the effects of the task's result.
type inlineOutput struct {
	action string
	err    error
	ef     Effects
	e      *Engine
}

func (o *inlineOutput) fail(what string) error {
	err := fmt.Errorf("%s: %s %w", o.action, what, errNotInline)
	if o.err == nil {
		o.err = err
	}
	return err
}

func (o *inlineOutput) CreateChild(context.Context, action.Child) error {
	return o.fail("CreateChild is")
}

func (o *inlineOutput) SetThumbnail(context.Context, io.Reader, string) error {
	return o.fail("SetThumbnail is")
}

func (o *inlineOutput) SetText(_ context.Context, text string) error {
	o.ef.SetText(text)
	return nil
}

func (o *inlineOutput) SetContentType(ct string)      { o.ef.SetContentType(ct) }
func (o *inlineOutput) SetMetadata(md map[string]any) { o.ef.SetMetadata(md) }

func (o *inlineOutput) SetOutput(_ context.Context, kind string, v json.RawMessage) error {
	return o.ef.SetOutput(kind, v)
}

func (o *inlineOutput) Emit(events ...string) { o.ef.Emit(events...) }
func (o *inlineOutput) Progress(float64)      {}
func (o *inlineOutput) Heartbeat()            {}

func (o *inlineOutput) Write(w action.DomainWrite) error {
	dw, err := o.e.EncodeWrite(w)
	if err != nil {
		return err
	}
	o.ef.AddWrite(dw)
	return nil
}
