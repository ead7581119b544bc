package graph

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"text/template"
	"text/template/parse"
)

// The bounds of the path rendering: paths shown per node, and DFS steps in all (past them, the
// count of a node's other paths is a lower bound).
const (
	maxPathsPerNode = 100
	pathSteps       = 1_000_000
)

// renderPaths lists every path from a root to each node of the result (the nodes in the order of
// their first path, breadth first), at most maxPathsPerNode per node, then a line counting the
// others. Paths follow the result's edges and never repeat a node (a cycle is walked once).
func renderPaths(res *Result) string {
	children := map[string][]string{}
	parents := map[string][]string{}
	for _, e := range res.Edges {
		children[e.From] = append(children[e.From], e.To)
		parents[e.To] = append(parents[e.To], e.From)
	}
	var roots, order []string
	for _, p := range res.Paths {
		if len(p) == 0 {
			continue
		}
		if !contains(roots, p[0]) {
			roots = append(roots, p[0])
		}
		order = append(order, p[len(p)-1])
	}
	shown := map[string][][]string{}
	seen := map[string]uint64{}
	steps, cut := 0, false
	var walk func(path []string, on map[string]bool)
	walk = func(path []string, on map[string]bool) {
		if steps++; steps > pathSteps {
			cut = true
			return
		}
		n := path[len(path)-1]
		seen[n]++
		if len(shown[n]) < maxPathsPerNode {
			shown[n] = append(shown[n], append([]string(nil), path...))
		}
		for _, c := range children[n] {
			if !on[c] && !cut {
				on[c] = true
				walk(append(path, c), on)
				delete(on, c)
			}
		}
	}
	for _, r := range roots {
		walk([]string{r}, map[string]bool{r: true})
	}
	total, exact := countPaths(roots, children, parents)
	var b strings.Builder
	for _, n := range order {
		for _, p := range shown[n] {
			b.WriteString(strings.Join(p, " > ") + "\n")
		}
		n64 := uint64(len(shown[n]))
		switch {
		case exact && total[n] > n64:
			fmt.Fprintf(&b, "… %d more paths to %s\n", total[n]-n64, n)
		case !exact && seen[n] > n64 && !cut:
			fmt.Fprintf(&b, "… %d more paths to %s\n", seen[n]-n64, n)
		case !exact && cut && seen[n] >= n64 && n64 == maxPathsPerNode:
			// Cut short in a graph with cycles: what was seen is a lower bound.
			fmt.Fprintf(&b, "… at least %d more paths to %s\n", seen[n]-n64, n)
		}
	}
	return b.String()
}

// countPaths counts the paths from the roots to each node when the graph is acyclic (exact,
// saturating at the largest uint64), by dynamic programming in topological order; false when
// it has a cycle.
func countPaths(roots []string, children, parents map[string][]string) (map[string]uint64, bool) {
	indeg := map[string]int{}
	nodes := map[string]bool{}
	for from, cs := range children {
		nodes[from] = true
		for _, c := range cs {
			nodes[c] = true
			indeg[c]++
		}
	}
	for _, r := range roots {
		nodes[r] = true
	}
	var queue []string
	for n := range nodes {
		if indeg[n] == 0 {
			queue = append(queue, n)
		}
	}
	count := map[string]uint64{}
	for _, r := range roots {
		count[r] = 1
	}
	done := 0
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		done++
		for _, c := range children[n] {
			if count[c] > math.MaxUint64-count[n] {
				count[c] = math.MaxUint64
			} else {
				count[c] += count[n]
			}
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	return count, done == len(nodes)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// The bounds of a user's template: its size, the nesting of its range and with actions (a range
// over the nodes inside a range over the nodes is 25 million steps for 5,000 nodes; a third level
// is refused), and what it writes.
const (
	maxTemplateBytes  = 64 << 10
	maxTemplateNest   = 2
	maxTemplateOutput = 64 << 20
)

// ParseTemplate parses a user's result template (Go text/template over a [Result]: .Nodes,
// .Edges (.From, .To), .Paths, .Errors, .Counts, .Roots, .Type, .EndDetectReason), with an
// error in plain words naming the problem: too large, not a template, or ranges nested too deep.
func ParseTemplate(text string) (*template.Template, error) {
	if len(text) > maxTemplateBytes {
		return nil, fmt.Errorf("template of %d bytes, more than the limit of %d", len(text), maxTemplateBytes)
	}
	tm, err := template.New("format").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	for _, t := range tm.Templates() {
		if t.Tree == nil {
			continue
		}
		if d := nesting(t.Tree.Root); d > maxTemplateNest {
			return nil, fmt.Errorf("template: range and with nested %d deep, more than the limit of %d", d, maxTemplateNest)
		}
		if hasTemplateCall(t.Tree.Root) {
			return nil, errors.New("template: {{template}} calls are not allowed (a template could call itself)")
		}
	}
	return tm, nil
}

// nesting returns the deepest nesting of range and with actions under n.
func nesting(n parse.Node) int {
	best := 0
	walkList := func(l *parse.ListNode) {
		if l == nil {
			return
		}
		for _, c := range l.Nodes {
			best = max(best, nesting(c))
		}
	}
	switch x := n.(type) {
	case *parse.ListNode:
		walkList(x)
	case *parse.RangeNode:
		walkList(x.List)
		walkList(x.ElseList)
		return best + 1
	case *parse.WithNode:
		walkList(x.List)
		walkList(x.ElseList)
		return best + 1
	case *parse.IfNode:
		walkList(x.List)
		walkList(x.ElseList)
	}
	return best
}

func hasTemplateCall(n parse.Node) bool {
	found := false
	var walk func(parse.Node)
	walkList := func(l *parse.ListNode) {
		if l != nil {
			for _, c := range l.Nodes {
				walk(c)
			}
		}
	}
	walk = func(n parse.Node) {
		switch x := n.(type) {
		case *parse.TemplateNode:
			found = true
		case *parse.ListNode:
			walkList(x)
		case *parse.RangeNode:
			walkList(x.List)
			walkList(x.ElseList)
		case *parse.WithNode:
			walkList(x.List)
			walkList(x.ElseList)
		case *parse.IfNode:
			walkList(x.List)
			walkList(x.ElseList)
		}
	}
	walk(n)
	return found
}

// errTooMuch stops a template that writes more than maxTemplateOutput.
var errTooMuch = fmt.Errorf("template: output of more than %d MiB", maxTemplateOutput>>20)

type limitedBuffer struct{ bytes.Buffer }

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if w.Len()+len(p) > maxTemplateOutput {
		return 0, errTooMuch
	}
	return w.Buffer.Write(p)
}

// RenderTemplate renders a result with a user's template (see [ParseTemplate]).
func RenderTemplate(res *Result, text string) (string, error) {
	if text == "" {
		return "", errors.New("format template: no template (format template=FILE, or the request's template)")
	}
	tm, err := ParseTemplate(text)
	if err != nil {
		return "", err
	}
	var w limitedBuffer
	if err := tm.Execute(&w, res); err != nil {
		return "", fmt.Errorf("template: %w", err)
	}
	return w.String(), nil
}
