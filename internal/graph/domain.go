package graph

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// DomainName is the name the graph's tables are registered under ([engine.Engine.RegisterDomain]).
const DomainName = "graph"

//go:embed migrations
var migrations embed.FS

// Domain is the graph's domain: the shared graph (graph_versions, graph_relationships) and the
// per-request workspaces (graph_workspaces). The zero value is ready to register.
type Domain struct{}

// Register registers the domain with the engine and applies its migrations not yet applied.
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, DomainName, Domain{})
}

// Migrations implements [engine.Domain].
func (Domain) Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

// write is the payload of the graph's domain writes: a workspace registered, or a package version
// resolved with its relationships.
type write struct {
	Workspace *Request `json:"workspace,omitempty"`
	Version   *version `json:"version,omitempty"`
}

// version is a package version as resolve records it in the shared graph.
type version struct {
	Type    string         `json:"type"`
	Pkg     string         `json:"pkg"`
	Version string         `json:"version"`
	State   string         `json:"state"` // DONE, FAILED or ERROR
	Error   string         `json:"error,omitempty"`
	Rels    []Relationship `json:"rels,omitempty"`
}

// Apply implements [engine.Domain]. Every row is keyed (a version by type, package and version;
// a workspace by its job), inserted with ON CONFLICT DO NOTHING: the first resolve of a version
// to commit wins, and a replayed write changes nothing.
func (Domain) Apply(ctx context.Context, x store.DomainSQL, ws []engine.DomainWrite) error {
	db := NewStore(x)
	for _, w := range ws {
		var p write
		if err := json.Unmarshal(w.Payload, &p); err != nil {
			return fmt.Errorf("graph write %q: %w", w.Key, err)
		}
		var err error
		switch {
		case p.Workspace != nil:
			err = db.PutWorkspace(ctx, w.JobID, p.Workspace)
		case p.Version != nil:
			err = db.putVersion(ctx, w.JobID, w.ItemID, p.Version)
		default:
			err = fmt.Errorf("graph write %q: empty payload", w.Key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
