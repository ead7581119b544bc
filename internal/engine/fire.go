package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// FireParams fires a declared external event on items of a job, chosen by one of: ItemID; Key
// and Value (the items whose metadata holds Key with that value); or, with neither, the Body
// through the correlations the workflow's steps declare for the event (correlate:).
type FireParams struct {
	JobID  int64
	Event  string
	ItemID int64
	Key    string
	Value  json.RawMessage // JSON: a string, a number or a boolean
	// Body is the event's payload (JSON), optional with ItemID or Key. The metadata the
	// correlations declare is read from it and merged into each item's metadata as the event
	// fires on it (keys the item has already are kept; nothing lands where the event had fired).
	Body json.RawMessage
}

// Fired is what [Engine.Fire] did.
type Fired struct {
	Items []int64 // the items the event was fired on, fired before or not
	Fired int     // how many of them had not had it yet
}

// ErrNoCorrelation is returned by [Engine.Fire] for a body alone when no step of the workflow
// says how the event correlates.
var ErrNoCorrelation = errors.New("no step declares how the event correlates (correlate:)")

// NoMatchError is returned by [Engine.Fire] when a metadata key and value, or a body, select no
// item of the job: nothing fired, and the caller most likely mistyped the key. Waiting names the
// items that wait for the event and the keys they may be sent by.
type NoMatchError struct {
	JobID   int64
	Event   string
	Waiting []WaitingItem // at most [maxWaitingListed]
}

// WaitingItem is an item waiting for an external event, with its correlation keys
// ([CorrelationKeys]).
type WaitingItem struct {
	ID   int64    `json:"id"`
	Name string   `json:"name"`
	Keys []string `json:"keys"`
}

func (e *NoMatchError) Error() string {
	if len(e.Waiting) == 0 {
		return fmt.Sprintf("no item of job %d matches the event %q, and none waits for it", e.JobID, e.Event)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no item of job %d matches the event %q; the items waiting for it are", e.JobID, e.Event)
	for i, w := range e.Waiting {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " item %d", w.ID)
		if len(w.Keys) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(w.Keys, ", "))
		}
	}
	return b.String()
}

// maxWaitingListed bounds the waiting items a [NoMatchError] lists.
const maxWaitingListed = 20

// WaitingFor returns the open items of the job with a step that needs the external event, which
// has not fired on them, and that has not run: the items the event may be sent to. It reads at
// most limit open items.
func (e *Engine) WaitingFor(ctx context.Context, jobID int64, event string, limit int) ([]WaitingItem, error) {
	job, err := e.store.JobGet(ctx, jobID)
	if err != nil {
		return nil, err
	}
	def, _, err := e.Definition(ctx, job.WorkflowName, job.WorkflowVersion)
	if err != nil {
		return nil, err
	}
	var needing []string // the steps that need the event
	for _, s := range def.Steps {
		if slices.Contains(s.Needs, event) {
			needing = append(needing, s.Name)
		}
	}
	if len(needing) == 0 {
		return nil, nil
	}
	open, err := e.store.ItemList(ctx, store.ItemListParams{JobID: jobID, States: []record.ItemState{record.ItemWritten}, Limit: limit})
	if err != nil {
		return nil, err
	}
	var out []WaitingItem
	for _, it := range open {
		fired, err := e.store.EventListByItem(ctx, it.ID)
		if err != nil {
			return nil, err
		}
		if slices.Contains(fired, event) {
			continue
		}
		tasks, err := e.store.TaskListByItem(ctx, it.ID)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(needing, func(step string) bool {
			return !slices.ContainsFunc(tasks, func(t *record.Task) bool { return t.Step == step })
		}) {
			out = append(out, WaitingItem{ID: it.ID, Name: it.Name, Keys: CorrelationKeys(it.Metadata)})
		}
	}
	return out, nil
}

// CorrelationKeys turns an item's stored metadata into the key=value lines an event may be sent
// by, sorted: the values that are a string, a number or a boolean, written as `sluice event fire
// --key` and the job page read them back (a string that reads as JSON, "01234" aside, is quoted).
func CorrelationKeys(md []byte) []string {
	m, err := metadata.Decode(md)
	if err != nil {
		return nil
	}
	var keys []string
	for k, v := range m {
		switch v := v.(type) {
		case string:
			if json.Valid([]byte(v)) {
				q, _ := json.Marshal(v)
				v = string(q)
			}
			keys = append(keys, k+"="+v)
		case json.Number, bool:
			keys = append(keys, fmt.Sprintf("%s=%v", k, v))
		}
	}
	sort.Strings(keys)
	return keys
}

// fireBatch bounds the items fired on in one transaction.
const fireBatch = 500

// Fire fires an external event on the items of a job that p selects (see [FireParams]).
// Repeats are harmless (DESIGN §3); a key and value, or a body, that select no item fire nothing
// and return a [*NoMatchError] naming the items that wait for the event.
func (e *Engine) Fire(ctx context.Context, p FireParams) (*Fired, error) {
	job, err := e.store.JobGet(ctx, p.JobID)
	if err != nil {
		return nil, err
	}
	def, _, err := e.Definition(ctx, job.WorkflowName, job.WorkflowVersion)
	if err != nil {
		return nil, err
	}
	if !def.IsExternal(p.Event) {
		return nil, fmt.Errorf("%w: %q (workflow %q declares %v)", ErrUnknownEvent, p.Event, def.Name, def.External)
	}
	var body any
	if len(p.Body) > 0 {
		if err := metadata.Unmarshal(p.Body, &body); err != nil {
			return nil, fmt.Errorf("event body is not JSON: %w", err)
		}
	}
	corrs := def.Correlations(p.Event)
	// landing is the metadata every correlation of the event reads from the body.
	landing := func(cs []*workflow.Correlation) map[string]any {
		md := map[string]any{}
		for _, c := range cs {
			for k, path := range c.Metadata {
				if v, ok := workflow.PathValue(body, path); ok {
					if _, set := md[k]; !set {
						md[k] = v
					}
				}
			}
		}
		return md
	}
	targets := map[int64]map[string]any{}
	var order []int64
	add := func(id int64, md map[string]any) {
		if cur, ok := targets[id]; ok {
			for k, v := range md {
				if _, set := cur[k]; !set {
					cur[k] = v
				}
			}
			return
		}
		targets[id] = maps.Clone(md)
		order = append(order, id)
	}
	byMetadata := func(key string, value []byte, md map[string]any) error {
		var after int64
		for {
			items, err := e.store.ItemListByMetadata(ctx, store.ItemMetadataParams{JobID: p.JobID, Key: key, Value: value, AfterID: after, Limit: 1000})
			if err != nil {
				return err
			}
			for _, it := range items {
				add(it.ID, md)
			}
			if len(items) < 1000 {
				return nil
			}
			after = items[len(items)-1].ID
		}
	}
	switch {
	case p.ItemID != 0:
		it, err := e.store.ItemGet(ctx, p.ItemID)
		if err != nil || it.JobID != p.JobID {
			return nil, fmt.Errorf("item %d of job %d: %w", p.ItemID, p.JobID, store.ErrNotFound)
		}
		add(it.ID, landing(corrs))
	case p.Key != "":
		if err := byMetadata(p.Key, p.Value, landing(corrs)); err != nil {
			return nil, err
		}
	case body != nil:
		if len(corrs) == 0 {
			return nil, fmt.Errorf("%w: %q in workflow %q", ErrNoCorrelation, p.Event, def.Name)
		}
		for _, c := range corrs {
			v, ok := workflow.PathValue(body, c.Path)
			if !ok {
				continue
			}
			switch v.(type) {
			case string, json.Number, bool:
			default:
				continue // an object or a list correlates with nothing
			}
			raw, _ := json.Marshal(v)
			if err := byMetadata(c.Key, raw, landing([]*workflow.Correlation{c})); err != nil {
				return nil, err
			}
		}
	default:
		return nil, errors.New("fire: give an item, a metadata key and value, or a body")
	}
	if len(order) == 0 {
		// A key or a body that selects nothing is a mistake to show, not a harmless repeat.
		waiting, err := e.WaitingFor(ctx, p.JobID, p.Event, 200)
		if err != nil {
			return nil, err
		}
		return nil, &NoMatchError{JobID: p.JobID, Event: p.Event, Waiting: waiting[:min(len(waiting), maxWaitingListed)]}
	}
	out := &Fired{Items: order}
	for start := 0; start < len(order); start += fireBatch {
		batch := order[start:min(start+fireBatch, len(order))]
		fired := 0
		err := e.Run(ctx, func(t *Tx) error {
			fired = 0
			if err := t.t.lockItems(batch); err != nil {
				return err
			}
			for _, id := range batch {
				n, err := t.t.fireExternal(id, p.Event, targets[id])
				if err != nil {
					return err
				}
				fired += n
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out.Fired += fired
	}
	return out, nil
}

// fireExternal fires event on the item unless it fired already, first merging md into its
// metadata; it returns 1 when it fired.
func (t *tx) fireExternal(itemID int64, event string, md map[string]any) (int, error) {
	it, err := t.item(itemID)
	if err != nil {
		return 0, err
	}
	ev, err := t.itemEvents(itemID)
	if err != nil {
		return 0, err
	}
	if ev[event] {
		return 0, nil
	}
	if len(md) > 0 {
		raw, err := json.Marshal(md)
		if err != nil {
			return 0, fmt.Errorf("event metadata: %w", err)
		}
		if err := t.x.ItemUpdate(t.ctx, store.ItemUpdateParams{ID: it.ID, Metadata: raw}); err != nil {
			return 0, err
		}
		t.stale[it.ID] = true
	}
	return 1, t.fire(it, event)
}
