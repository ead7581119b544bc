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
	for _, w := range ws {
		var p write
		if err := json.Unmarshal(w.Payload, &p); err != nil {
			return fmt.Errorf("graph write %q: %w", w.Key, err)
		}
		switch {
		case p.Workspace != nil:
			if err := putWorkspace(ctx, x, w.JobID, p.Workspace); err != nil {
				return err
			}
		case p.Version != nil:
			v := p.Version
			n, err := x.Exec(ctx, q(x, `INSERT INTO graph_versions (type, pkg, version, state, error, job_id, item_id) VALUES (?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (type, pkg, version) DO NOTHING`), v.Type, v.Pkg, v.Version, v.State, v.Error, w.JobID, w.ItemID)
			if err != nil {
				return fmt.Errorf("graph version %s:%s@%s: %w", v.Type, v.Pkg, v.Version, err)
			}
			if n == 0 {
				continue // resolved before: its relationships are those of the first resolve
			}
			for i, r := range v.Rels {
				ex, _ := json.Marshal(r.Exclusions)
				if ex == nil || string(ex) == "null" {
					ex = []byte("[]")
				}
				if _, err := x.Exec(ctx, q(x, `INSERT INTO graph_relationships (type, pkg, version, ordinal, target, advice, scope, kind, exclusions)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (type, pkg, version, ordinal) DO NOTHING`),
					v.Type, v.Pkg, v.Version, i, r.Target, r.Advice, r.Scope, r.Kind, string(ex)); err != nil {
					return fmt.Errorf("graph relationship %d of %s@%s: %w", i, v.Pkg, v.Version, err)
				}
			}
		default:
			return fmt.Errorf("graph write %q: empty payload", w.Key)
		}
	}
	return nil
}

// q rewrites a query's ? placeholders for x's dialect ([store.Rebind]).
func q(x store.DomainSQL, query string) string { return store.Rebind(x.Dialect(), query) }

// versionState returns the state of a package version in the shared graph ("" when no resolve
// of it has committed) and its error.
func versionState(ctx context.Context, x store.DomainSQL, typ, pkg, ver string) (state, errText string, err error) {
	rows, err := x.Query(ctx, q(x, `SELECT state, error FROM graph_versions WHERE type = ? AND pkg = ? AND version = ?`), typ, pkg, ver)
	if err != nil {
		return "", "", fmt.Errorf("read graph version %s@%s: %w", pkg, ver, err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&state, &errText); err != nil {
			return "", "", err
		}
	}
	return state, errText, rows.Err()
}

// relationships returns a resolved version's relationships in declaration order.
func relationships(ctx context.Context, x store.DomainSQL, typ, pkg, ver string) ([]Relationship, error) {
	rows, err := x.Query(ctx, q(x, `SELECT target, advice, scope, kind, exclusions FROM graph_relationships
		WHERE type = ? AND pkg = ? AND version = ? ORDER BY ordinal`), typ, pkg, ver)
	if err != nil {
		return nil, fmt.Errorf("read relationships of %s@%s: %w", pkg, ver, err)
	}
	defer rows.Close()
	var out []Relationship
	for rows.Next() {
		var r Relationship
		var ex string
		if err := rows.Scan(&r.Target, &r.Advice, &r.Scope, &r.Kind, &ex); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(ex), &r.Exclusions); err != nil {
			return nil, fmt.Errorf("exclusions of %s@%s: %w", pkg, ver, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// workspace returns the request a job registered, or store.ErrNotFound.
func workspace(ctx context.Context, x store.DomainSQL, jobID int64) (*Request, error) {
	rows, err := x.Query(ctx, q(x, `SELECT request FROM graph_workspaces WHERE job_id = ?`), jobID)
	if err != nil {
		return nil, fmt.Errorf("read graph workspace of job %d: %w", jobID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, store.ErrNotFound
	}
	var s string
	if err := rows.Scan(&s); err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("graph workspace of job %d: %w", jobID, err)
	}
	return &r, nil
}

// DeleteWorkspace removes a request's workspace. The shared graph stays: it belongs to every
// request of the installation. It reports whether there was one.
func DeleteWorkspace(ctx context.Context, s store.Store, jobID int64) (bool, error) {
	x := s.DomainSQL()
	n, err := x.Exec(ctx, q(x, `DELETE FROM graph_workspaces WHERE job_id = ?`), jobID)
	if err != nil {
		return false, fmt.Errorf("delete graph workspace of job %d: %w", jobID, err)
	}
	return n > 0, nil
}

// HasWorkspace reports whether a job has a graph workspace (it was registered and not deleted).
func HasWorkspace(ctx context.Context, s store.Store, jobID int64) (bool, error) {
	_, err := workspace(ctx, s.DomainSQL(), jobID)
	if err == store.ErrNotFound {
		return false, nil
	}
	return err == nil, err
}

// WorkspaceRequest returns the request a job registered, or store.ErrNotFound.
func WorkspaceRequest(ctx context.Context, s store.Store, jobID int64) (*Request, error) {
	return workspace(ctx, s.DomainSQL(), jobID)
}

// putWorkspace records a request's workspace, unless it has one.
func putWorkspace(ctx context.Context, x store.DomainSQL, jobID int64, r *Request) error {
	b, _ := json.Marshal(r)
	if _, err := x.Exec(ctx, q(x, `INSERT INTO graph_workspaces (job_id, request) VALUES (?, ?) ON CONFLICT (job_id) DO NOTHING`), jobID, string(b)); err != nil {
		return fmt.Errorf("graph workspace of job %d: %w", jobID, err)
	}
	return nil
}
