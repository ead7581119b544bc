package graph_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/store"
)

// TestConformance runs the domain conformance kit on the graph's domain, on every driver: an
// item's step registers a workspace (the job's: the first item's wins) and records a resolved
// package version with two relationships, one with exclusions.
func TestConformance(t *testing.T) {
	t.Parallel()
	domaintest.Run(t, domaintest.Domain{
		Name:   graph.DomainName,
		Domain: graph.Domain{},
		Writes: func(name string) []action.DomainWrite {
			pkg := "example.com/" + name
			return []action.DomainWrite{
				{Domain: graph.DomainName, Key: "workspace", Payload: map[string]any{
					"workspace": graph.Request{Type: "gomod", Source: "/proxy", Roots: []string{pkg + "@v1.0.0"}, Format: "json"}}},
				{Domain: graph.DomainName, Key: "version " + pkg + "@v1.0.0", Payload: map[string]any{
					"version": map[string]any{"type": "gomod", "pkg": pkg, "version": "v1.0.0", "state": "DONE",
						"rels": []graph.Relationship{
							{Target: "example.com/dep", Advice: "v1.2.0", Scope: graph.ScopeRuntime, Kind: "require"},
							{Target: "example.com/other", Advice: "v0.1.0", Scope: graph.ScopeBuildTime, Kind: "require", Exclusions: []string{"example.com/x"}},
						}}}},
				{Domain: graph.DomainName, Key: "version " + pkg + "@v0.9.0", Payload: map[string]any{
					"version": map[string]any{"type": "gomod", "pkg": pkg, "version": "v0.9.0", "state": "FAILED", "error": "metadata missing"}}},
			}
		},
		Rows: func(ctx context.Context, x store.DomainSQL) ([]string, error) {
			var out []string
			read := func(query string, row func(store.DomainRows) (string, error)) error {
				rows, err := x.Query(ctx, query)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					s, err := row(rows)
					if err != nil {
						return err
					}
					out = append(out, s)
				}
				return rows.Err()
			}
			err := read(`SELECT type, pkg, version, state, error, job_id, item_id FROM graph_versions`, func(r store.DomainRows) (string, error) {
				var typ, pkg, ver, state, errText string
				var job, item int64
				err := r.Scan(&typ, &pkg, &ver, &state, &errText, &job, &item)
				return fmt.Sprintf("version %s:%s@%s %s %q job %d item %d", typ, pkg, ver, state, errText, job, item), err
			})
			if err == nil {
				err = read(`SELECT type, pkg, version, ordinal, target, advice, scope, kind, exclusions FROM graph_relationships`, func(r store.DomainRows) (string, error) {
					var typ, pkg, ver, target, advice, scope, kind, ex string
					var ord int64
					err := r.Scan(&typ, &pkg, &ver, &ord, &target, &advice, &scope, &kind, &ex)
					return fmt.Sprintf("relationship %s:%s@%s #%d %s@%s %s %s %s", typ, pkg, ver, ord, target, advice, scope, kind, ex), err
				})
			}
			if err == nil {
				err = read(`SELECT job_id, request FROM graph_workspaces`, func(r store.DomainRows) (string, error) {
					var job int64
					var req string
					err := r.Scan(&job, &req)
					return fmt.Sprintf("workspace job %d %s", job, req), err
				})
			}
			return out, err
		},
	})
}
