package graph_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/store"
)

// TestStore is the conformance suite of the graph's typed store, on every driver: each
// statement in each dialect reads back what the domain's writes made, with the same results.
func TestStore(t *testing.T) {
	t.Parallel()
	domaintest.ForEachStore(t, graph.DomainName, graph.Domain{}, func(t *testing.T, db store.Store) {
		ctx := t.Context()
		apply := func(jobID int64, payload map[string]any) {
			t.Helper()
			w := action.DomainWrite{Domain: graph.DomainName, Key: "k", Payload: payload}
			if err := domaintest.Apply(t, db, graph.Domain{}, jobID, []action.DomainWrite{w}); err != nil {
				t.Fatal(err)
			}
		}
		rels := []graph.Relationship{
			{Target: "example.com/dep", Advice: "v1.2.0", Scope: graph.ScopeRuntime, Kind: "require"},
			{Target: "example.com/other", Advice: "v0.1.0", Scope: graph.ScopeBuildTime, Kind: "require", Exclusions: []string{"example.com/x"}},
		}
		apply(1, map[string]any{"version": map[string]any{"type": "gomod", "pkg": "example.com/a", "version": "v1.0.0", "state": "DONE", "rels": rels}})
		// A second resolve of the version committing later changes nothing: the first's stays.
		apply(2, map[string]any{"version": map[string]any{"type": "gomod", "pkg": "example.com/a", "version": "v1.0.0", "state": "DONE",
			"rels": []graph.Relationship{{Target: "example.com/late", Advice: "v9.0.0", Scope: graph.ScopeRuntime, Kind: "require"}}}})
		apply(1, map[string]any{"version": map[string]any{"type": "gomod", "pkg": "example.com/a", "version": "v0.9.0", "state": "FAILED", "error": "metadata missing"}})
		s := graph.NewStore(db.DomainSQL())

		t.Run("Versions", func(t *testing.T) {
			for _, c := range []struct{ name, version, state, errText string }{
				{"resolved", "v1.0.0", "DONE", ""},
				{"failed", "v0.9.0", "FAILED", "metadata missing"},
				{"never resolved", "v2.0.0", "", ""},
			} {
				st, e, err := s.VersionState(ctx, "gomod", "example.com/a", c.version)
				if err != nil || st != c.state || e != c.errText {
					t.Errorf("%s: state %q, error %q, %v; want %q, %q", c.name, st, e, err, c.state, c.errText)
				}
			}
			got, err := s.Relationships(ctx, "gomod", "example.com/a", "v1.0.0")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Target != rels[0].Target || len(got[0].Exclusions) != 0 ||
				got[1].Scope != graph.ScopeBuildTime || !slices.Equal(got[1].Exclusions, rels[1].Exclusions) {
				t.Errorf("relationships = %+v, want %+v", got, rels)
			}
			if none, err := s.Relationships(ctx, "maven", "example.com/a", "v1.0.0"); err != nil || len(none) != 0 {
				t.Errorf("relationships of another type = %+v, %v", none, err)
			}
		})
		t.Run("Workspaces", func(t *testing.T) {
			if _, err := s.Workspace(ctx, 7); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a job without a workspace: %v", err)
			}
			r := &graph.Request{Type: "gomod", Source: "/proxy", Roots: []string{"example.com/a@v1.0.0"}, Format: "json"}
			apply(7, map[string]any{"workspace": r})
			// A job's first workspace stays.
			if err := s.PutWorkspace(ctx, 7, &graph.Request{Type: "maven", Source: "/other"}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Workspace(ctx, 7)
			if err != nil || got.Type != "gomod" || got.Source != "/proxy" || !slices.Equal(got.Roots, r.Roots) {
				t.Errorf("workspace = %+v, %v", got, err)
			}
			if ok, err := s.HasWorkspace(ctx, 7); err != nil || !ok {
				t.Errorf("has workspace = %v, %v", ok, err)
			}
			for _, want := range []bool{true, false} {
				if had, err := s.DeleteWorkspace(ctx, 7); err != nil || had != want {
					t.Errorf("delete = %v, %v; want %v", had, err, want)
				}
			}
			if ok, err := s.HasWorkspace(ctx, 7); err != nil || ok {
				t.Errorf("has a deleted workspace = %v, %v", ok, err)
			}
		})
	})
}
