package graph_test

import (
	"encoding/json"
	"fmt"
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

// TestRenderEveryPath: the path format lists every path to each node, at most 100 a node and a
// count of the rest: on a ladder of 12 diamonds, 2^12 = 4096 paths reach the bottom (the count
// exact, by the graph's topological order); in a cycle each path is walked once.
func TestRenderEveryPath(t *testing.T) {
	t.Parallel()
	res := &graph.Result{Roots: []string{"r"}, Paths: [][]string{{"r"}}}
	prev := "r"
	for i := 0; i < 12; i++ {
		l, rr, next := fmt.Sprintf("l%d", i), fmt.Sprintf("r%d", i), fmt.Sprintf("j%d", i)
		res.Edges = append(res.Edges, graph.Edge{From: prev, To: l}, graph.Edge{From: prev, To: rr}, graph.Edge{From: l, To: next}, graph.Edge{From: rr, To: next})
		res.Paths = append(res.Paths, []string{"r", l}, []string{"r", rr}, []string{"r", next})
		prev = next
	}
	out, err := graph.Render(res, "path")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var toJ1, toBottom int
	for _, l := range lines {
		switch {
		case strings.HasSuffix(l, "> j1"):
			toJ1++
		case strings.HasSuffix(l, "> j11"):
			toBottom++
		}
	}
	if toJ1 != 4 || toBottom != 100 || !strings.Contains(out, "… 3996 more paths to j11\n") || !strings.Contains(out, "r > l0 > j0 > r1 > j1\n") {
		t.Errorf("%d paths to j1 (want 4), %d shown to j11 (want 100), the rest counted: %v", toJ1, toBottom, strings.Contains(out, "3996 more"))
	}
	cyc := &graph.Result{Roots: []string{"a"}, Paths: [][]string{{"a"}, {"a", "b"}},
		Edges: []graph.Edge{{From: "a", To: "b"}, {From: "b", To: "a"}}}
	if out, _ := graph.Render(cyc, "path"); out != "a\na > b\n" {
		t.Errorf("a cycle: %q", out)
	}
}

// TestRenderTemplate: a user's template over the result, and the bounds of one.
func TestRenderTemplate(t *testing.T) {
	t.Parallel()
	res := &graph.Result{Type: "npm", Nodes: []string{"a@1", "b@2"}, Edges: []graph.Edge{{From: "a@1", To: "b@2"}}}
	out, err := graph.RenderTemplate(res, `{{.Type}}:{{range .Nodes}} {{.}}{{end}};{{range .Edges}} {{.From}}->{{.To}}{{end}}`)
	if err != nil || out != "npm: a@1 b@2; a@1->b@2" {
		t.Errorf("%q, %v", out, err)
	}
	for text, msg := range map[string]string{
		`{{range .Nodes}}{{range .Nodes}}{{range .Nodes}}x{{end}}{{end}}{{end}}`: "nested 3 deep, more than the limit of 2",
		`{{define "t"}}{{template "t"}}{{end}}{{template "t"}}`:                  "calls are not allowed",
		`{{.Nodes`:                 "template:",
		`{{.NoSuchField}}`:         "NoSuchField",
		strings.Repeat("x", 70000): "more than the limit of 65536",
		"":                         "no template",
	} {
		if _, err := graph.RenderTemplate(res, text); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%.40q: %v, want %q", text, err, msg)
		}
	}
}
