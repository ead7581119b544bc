package graph_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/record"
)

// TestGoModRules covers what the oracle does not: cycles, max depth, overrides (a version, and a
// relocation to another module) and exclusions, each ending in the named status without failing
// the request.
func TestGoModRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeProxy(t, dir, modGraph{
		"example.com/a@v1.0.0":   {"example.com/b@v1.0.0", "example.com/x@v1.0.0"},
		"example.com/b@v1.0.0":   {"example.com/a@v1.0.0", "example.com/c@v1.0.0"}, // a cycle back to a
		"example.com/b@v1.1.0":   {"example.com/d@v1.0.0"},
		"example.com/c@v1.0.0":   {"example.com/d@v1.0.0"},
		"example.com/d@v1.0.0":   nil,
		"example.com/x@v1.0.0":   nil,
		"example.com/new@v1.2.0": nil,
	})
	cases := []struct {
		name      string
		req       graph.Request
		nodes     []string
		reason    string
		errSubstr string
	}{
		{name: "cycle", req: graph.Request{Roots: []string{"example.com/a@v1.0.0"}},
			nodes: []string{"example.com/a@v1.0.0", "example.com/b@v1.0.0", "example.com/c@v1.0.0", "example.com/d@v1.0.0", "example.com/x@v1.0.0"}},
		{name: "max-depth", req: graph.Request{Roots: []string{"example.com/a@v1.0.0"}, MaxDepth: 1},
			nodes:  []string{"example.com/a@v1.0.0", "example.com/b@v1.0.0", "example.com/x@v1.0.0"},
			reason: "MAX_DEPTH_REACHED"},
		{name: "override-version", req: graph.Request{Roots: []string{"example.com/a@v1.0.0"}, Overrides: map[string]string{"example.com/b": "v1.1.0"}},
			nodes: []string{"example.com/a@v1.0.0", "example.com/b@v1.1.0", "example.com/d@v1.0.0", "example.com/x@v1.0.0"}},
		{name: "override-relocation", req: graph.Request{Roots: []string{"example.com/a@v1.0.0"}, Overrides: map[string]string{"example.com/b": "example.com/new@v1.2.0"}},
			nodes: []string{"example.com/a@v1.0.0", "example.com/new@v1.2.0", "example.com/x@v1.0.0"}},
		{name: "latest", req: graph.Request{Roots: []string{"example.com/b@latest"}}, // @v/list's highest
			nodes: []string{"example.com/b@v1.1.0", "example.com/d@v1.0.0"}},
		{name: "exclude", req: graph.Request{Roots: []string{"example.com/a@v1.0.0"}, Excludes: []string{"example.com/c", "example.com/x"}},
			nodes: []string{"example.com/a@v1.0.0", "example.com/b@v1.0.0"}},
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		k := startKit(t, open, 4, graph.Config{})
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				c.req.Source = dir
				res := k.run(t, c.req)
				if !slices.Equal(res.Nodes, c.nodes) { // a result with no node has [], not nil
					t.Errorf("nodes %v, want %v", res.Nodes, c.nodes)
				}
				want := firstOr(c.reason, "TRAVERSE_COMPLETE")
				if res.EndDetectReason != want {
					t.Errorf("end-detect-reason %s, want %s", res.EndDetectReason, want)
				}
				if c.errSubstr == "" && len(res.Errors) > 0 {
					t.Errorf("node errors: %+v", res.Errors)
				}
				if c.errSubstr != "" && (len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error, c.errSubstr)) {
					t.Errorf("node errors %+v, want one with %q", res.Errors, c.errSubstr)
				}
			})
		}
	})
}

// TestUnknownTypeStops: a work item of a package type no step handles stops the traverse — the
// job fails, the work item says resolution-result ERROR, and the reason names the type.
func TestUnknownTypeStops(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		k := startKit(t, open, 2, graph.Config{})
		job := k.startRequest(t, graph.Request{Type: "pypi", Source: t.TempDir(), Roots: []string{"requests@2.31.0"}})
		j := k.WaitJob(t, job.ID, time.Minute)
		if j.State != record.JobFailed {
			t.Fatalf("job %s (%s), want failed", j.State, j.Error)
		}
		var got []string
		for _, md := range workItems(t, k.Store, job.ID) {
			got = append(got, status(md, "resolution-result")+" "+status(md, "error"))
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], `ERROR unknown package type "pypi" for requests`) {
			t.Errorf("work items %q, want one ERROR naming the type", got)
		}
		why, err := graph.StopReason(t.Context(), k.Engine, job.ID)
		if err != nil || !strings.Contains(why, `unknown package type "pypi"`) {
			t.Errorf("stop reason %q, %v: want the type named", why, err)
		}
		if _, err := graph.LoadResult(t.Context(), k.Store, job.ID); err == nil {
			t.Error("a stopped traverse stored a result")
		}
	})
}

func firstOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// TestBadSources: a missing .mod is FAILED, an unparsable one and a 50 MB one ERROR, a proxy that
// never answers a node error after its attempts — each on its node, in bounded time and memory,
// and the rest of the graph completes.
func TestBadSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeProxy(t, dir, modGraph{
		"example.com/root@v1.0.0": {"example.com/ok@v1.0.0", "example.com/missing@v1.0.0", "example.com/garbled@v1.0.0",
			"example.com/huge@v1.0.0", "example.com/hang@v1.0.0"},
		"example.com/ok@v1.0.0":      nil,
		"example.com/garbled@v1.0.0": nil,
		"example.com/huge@v1.0.0":    nil,
		"example.com/hang@v1.0.0":    nil,
	})
	if err := os.WriteFile(filepath.Join(dir, "example.com/garbled/@v/v1.0.0.mod"), []byte("module example.com/garbled\nrequire (\n\tnot a requirement\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// 50 MB: the fetcher reads at most its limit (4 MiB) and stops.
	if err := os.Truncate(filepath.Join(dir, "example.com/huge/@v/v1.0.0.mod"), 50<<20); err != nil {
		t.Fatal(err)
	}
	hang := func(path string) bool { return strings.HasPrefix(path, "/example.com/hang/") }
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		proxy := newCountingProxy(t, dir, hang)
		k := startKit(t, open, 4, graph.Config{Egress: loopback(t), FetchTimeout: 300 * time.Millisecond})
		start := time.Now()
		res := k.run(t, graph.Request{Source: proxy.URL, Roots: []string{"example.com/root@v1.0.0"}})
		t.Logf("done in %s", time.Since(start))
		if want := []string{"example.com/garbled@v1.0.0", "example.com/hang@v1.0.0", "example.com/huge@v1.0.0",
			"example.com/missing@v1.0.0", "example.com/ok@v1.0.0", "example.com/root@v1.0.0"}; !reflect.DeepEqual(res.Nodes, want) {
			t.Errorf("nodes %v, want %v (selected, whatever their resolution)", res.Nodes, want)
		}
		byNode := map[string]graph.NodeError{}
		for _, e := range res.Errors {
			byNode[e.Node] = e
		}
		for node, want := range map[string][2]string{
			"example.com/missing@v1.0.0": {"FAILED", "metadata missing"},
			"example.com/garbled@v1.0.0": {"ERROR", "v1.0.0.mod:"},
			"example.com/huge@v1.0.0":    {"ERROR", "more than the limit of 4194304 bytes"},
			"example.com/hang@v1.0.0":    {"ERROR", "no answer within 300ms"},
		} {
			e, ok := byNode[node]
			if !ok || e.Status != want[0] || !strings.Contains(e.Error, want[1]) {
				t.Errorf("%s: node error %+v, want %s with %q", node, e, want[0], want[1])
			}
		}
		if len(res.Errors) != 4 {
			t.Errorf("%d node errors, want 4: %+v", len(res.Errors), res.Errors)
		}
	})
}
