package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Domain is the store of a workflow's own rows (a graph's nodes, a file set's files, an ingest
// sheet's works): its tables, created by its own migrations, and the applier of the writes its
// actions make ([action.DomainWrite]), run inside the transaction that completes their task.
// A domain writes SQL of its own per dialect, as a store driver does, and only through the
// [store.DomainSQL] it is handed.
type Domain interface {
	// Migrations returns the domain's schema migrations in the dialect, numbered from 1 with the
	// same numbers in every dialect; [Engine.RegisterDomain] applies those not yet applied.
	Migrations(d store.Dialect) []store.DomainMigration
	// Apply makes the writes, in order, in the transaction of the task that made them; a task's
	// many writes come in several calls, in order, in the same transaction. It must
	// be keyed: a write whose (item, step, key) it has written before changes nothing (a task's
	// result may be replayed), at the database level (a unique key and ON CONFLICT DO NOTHING).
	// An error fails the task for good (see [FailedCommit]) unless it wraps store.ErrRetry.
	Apply(ctx context.Context, x store.DomainSQL, ws []DomainWrite) error
}

// DomainWrite is an [action.DomainWrite] as its domain's applier gets it: the payload as JSON,
// and the task that made it.
type DomainWrite struct {
	Domain  string
	Key     string
	Payload json.RawMessage
	JobID   int64
	ItemID  int64
	Step    string
	// TaskID is the task's id; 0 for an inline step (its row is inserted with its effects).
	TaskID  int64
	Attempt int

	// spilled, when set, makes this entry of [Effects.Writes] stand for the writes of a segment
	// of a spill file; its other fields are empty. Only [Effects.AddWrite] makes one.
	spilled *spillSegment
	// spillDir is the engine's [Config.TempDir], set by [Engine.EncodeWrite]: where an Effects
	// that holds the write makes its spill file.
	spillDir string
}

// RegisterDomain registers a domain under name and applies its migrations not yet applied to
// the engine's store. Call it before workers start; registering a name twice panics (a wiring
// mistake).
func (e *Engine) RegisterDomain(ctx context.Context, name string, d Domain) error {
	e.mu.Lock()
	if e.domains == nil {
		e.domains = map[string]Domain{}
	}
	if _, dup := e.domains[name]; dup {
		e.mu.Unlock()
		panic(fmt.Sprintf("engine: domain %q registered twice", name))
	}
	e.domains[name] = d
	if dr, ok := d.(DomainReader); ok {
		if e.queries == nil {
			e.queries = map[string]map[string]ReadQuery{}
		}
		e.queries[name] = dr.ReadQueries()
	}
	e.mu.Unlock()
	if _, err := e.store.MigrateDomain(ctx, name, d.Migrations(e.store.DomainSQL().Dialect())); err != nil {
		return fmt.Errorf("register domain %q: %w", name, err)
	}
	return nil
}

func (e *Engine) domain(name string) (Domain, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	d, ok := e.domains[name]
	return d, ok
}

// EncodeWrite checks an action's write against the registered domains and encodes its payload,
// for a result to carry ([Result.Writes]).
func (e *Engine) EncodeWrite(w action.DomainWrite) (DomainWrite, error) {
	if _, ok := e.domain(w.Domain); !ok {
		return DomainWrite{}, fmt.Errorf("write %q to domain %q: no such domain is registered", w.Key, w.Domain)
	}
	if w.Key == "" {
		return DomainWrite{}, fmt.Errorf("write to domain %q: empty key", w.Domain)
	}
	payload, err := json.Marshal(w.Payload)
	if err != nil {
		return DomainWrite{}, fmt.Errorf("write %q to domain %q: %w", w.Key, w.Domain, err)
	}
	return DomainWrite{Domain: w.Domain, Key: w.Key, Payload: payload, spillDir: e.cfg.TempDir}, nil
}

// applyWrites hands a completed task's writes to their domains, in order, a run of writes to one
// domain at a time, and a long run in batches of about [applyBatchBytes]. Writes the task's
// Effects moved to their spill file are read back from it here, a batch at a time.
func (t *tx) applyWrites(task *record.Task, ws []DomainWrite) error {
	var run []DomainWrite
	size := 0
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		name := run[0].Domain
		d, ok := t.e.domain(name)
		if !ok {
			return fmt.Errorf("task %d writes to domain %q: no such domain is registered", task.ID, name)
		}
		if err := d.Apply(t.ctx, t.x.DomainSQL(), run); err != nil {
			return fmt.Errorf("task %d: domain %q: %w", task.ID, name, err)
		}
		run, size = nil, 0 // a new slice for the next batch: Apply may have kept this one
		return nil
	}
	add := func(w DomainWrite) error {
		if len(run) > 0 && (run[0].Domain != w.Domain || size >= applyBatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		w.JobID, w.ItemID, w.Step, w.TaskID, w.Attempt = task.JobID, task.ItemID, task.Step, task.ID, task.Attempt
		run = append(run, w)
		size += len(w.Payload)
		return nil
	}
	for _, w := range ws {
		if w.spilled == nil {
			if err := add(w); err != nil {
				return err
			}
			continue
		}
		var applyErr error
		err := w.spilled.each(func(w DomainWrite) error { applyErr = add(w); return applyErr })
		if applyErr != nil {
			return applyErr
		}
		if err != nil {
			return fmt.Errorf("task %d: %w", task.ID, err)
		}
	}
	return flush()
}

// OutputFollower is implemented by a domain whose rows follow the outputs tasks record (the
// search index follows the documents). OutputsRecorded is called once at the end of each
// transaction that recorded outputs, with all of them in the order they were recorded (after
// every result and inline step of the transaction, so the items' rows are as it leaves them),
// replays included: it must change nothing for an output it has followed before. Its error is
// the commit's, as the outputs' own writes' would be.
type OutputFollower interface {
	OutputsRecorded(ctx context.Context, x store.DomainSQL, os []store.OutputPutParams) error
}

// followOutputs hands the outputs recorded in the transaction to the registered domains that
// follow outputs, in one call each.
func (t *tx) followOutputs() error {
	if len(t.recorded) == 0 {
		return nil
	}
	os := t.recorded
	t.recorded = nil
	t.e.mu.RLock()
	var names []string
	for name, d := range t.e.domains {
		if _, ok := d.(OutputFollower); ok {
			names = append(names, name)
		}
	}
	t.e.mu.RUnlock()
	slices.Sort(names) // one order on every run
	for _, name := range names {
		d, _ := t.e.domain(name)
		if err := d.(OutputFollower).OutputsRecorded(t.ctx, t.x.DomainSQL(), os); err != nil {
			return fmt.Errorf("%d outputs: domain %q: %w", len(os), name, err)
		}
	}
	return nil
}

// BlobReferencer is implemented by a domain whose rows reference blobs (a preservation copy, a
// derivative), so that the blob collector keeps them: a blob is garbage only when neither the
// engine's rows nor any domain's reference it.
type BlobReferencer interface {
	// BlobReferenced reports whether a row of the domain references the blob.
	BlobReferenced(ctx context.Context, x store.DomainSQL, sha256 string) (bool, error)
}

// BlobReferenced reports whether a row of the store, or of a registered domain that implements
// [BlobReferencer], references the blob: the blob collector's question.
func (e *Engine) BlobReferenced(ctx context.Context, sha256 string) (bool, error) {
	if ok, err := e.store.BlobIsReferenced(ctx, sha256); ok || err != nil {
		return ok, err
	}
	e.mu.RLock()
	var refs []BlobReferencer
	for _, d := range e.domains {
		if r, ok := d.(BlobReferencer); ok {
			refs = append(refs, r)
		}
	}
	e.mu.RUnlock()
	for _, r := range refs {
		if ok, err := r.BlobReferenced(ctx, e.store.DomainSQL(), sha256); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}
