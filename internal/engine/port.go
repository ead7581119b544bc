package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Reads is the read port of one task: what its action reads beyond the task itself — the core's
// records of the task's job, its domain's rows, the blob store — scoped to that job: no method
// reads another job's items, and a domain query gets the job of the task, not one the action
// names. The runner of a task hands it to the action in the context ([WithReads], [ReadsOf]): in
// process the engine serves it ([Engine.TaskReads]); in a remote worker it is HTTP calls to the
// server that leased the task (internal/workerproto), which serves them through the same
// [Engine.TaskReads]. So an action that reads only through its port runs in either place.
type Reads interface {
	// ItemSteps returns every step of the job's workflow with the item's task state at each
	// (see [Engine.ItemSteps]).
	ItemSteps(ctx context.Context, itemID int64) ([]ItemStep, error)
	// JobItems returns up to limit items of the job in tree order, those after the sort key
	// after ("" for the first).
	JobItems(ctx context.Context, after string, limit int) ([]*record.Item, error)
	// StepChildren returns the children the step named step made of item parent, in ordinal
	// order; none when parent is not an item of the job.
	StepChildren(ctx context.Context, parent int64, step string) ([]*record.Item, error)
	// Query runs the read query name of the domain ([DomainReader]) for the job and stores its
	// answer in out, a pointer to the query's result type. A missing row is an error wrapping
	// store.ErrNotFound, as the query returned it.
	Query(ctx context.Context, domain, name string, args, out any) error
	// Blobs is the blob store of the task's blobs. A remote port serves Put and Stat (and Open
	// of a blob the job references); its Delete and Walk fail.
	Blobs() blob.Store
}

type readsKey struct{}

// WithReads returns ctx carrying the task's read port, for its action.
func WithReads(ctx context.Context, r Reads) context.Context {
	return context.WithValue(ctx, readsKey{}, r)
}

// ErrNoReads is the error of [ReadsOf] on a context that carries no read port: an action run by
// a runner that passes none (an inline run, which reads nothing but its item).
var ErrNoReads = errors.New("no read port in the task's context (an inline run reads nothing beyond its item)")

// ReadsOf returns the read port the task's runner passed its action in ctx.
func ReadsOf(ctx context.Context) (Reads, error) {
	if r, ok := ctx.Value(readsKey{}).(Reads); ok && r != nil {
		return r, nil
	}
	return nil, ErrNoReads
}

// Query runs the read query name of the domain through the task's read port in ctx and returns
// its answer: the typed form of [Reads.Query].
func Query[R any](ctx context.Context, domain, name string, args any) (R, error) {
	var out R
	r, err := ReadsOf(ctx)
	if err != nil {
		return out, err
	}
	err = r.Query(ctx, domain, name, args, &out)
	return out, err
}

// DomainReader is implemented by a domain whose actions read its rows through their task's read
// port: its read queries, by name. A query gets the job of the task it runs for; it must read
// nothing of another job that the job's action should not see (rows shared across jobs by
// design — a graph's package versions, the results of earlier requests — are the domain's to
// share). ReadQueries is called once, as the domain registers.
type DomainReader interface {
	ReadQueries() map[string]ReadQuery
}

// ReadQuery is one read query of a domain; make it with [NewReadQuery]. In process it is called
// with its arguments as they are; over the worker protocol its arguments and answer travel as
// JSON.
type ReadQuery struct {
	run    func(ctx context.Context, x store.DomainSQL, jobID int64, args any) (any, error)
	decode func(raw json.RawMessage) (any, error)
	assign func(out, v any) bool
}

// NewReadQuery returns the read query fn, whose arguments are an A and whose answer an R.
func NewReadQuery[A, R any](fn func(ctx context.Context, x store.DomainSQL, jobID int64, args A) (R, error)) ReadQuery {
	return ReadQuery{
		run: func(ctx context.Context, x store.DomainSQL, jobID int64, args any) (any, error) {
			a, ok := args.(A)
			if !ok {
				var zero A
				return nil, fmt.Errorf("arguments are a %T, not a %T", args, zero)
			}
			return fn(ctx, x, jobID, a)
		},
		decode: func(raw json.RawMessage) (any, error) {
			var a A
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, err
			}
			return a, nil
		},
		assign: func(out, v any) bool {
			p, ok := out.(*R)
			if ok {
				*p = v.(R)
			}
			return ok
		},
	}
}

// MaxReadArgs bounds the JSON arguments of one read query from a remote worker.
const MaxReadArgs = 1 << 20

// TaskReads returns the read port of a task of the job, served by the engine, with blobs as its
// blob store.
func (e *Engine) TaskReads(jobID int64, blobs blob.Store) Reads {
	return &taskReads{e: e, jobID: jobID, blobs: blobs}
}

type taskReads struct {
	e     *Engine
	jobID int64
	blobs blob.Store
}

func (r *taskReads) ItemSteps(ctx context.Context, itemID int64) ([]ItemStep, error) {
	return r.e.ItemSteps(ctx, r.jobID, itemID)
}

func (r *taskReads) JobItems(ctx context.Context, after string, limit int) ([]*record.Item, error) {
	return r.e.JobItems(ctx, r.jobID, after, limit)
}

func (r *taskReads) StepChildren(ctx context.Context, parent int64, step string) ([]*record.Item, error) {
	kids, err := r.e.StepChildren(ctx, parent, step)
	if err != nil {
		return nil, err
	}
	out := kids[:0]
	for _, k := range kids {
		if k.JobID == r.jobID {
			out = append(out, k)
		}
	}
	return out, nil
}

func (r *taskReads) query(domain, name string) (ReadQuery, error) {
	r.e.mu.RLock()
	qs, ok := r.e.queries[domain]
	q, found := qs[name]
	r.e.mu.RUnlock()
	switch {
	case !ok:
		if _, registered := r.e.domain(domain); registered {
			return ReadQuery{}, fmt.Errorf("%w: read %s.%s: the domain has no read queries", ErrBadRead, domain, name)
		}
		return ReadQuery{}, fmt.Errorf("%w: read %s.%s: no such domain is registered", ErrBadRead, domain, name)
	case !found:
		return ReadQuery{}, fmt.Errorf("%w: read %s.%s: the domain has no such query", ErrBadRead, domain, name)
	}
	return q, nil
}

func (r *taskReads) Query(ctx context.Context, domain, name string, args, out any) error {
	q, err := r.query(domain, name)
	if err != nil {
		return err
	}
	v, err := q.run(ctx, r.e.DomainSQL(), r.jobID, args)
	if err != nil {
		return err
	}
	if !q.assign(out, v) {
		return fmt.Errorf("read %s.%s: cannot store its %T answer in a %T", domain, name, v, out)
	}
	return nil
}

func (r *taskReads) Blobs() blob.Store { return r.blobs }

// ErrBadRead is the error of a read query a remote worker sent that cannot be run: unknown, or
// with arguments that do not decode.
var ErrBadRead = errors.New("bad read query")

// QueryJSON runs a read query for a task of the job whose arguments are JSON (a remote worker's)
// and returns its answer as JSON: the server side of [Reads.Query] over the worker protocol.
func (e *Engine) QueryJSON(ctx context.Context, jobID int64, domain, name string, args json.RawMessage) (json.RawMessage, error) {
	r := &taskReads{e: e, jobID: jobID}
	q, err := r.query(domain, name)
	if err != nil {
		return nil, err
	}
	if len(args) > MaxReadArgs {
		return nil, fmt.Errorf("read %s.%s: arguments over %d bytes", domain, name, MaxReadArgs)
	}
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	a, err := q.decode(args)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s.%s: arguments: %v", ErrBadRead, domain, name, err)
	}
	v, err := q.run(ctx, r.e.DomainSQL(), r.jobID, a)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
