package graph_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// rootedProxies writes the same proxy under a path root (root/mirror/proxy) and outside it
// (outside/proxy), and returns the roots of the path root.
func rootedProxies(t *testing.T) (rs *pathroot.Roots, root, outside string) {
	t.Helper()
	dir := t.TempDir()
	root, outside = filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	g := modGraph{"example.com/a@v1.0.0": {"example.com/b@v1.0.0"}, "example.com/b@v1.0.0": nil}
	writeProxy(t, filepath.Join(root, "mirror", "proxy"), g)
	writeProxy(t, filepath.Join(outside, "proxy"), g)
	r := pathroot.New([]string{root})
	return &r, root, outside
}

// swapForLink replaces the folder dir with a symbolic link to target.
func swapForLink(t *testing.T, dir, target string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
}

// TestSourceOutsideRoots starts requests the way an admin's job metadata can, with no API check:
// a source outside the path roots, and one checked under them whose ancestor folder is then
// swapped for a link leading out before the request's first task runs. Each request fails at
// once (one attempt of graph-register), naming the source and why; no work item is made.
func TestSourceOutsideRoots(t *testing.T) {
	t.Parallel()
	rs, root, outside := rootedProxies(t)
	k := startKit(t, drivertest.OpenSQLite, 2, graph.Config{Roots: rs})
	inside := filepath.Join(root, "mirror", "proxy")
	if _, err := rs.Check(inside); err != nil { // what POST /v1/graphs checks
		t.Fatal(err)
	}
	swapForLink(t, filepath.Join(root, "mirror"), outside)
	for _, tt := range []struct{ name, source, reason string }{
		{"outside the roots", filepath.Join(outside, "proxy"), "it is not under a configured path root (--path-root)"},
		{"ancestor swapped for a link out", inside, "it leads out of its root"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := k.startRequest(t, graph.Request{Source: tt.source, Roots: []string{"example.com/a@v1.0.0"}})
			k.WaitJob(t, job.ID, time.Minute)
			items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 1})
			if err != nil || len(items) != 1 {
				t.Fatalf("items %v, %v", items, err)
			}
			if want := `graph request: source "` + tt.source + `": ` + tt.reason; !strings.Contains(items[0].Error, want) {
				t.Errorf("request item failed with %q, want %q", items[0].Error, want)
			}
			for _, tk := range k.Tasks(t, job.ID) {
				if tk.Step == "register" && tk.Attempt != 1 {
					t.Errorf("task %s ran %d times, want once (the refusal is permanent)", tk.Step, tk.Attempt)
				}
			}
			if items := workItems(t, k.Store, job.ID); len(items) != 0 {
				t.Errorf("%d work items made from a refused source", len(items))
			}
		})
	}
}

// TestFetchAncestorSwap fetches from a source under the path roots, then swaps a folder above
// the source for a link to a copy outside the roots: every fetch opens the source through the
// path root, so the next one is refused as the request's source (permanent), not read.
func TestFetchAncestorSwap(t *testing.T) {
	t.Parallel()
	rs, root, outside := rootedProxies(t)
	f := graph.NewFetcher(graph.FetcherConfig{Roots: rs})
	source, rel := filepath.Join(root, "mirror", "proxy"), "example.com/a/@v/v1.0.0.mod"
	if _, err := f.Fetch(t.Context(), source, rel); err != nil {
		t.Fatal(err)
	}
	swapForLink(t, filepath.Join(root, "mirror"), outside)
	b, err := f.Fetch(t.Context(), source, rel)
	var pe *pathroot.Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "leads out of its root") || b != nil || action.IsPermanent(err) {
		t.Fatalf("Fetch after the swap = %q, %v; want the source refused as leading out", b, err)
	}
	if _, err := f.Fetch(t.Context(), filepath.Join(outside, "proxy"), rel); !errors.As(err, &pe) || !strings.Contains(pe.Reason, "not under a configured path root") {
		t.Fatalf("Fetch outside the roots: %v, want refused", err)
	}
}
