package engine

import (
	"slices"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/when"
	"github.com/sluice-project/sluice/internal/workflow"
)

// plan is what the engine derives once from a workflow definition to decide on its items: the
// events each step can fire and which steps can create children.
type plan struct {
	// fires holds, per step, the events it can fire: success, failure and its action's outcomes.
	fires map[string][]string
	// creators are the steps whose action may create children: all but brief ones
	// ([action.Policy.Brief] declares none), and steps of actions the catalog does not know
	// (served remotely).
	creators []*workflow.Step
	// conds are the steps' when: conditions, by step name; a step without one applies to every
	// item.
	conds map[string]*when.Expr
	// waitsFromStart are the steps with a deadline whose needs are all external: they start
	// waiting as the item is created.
	waitsFromStart []*workflow.Step
}

// plan returns the definition's plan, made on first use. Definitions are immutable and cached by
// [Engine.Definition], so a plan is made once per workflow version.
func (e *Engine) plan(def *workflow.Definition) *plan {
	e.mu.RLock()
	p := e.plans[def]
	e.mu.RUnlock()
	if p != nil {
		return p
	}
	p = &plan{fires: make(map[string][]string, len(def.Steps))}
	for _, s := range def.Steps {
		fires := slices.Concat(s.Success, s.Failure)
		spec, known := e.cfg.Catalog.Spec(s.Action)
		if known {
			fires = append(fires, spec.Outcomes...)
			if spec.OutcomesFor != nil {
				fires = append(fires, outcomesFor(spec.OutcomesFor, s.With)...)
			}
		}
		p.fires[s.Name] = fires
		if s.Deadline > 0 && !slices.ContainsFunc(s.Needs, func(n string) bool { return !def.IsExternal(n) }) {
			p.waitsFromStart = append(p.waitsFromStart, s)
		}
		if s.When != "" {
			cond, err := when.Parse(s.When)
			if err != nil {
				// Stored definitions were validated: this is a condition an older version of
				// the language accepted. The step applies rather than silently never running.
				e.log.Error("invalid when: condition; the step applies to every item", "workflow", def.Name, "step", s.Name, "error", err)
			} else {
				if p.conds == nil {
					p.conds = map[string]*when.Expr{}
				}
				p.conds[s.Name] = cond
			}
		}
		if !known || !e.cfg.Catalog.Policy(s.Action).Brief {
			p.creators = append(p.creators, s)
		}
	}
	e.mu.Lock()
	if len(e.plans) > 1000 {
		clear(e.plans) // workflow versions are few; this only bounds a long-lived process
	}
	e.plans[def] = p
	e.mu.Unlock()
	return p
}

// outcomesFor calls an action's OutcomesFor; a panic there (the action's bug, on settings that
// validated) counts as no outcomes.
func outcomesFor(f func(map[string]any) []string, with map[string]any) (out []string) {
	if action.Safe(func() error { out = f(with); return nil }) != nil {
		return nil
	}
	return out
}

// mayCreateChildren reports whether a step of the item that can create children may still run
// without children.done: it has no task yet, and each of its needs has fired or can still fire —
// start, a declared external event, or an event of another step that may still run. Until no
// such step is left, children.done must not fire: a fan-out step waiting for an approval would
// otherwise run beside (or after) the collector, which would see no children.
//
// Steps with a task are settled: it is called only for an item with no ready or running task.
// Steps that need children.done (directly or through other steps) cannot run before it, so
// they do not hold it back: a collector may create children of its own.
func (t *tx) mayCreateChildren(def *workflow.Definition, it *record.Item, has map[string]bool) (bool, error) {
	p := t.e.plan(def)
	pending := false
	for _, s := range p.creators {
		if !has[s.Name] {
			pending = true
			break
		}
	}
	if !pending {
		return false, nil
	}
	// The least fixed point: a step may run once each of its needs is possible, and then its
	// events are. Starting from nothing, so a cycle with no way in stays dead.
	possible := map[string]bool{workflow.EventStart: true}
	for _, e := range def.External {
		possible[e] = true
	}
	live := map[string]bool{}
	var ev map[string]bool
	for changed := true; changed; {
		changed = false
		for _, s := range def.Steps {
			if has[s.Name] || live[s.Name] {
				continue
			}
			ok := true
			for _, n := range s.Needs {
				if possible[n] {
					continue
				}
				if n == workflow.EventChildrenDone || len(s.Needs) == 1 {
					// A step with one need and no task: had that need fired, the task would
					// exist (a running job's task is inserted when its needs are met).
					ok = false
					break
				}
				if ev == nil {
					var err error
					if ev, err = t.itemEvents(it.ID); err != nil {
						return false, err
					}
				}
				if !ev[n] {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			live[s.Name], changed = true, true
			for _, e := range p.fires[s.Name] {
				possible[e] = true
			}
		}
	}
	for _, s := range p.creators {
		if live[s.Name] {
			return true, nil
		}
	}
	return false, nil
}

// decideWhen skips, as the item is created, the steps whose when: condition does not hold for
// it: each gets a task inserted already skipped, which is how the rest of the engine knows
// (settling sees a step with a task as settled; [tx.applies] reads it when the step's needs are
// met). The decision is made once, on the item as it was created, so that it cannot change
// under a step waiting for an event; what a later step learns about the item (detect's content
// type) is routed with outcome events instead.
func (t *tx) decideWhen(def *workflow.Definition, it *record.Item) error {
	p := t.e.plan(def)
	if len(p.conds) == 0 {
		return nil
	}
	view := when.Item{Depth: it.Depth, Name: it.Name, ContentType: it.ContentType,
		Metadata: metadataObject(it.Metadata), Options: jsonObject(it.Options)}
	for _, s := range def.Steps {
		cond := p.conds[s.Name]
		if cond == nil || cond.Eval(view) {
			continue
		}
		t.addTask(store.TaskInsertParams{
			JobID: it.JobID, ItemID: it.ID, Step: s.Name, Action: s.Action, Queue: t.e.Queue(def, s),
			MaxAttempts: s.MaxAttempts(), SortKey: it.SortKey, ProgressWeight: t.e.weight(s), Now: t.now,
			Done: &store.TaskDone{State: record.TaskSkipped},
		})
	}
	return nil
}

// applies reports whether a step with a when: condition applies to the item, that is, whether
// its task was not skipped as the item was created.
func (t *tx) applies(it *record.Item, step string) (bool, error) {
	tasks, err := t.tasksOf(it.ID)
	if err != nil {
		return false, err
	}
	for _, tk := range tasks {
		if tk.Step == step && tk.State == record.TaskSkipped {
			return false, nil
		}
	}
	return true, nil
}
