package graph_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/graph"
)

// TestRender renders one result in every format.
func TestRender(t *testing.T) {
	t.Parallel()
	res := &graph.Result{Type: "gomod", Roots: []string{"a@v1"}, Nodes: []string{"a@v1", "b@v2"},
		Edges: []graph.Edge{{From: "a@v1", To: "b@v2"}}, Paths: [][]string{{"a@v1"}, {"a@v1", "b@v2"}}}
	for format, want := range map[string]string{
		"node": "a@v1\nb@v2\n",
		"path": "a@v1\na@v1 > b@v2\n",
		"dot":  "digraph deps {\n  \"a@v1\" -> \"b@v2\";\n}\n",
	} {
		got, err := graph.Render(res, format)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", format, got, err, want)
		}
	}
	j, err := graph.Render(res, "json")
	var back graph.Result
	if err != nil || json.Unmarshal([]byte(j), &back) != nil || !reflect.DeepEqual(&back, res) {
		t.Errorf("json: %v, %s", err, j)
	}
	if _, err := graph.Render(res, "svg"); err == nil || !strings.Contains(err.Error(), `format "svg"`) {
		t.Errorf("svg: %v, want an error naming the format", err)
	}
}

// TestResultArraysNeverNull: a result's arrays are [] in its JSON when empty, never null (the
// OpenAPI document's GraphResult has no nullable field): one built from a request item alone,
// and one stored with nulls before BuildResult made empty ones.
func TestResultArraysNeverNull(t *testing.T) {
	t.Parallel()
	built, err := graph.BuildResult(t.Context(), &graph.Request{Type: "gomod", Roots: []string{"a@v1"}}, []*graph.WorkItem{{ID: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string]*graph.Result{"built": built, "stored": {Type: "gomod"}} {
		j, err := graph.Render(res, "json")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(j), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"roots", "nodes", "edges", "paths"} {
			if _, ok := m[k].([]any); !ok {
				t.Errorf("%s: %s is %#v, want an array", name, k, m[k])
			}
		}
	}
}

// TestWorkflowRoutesEveryType: the built-in workflow has a resolve step for each registered
// package type, and its unknown-type route names exactly those types.
func TestWorkflowRoutesEveryType(t *testing.T) {
	t.Parallel()
	src, ok := builtin.Source("graph")
	if !ok {
		t.Fatal("no built-in graph workflow")
	}
	types := graph.New(graph.Config{}).TypeNames()
	for _, typ := range types {
		if !strings.Contains(string(src), "resolve-"+typ+":") || !strings.Contains(string(src), `metadata.type == "`+typ+`"`) {
			t.Errorf("no resolve step for %s", typ)
		}
	}
	if !strings.Contains(string(src), `!(metadata.type in ["`+strings.Join(types, `", "`)+`"])`) {
		t.Error("the unknown-type route does not name the registered types")
	}
}
