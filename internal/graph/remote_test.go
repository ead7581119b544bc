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

// TestRemoteGraph runs a graph request with the graph's actions served by remote workers (the
// worker protocol, in process), which read the request's items, its workspace and the shared
// graph through their tasks' read ports, and gets the result of the all-local run.
func TestRemoteGraph(t *testing.T) {
	t.Parallel()
	g, roots := randomGraph(300, 30)
	dir := t.TempDir()
	writeProxy(t, dir, g)
	req := graph.Request{Source: dir, Roots: roots}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		local := startKit(t, open, 4, graph.Config{}).run(t, req)
		if len(local.Nodes) < 10 || local.Counts.Resolved == 0 {
			t.Fatalf("a graph of %d nodes (%+v) is too small to tell", len(local.Nodes), local.Counts)
		}

		acts := append(graph.New(graph.Config{}).Actions(), basic.NewPass())
		k := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{graph.DomainName: graph.Domain{}},
			Engine: remotetest.Route(remoteGraphActions...)}, acts...)
		src, _ := builtin.Source("graph")
		k.ApplyWorkflow(t, string(src))
		// The remote process has a graph of its own: nothing but HTTP joins it to the engine.
		r := remotetest.Serve(t, k, graph.New(graph.Config{}).Actions(), 2, remoteGraphActions...)
		remote := (&kit{Kit: k}).run(t, req)
		for _, name := range remoteGraphActions {
			if r.Ran(name) == 0 {
				t.Errorf("no task of %s ran remotely", name)
			}
		}
		if remote.Counts != local.Counts || !reflect.DeepEqual(remote, local) {
			t.Errorf("remote result differs from the local one: counts %+v, local %+v; %d nodes and %d edges, local %d and %d",
				remote.Counts, local.Counts, len(remote.Nodes), len(remote.Edges), len(local.Nodes), len(local.Edges))
		}
	})
}
