package graph

import (
	"context"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// The graph's read queries: what its actions read of its tables, through their task's read port
// ([engine.Reads]) — in process or from a remote worker alike. The workspace is the task's job's;
// package versions and their relationships are the installation's shared graph.
const (
	readWorkspace     = "workspace"
	readVersionState  = "version_state"
	readRelationships = "relationships"
)

// versionKey names one package version of the shared graph.
type versionKey struct {
	Type    string `json:"type"`
	Pkg     string `json:"pkg"`
	Version string `json:"version"`
}

// versionState is the answer of readVersionState.
type versionState struct {
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// ReadQueries implements [engine.DomainReader].
func (Domain) ReadQueries() map[string]engine.ReadQuery {
	return map[string]engine.ReadQuery{
		readWorkspace: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, jobID int64, _ struct{}) (*Request, error) {
			return NewStore(x).Workspace(ctx, jobID)
		}),
		readVersionState: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, k versionKey) (versionState, error) {
			st, msg, err := NewStore(x).VersionState(ctx, k.Type, k.Pkg, k.Version)
			return versionState{State: st, Error: msg}, err
		}),
		readRelationships: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, k versionKey) ([]Relationship, error) {
			return NewStore(x).Relationships(ctx, k.Type, k.Pkg, k.Version)
		}),
	}
}

// relationships reads a resolved version's relationships through the task's read port.
func relationships(ctx context.Context, typ, pkg, ver string) ([]Relationship, error) {
	return engine.Query[[]Relationship](ctx, DomainName, readRelationships, versionKey{typ, pkg, ver})
}

// taskWorkItems returns every item of the task's job in tree order, read through its read port.
func taskWorkItems(ctx context.Context) ([]*WorkItem, error) {
	r, err := engine.ReadsOf(ctx)
	if err != nil {
		return nil, err
	}
	return listWorkItems(ctx, r.JobItems)
}
