package graph_test

import (
	"reflect"
	"testing"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/workerproto/remotetest"
)

// remoteGraphActions are the graph's actions a remote worker serves in TestRemoteGraph: every
// one that runs as a task (graph-end-detect's work items run inline, in the engine).
var remoteGraphActions = []string{"graph-register", "graph-end-detect", "graph-select-sync", "graph-select",
	"graph-resolve-sync", "graph-resolve", "graph-traverse", "graph-format"}

// TestRemoteGraph runs graph requests — a gomod graph, and maven ones whose selection is nearest
// wins (a work item waits, snoozing, for the levels above it) with relocations, managed versions
// and overrides — with the graph's actions served by remote workers (the worker protocol, in
// process), which read the request's items, its workspace and the shared graph through their
// tasks' read ports, and whose claims the server takes before it hands a task out; each result
// is the all-local run's, counts included (a claim not taken would resolve a version twice).
func TestRemoteGraph(t *testing.T) {
	t.Parallel()
	g, roots := randomGraph(300, 30)
	gomod := t.TempDir()
	writeProxy(t, gomod, g)
	repo := t.TempDir()
	writeRepo(t, repo, mavenRepo)
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		proxy := newCountingProxy(t, repo, nil)
		reqs := []graph.Request{{Source: gomod, Roots: roots},
			{Type: "maven", Source: proxy.URL, Roots: []string{"n:app@1"}},
			{Type: "maven", Source: proxy.URL, Roots: []string{"r:app@1"}},
			{Type: "maven", Source: proxy.URL, Roots: []string{"n:app@1"}, Overrides: map[string]string{"n:b": "r:leaf@1", "n:c": "2.0"}},
			{Type: "maven", Source: proxy.URL, Roots: []string{"org.commonjava.util:jhttpc@1.6"}}}
		cfg := graph.Config{Egress: loopback(t)}
		lk := startKit(t, open, 4, cfg)

		acts := append(graph.New(cfg).Actions(), basic.NewPass())
		k := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{graph.DomainName: graph.Domain{}},
			Engine: remotetest.Route(remoteGraphActions...)}, acts...)
		src, _ := builtin.Source("graph")
		k.ApplyWorkflow(t, string(src))
		// The remote process has a graph of its own: nothing but HTTP joins it to the engine.
		r := remotetest.Serve(t, k, graph.New(cfg).Actions(), 2, remoteGraphActions...)
		rk := &kit{Kit: k}
		for i, req := range reqs {
			local, remote := lk.run(t, req), rk.run(t, req)
			if len(local.Nodes) < 3 {
				t.Fatalf("request %d: a graph of %d nodes (%+v) is too small to tell", i, len(local.Nodes), local.Counts)
			}
			if remote.Counts != local.Counts || !reflect.DeepEqual(remote, local) {
				t.Errorf("request %d: remote result differs from the local one: counts %+v, local %+v; nodes\n%v\nlocal\n%v",
					i, remote.Counts, local.Counts, remote.Nodes, local.Nodes)
			}
		}
		for _, name := range remoteGraphActions {
			if r.Ran(name) == 0 {
				t.Errorf("no task of %s ran remotely", name)
			}
		}
	})
}
