package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// Store reads and writes the graph's tables with typed queries: every statement of the domain is
// one of the [store.DomainQuery] values below, its SQLite and PostgreSQL forms side by side. The
// API and CLI reach requests' workspaces through it ([Open]); the domain's Apply writes through
// one over the task's transaction. It is safe for concurrent use when its [store.DomainSQL] is.
type Store struct{ x store.DomainSQL }

// NewStore returns the Store that runs its statements on x: a store driver's (autocommit), or
// a transaction's.
func NewStore(x store.DomainSQL) *Store { return &Store{x: x} }

// Open returns the Store over the engine's store, outside any task's transaction.
func Open(e *engine.Engine) *Store { return NewStore(e.DomainSQL()) }

// The domain's statements; both dialects speak each of them ([store.SharedQuery]).
var (
	versionAdd = store.SharedQuery(`INSERT INTO graph_versions (type, pkg, version, state, error, job_id, item_id) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (type, pkg, version) DO NOTHING`)
	versionGet      = store.SharedQuery(`SELECT state, error FROM graph_versions WHERE type = ? AND pkg = ? AND version = ?`)
	relationshipAdd = store.SharedQuery(`INSERT INTO graph_relationships (type, pkg, version, ordinal, target, advice, scope, kind, exclusions)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (type, pkg, version, ordinal) DO NOTHING`)
	relationshipsOf = store.SharedQuery(`SELECT target, advice, scope, kind, exclusions FROM graph_relationships
		WHERE type = ? AND pkg = ? AND version = ? ORDER BY ordinal`)
	workspaceGet    = store.SharedQuery(`SELECT request FROM graph_workspaces WHERE job_id = ?`)
	workspaceAdd    = store.SharedQuery(`INSERT INTO graph_workspaces (job_id, request) VALUES (?, ?) ON CONFLICT (job_id) DO NOTHING`)
	workspaceDelete = store.SharedQuery(`DELETE FROM graph_workspaces WHERE job_id = ?`)
	documentGet     = store.SharedQuery(`SELECT digest, body FROM graph_documents WHERE url = ?`)
	documentAdd     = store.SharedQuery(`INSERT INTO graph_documents (url, digest, body) VALUES (?, ?, ?) ON CONFLICT (url) DO NOTHING`)
)

// Document implements [DocumentCache]. A body whose digest does not match is no body: it is
// fetched again.
func (s *Store) Document(ctx context.Context, url string) ([]byte, bool, error) {
	var digest, body string
	found := false
	err := documentGet.Each(ctx, s.x, func(r store.DomainRows) error {
		found = true
		return r.Scan(&digest, &body)
	}, url)
	if err != nil {
		return nil, false, fmt.Errorf("read cached %s: %w", url, err)
	}
	if !found || digestOf([]byte(body)) != digest {
		return nil, false, nil
	}
	return []byte(body), true, nil
}

// PutDocument implements [DocumentCache]. A body that is not UTF-8 text (or holds a NUL, which
// PostgreSQL's text refuses) is not cached.
func (s *Store) PutDocument(ctx context.Context, url string, body []byte) error {
	if !utf8.Valid(body) || bytes.IndexByte(body, 0) >= 0 {
		return nil
	}
	if _, err := documentAdd.Exec(ctx, s.x, url, digestOf(body), string(body)); err != nil {
		return fmt.Errorf("cache %s: %w", url, err)
	}
	return nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// putVersion records a resolved package version with its relationships, made by an item of
// the job, unless a resolve of it committed first: then its relationships are the first's.
func (s *Store) putVersion(ctx context.Context, jobID, itemID int64, v *version) error {
	n, err := versionAdd.Exec(ctx, s.x, v.Type, v.Pkg, v.Version, v.State, v.Error, jobID, itemID)
	if err != nil {
		return fmt.Errorf("graph version %s:%s@%s: %w", v.Type, v.Pkg, v.Version, err)
	}
	if n == 0 {
		return nil
	}
	for i, r := range v.Rels {
		ex, _ := json.Marshal(r.Exclusions)
		if ex == nil || string(ex) == "null" {
			ex = []byte("[]")
		}
		if _, err := relationshipAdd.Exec(ctx, s.x, v.Type, v.Pkg, v.Version, i, r.Target, r.Advice, r.Scope, r.Kind, string(ex)); err != nil {
			return fmt.Errorf("graph relationship %d of %s@%s: %w", i, v.Pkg, v.Version, err)
		}
	}
	return nil
}

// VersionState returns the state of a package version in the shared graph (DONE, FAILED or
// ERROR; "" when no resolve of it has committed) and its error.
func (s *Store) VersionState(ctx context.Context, typ, pkg, ver string) (state, errText string, err error) {
	err = versionGet.Each(ctx, s.x, func(r store.DomainRows) error { return r.Scan(&state, &errText) }, typ, pkg, ver)
	if err != nil {
		return "", "", fmt.Errorf("read graph version %s@%s: %w", pkg, ver, err)
	}
	return state, errText, nil
}

// Relationships returns a resolved version's relationships in declaration order.
func (s *Store) Relationships(ctx context.Context, typ, pkg, ver string) ([]Relationship, error) {
	var out []Relationship
	err := relationshipsOf.Each(ctx, s.x, func(rows store.DomainRows) error {
		var r Relationship
		var ex string
		if err := rows.Scan(&r.Target, &r.Advice, &r.Scope, &r.Kind, &ex); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(ex), &r.Exclusions); err != nil {
			return fmt.Errorf("exclusions of %s@%s: %w", pkg, ver, err)
		}
		out = append(out, r)
		return nil
	}, typ, pkg, ver)
	if err != nil {
		return nil, fmt.Errorf("read relationships of %s@%s: %w", pkg, ver, err)
	}
	return out, nil
}

// Workspace returns the request a job registered, or [store.ErrNotFound].
func (s *Store) Workspace(ctx context.Context, jobID int64) (*Request, error) {
	var r *Request
	err := workspaceGet.Each(ctx, s.x, func(rows store.DomainRows) error {
		var b string
		if err := rows.Scan(&b); err != nil {
			return err
		}
		r = &Request{}
		return json.Unmarshal([]byte(b), r)
	}, jobID)
	if err != nil {
		return nil, fmt.Errorf("read graph workspace of job %d: %w", jobID, err)
	}
	if r == nil {
		return nil, store.ErrNotFound
	}
	return r, nil
}

// HasWorkspace reports whether a job has a graph workspace (it was registered and not deleted).
func (s *Store) HasWorkspace(ctx context.Context, jobID int64) (bool, error) {
	_, err := s.Workspace(ctx, jobID)
	if err == store.ErrNotFound {
		return false, nil
	}
	return err == nil, err
}

// PutWorkspace records a request's workspace, unless its job has one.
func (s *Store) PutWorkspace(ctx context.Context, jobID int64, r *Request) error {
	b, _ := json.Marshal(r)
	if _, err := workspaceAdd.Exec(ctx, s.x, jobID, string(b)); err != nil {
		return fmt.Errorf("graph workspace of job %d: %w", jobID, err)
	}
	return nil
}

// DeleteWorkspace removes a request's workspace. The shared graph stays: it belongs to every
// request of the installation. It reports whether there was one.
func (s *Store) DeleteWorkspace(ctx context.Context, jobID int64) (bool, error) {
	n, err := workspaceDelete.Exec(ctx, s.x, jobID)
	if err != nil {
		return false, fmt.Errorf("delete graph workspace of job %d: %w", jobID, err)
	}
	return n > 0, nil
}
