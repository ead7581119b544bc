package objects

import (
	"context"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// The domain's read queries: what the workflow's actions read of its tables, through their
// task's read port ([engine.Reads]) — in process or from a remote worker alike. Rows keyed by
// the job (a sheet's rows and works) are the task's job's; works, file sets and their states are
// named by accession number or id, unique across the installation; "existing" answers only
// whether accession numbers are taken, across the installation (a sheet's validation needs no
// more).
const (
	readRows             = "rows"
	readWorks            = "works"
	readWorkFileSets     = "work_file_sets"
	readFileSet          = "file_set"
	readHasDerivative    = "has_derivative"
	readActionStates     = "action_states"
	readActionOutcome    = "action_outcome"
	readBlobReferencedAs = "blob_referenced_as"
	readExisting         = "existing"
	// putStarted is the one write the port carries: an action's `started` outcome, recorded as
	// its work begins, outside any task's transaction (an idempotent upsert; see the package
	// documentation).
	putStarted = "put_started"
)

type (
	objectKind struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	existingArgs struct {
		Works    []string `json:"works"`
		FileSets []string `json:"file_sets"`
	}
	existingAnswer struct {
		Works    map[string]bool `json:"works"`
		FileSets map[string]bool `json:"file_sets"`
	}
	startedArgs struct {
		State ActionState `json:"state"`
		At    int64       `json:"at"`
	}
)

// ReadQueries implements [engine.DomainReader].
func (Domain) ReadQueries() map[string]engine.ReadQuery {
	return map[string]engine.ReadQuery{
		readRows: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, jobID int64, failed bool) ([]Row, error) {
			return NewStore(x).ListRows(ctx, jobID, failed)
		}),
		readWorks: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, jobID int64, _ struct{}) ([]*Work, error) {
			return NewStore(x).ListWorks(ctx, jobID)
		}),
		readWorkFileSets: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, acc string) ([]*FileSet, error) {
			return NewStore(x).WorkFileSets(ctx, acc)
		}),
		readFileSet: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, id string) (*FileSet, error) {
			return NewStore(x).FileSet(ctx, id)
		}),
		readHasDerivative: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, a objectKind) (bool, error) {
			return NewStore(x).HasDerivative(ctx, a.ID, a.Kind)
		}),
		readActionStates: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, id string) ([]ActionState, error) {
			return NewStore(x).ActionStates(ctx, id)
		}),
		readActionOutcome: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, a objectKind) (string, error) {
			return NewStore(x).ActionOutcome(ctx, a.ID, a.Kind)
		}),
		readBlobReferencedAs: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, a objectKind) (bool, error) {
			return NewStore(x).BlobReferencedAs(ctx, a.ID, a.Kind)
		}),
		readExisting: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, a existingArgs) (existingAnswer, error) {
			w, f, err := NewStore(x).Existing(ctx, a.Works, a.FileSets)
			return existingAnswer{Works: w, FileSets: f}, err
		}),
		putStarted: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, jobID int64, a startedArgs) (struct{}, error) {
			a.State.Outcome = OutcomeStarted // the port records nothing else
			return struct{}{}, NewStore(x).PutState(ctx, jobID, a.State, a.At)
		}),
	}
}

// taskDB is what an action reads of the domain (and of the core and the blob store): its task's
// read port, with a method per query.
type taskDB struct{ r engine.Reads }

// portOf returns the read port of the task in ctx.
func portOf(ctx context.Context) (*taskDB, error) {
	r, err := engine.ReadsOf(ctx)
	if err != nil {
		return nil, err
	}
	return &taskDB{r}, nil
}

func query[R any](ctx context.Context, d *taskDB, name string, args any) (R, error) {
	var out R
	err := d.r.Query(ctx, Name, name, args, &out)
	return out, err
}

func (d *taskDB) blobs() blob.Store { return d.r.Blobs() }

// ItemSteps returns the steps of the job's workflow with the item's task state at each.
func (d *taskDB) ItemSteps(ctx context.Context, itemID int64) ([]engine.ItemStep, error) {
	return d.r.ItemSteps(ctx, itemID)
}

// ListRows returns the task's sheet's rows ([Store.ListRows]).
func (d *taskDB) ListRows(ctx context.Context, failed bool) ([]Row, error) {
	return query[[]Row](ctx, d, readRows, failed)
}

// ListWorks returns the task's sheet's works ([Store.ListWorks]).
func (d *taskDB) ListWorks(ctx context.Context) ([]*Work, error) {
	return query[[]*Work](ctx, d, readWorks, struct{}{})
}

// WorkFileSets is [Store.WorkFileSets].
func (d *taskDB) WorkFileSets(ctx context.Context, acc string) ([]*FileSet, error) {
	return query[[]*FileSet](ctx, d, readWorkFileSets, acc)
}

// FileSet is [Store.FileSet].
func (d *taskDB) FileSet(ctx context.Context, id string) (*FileSet, error) {
	return query[*FileSet](ctx, d, readFileSet, id)
}

// HasDerivative is [Store.HasDerivative].
func (d *taskDB) HasDerivative(ctx context.Context, id, kind string) (bool, error) {
	return query[bool](ctx, d, readHasDerivative, objectKind{id, kind})
}

// ActionStates is [Store.ActionStates].
func (d *taskDB) ActionStates(ctx context.Context, id string) ([]ActionState, error) {
	return query[[]ActionState](ctx, d, readActionStates, id)
}

// ActionOutcome is [Store.ActionOutcome].
func (d *taskDB) ActionOutcome(ctx context.Context, id, act string) (string, error) {
	return query[string](ctx, d, readActionOutcome, objectKind{id, act})
}

// BlobReferencedAs is [Store.BlobReferencedAs].
func (d *taskDB) BlobReferencedAs(ctx context.Context, sha256, kind string) (bool, error) {
	return query[bool](ctx, d, readBlobReferencedAs, objectKind{sha256, kind})
}

// Existing is [Store.Existing].
func (d *taskDB) Existing(ctx context.Context, works, fileSets []string) (w, f map[string]bool, err error) {
	a, err := query[existingAnswer](ctx, d, readExisting, existingArgs{works, fileSets})
	return a.Works, a.FileSets, err
}

// PutStarted records the action state st started, at (unix nanoseconds), for the task's job.
func (d *taskDB) PutStarted(ctx context.Context, st ActionState, at int64) error {
	_, err := query[struct{}](ctx, d, putStarted, startedArgs{st, at})
	return err
}
