package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// OutputKind is the kind of the request item's output holding its [Result] as JSON.
const OutputKind = "graph"

// WorkItem is a job's item as the graph reads it.
type WorkItem struct {
	ID, ParentID int64
	Ordinal      int
	Depth        int    // of the item: the request is 0, root packages 1
	SortKey      string // the ordinal path: tree order
	Error        string
	Metadata     map[string]any
	Status       map[string]any
}

// listWorkItems returns every item of a job in tree order, listed by list.
func listWorkItems(ctx context.Context, list func(ctx context.Context, after string, limit int) ([]*record.Item, error)) ([]*WorkItem, error) {
	var out []*WorkItem
	after := ""
	for {
		items, err := list(ctx, after, 5000)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			w := &WorkItem{ID: it.ID, ParentID: it.ParentID, Ordinal: it.Ordinal, Depth: it.Depth, SortKey: it.SortKey, Error: it.Error}
			if err := json.Unmarshal(it.Metadata, &w.Metadata); err != nil {
				return nil, fmt.Errorf("metadata of item %d: %w", it.ID, err)
			}
			w.Status, _ = w.Metadata[keyStatus].(map[string]any)
			out = append(out, w)
		}
		if len(items) < 5000 {
			return out, nil
		}
		after = items[len(items)-1].SortKey
	}
}

// Result is a finished request's graph.
type Result struct {
	Type  string   `json:"type"`
	Roots []string `json:"roots"`
	// EndDetectReason is TRAVERSE_COMPLETE or MAX_DEPTH_REACHED.
	EndDetectReason string `json:"end_detect_reason"`
	// Nodes are the selected package versions ("pkg@version"), sorted: for gomod the build list
	// (minimal version selection over every version reached), for maven the nearest-wins choices.
	Nodes []string `json:"nodes"`
	// Edges are the relationships followed, "from" and "to" package versions, each once.
	Edges []Edge `json:"edges"`
	// Paths are, per selected node, the first path from a root to it (breadth first, in
	// declaration order), rebuilt from the work items' parent links.
	Paths [][]string `json:"paths"`
	// Errors are the node errors: work items that failed, or whose metadata is missing or unusable.
	Errors []NodeError `json:"errors,omitempty"`
	// Counts are work items by outcome.
	Counts Counts `json:"counts"`
}

// Edge is one followed relationship.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// NodeError is one work item's error.
type NodeError struct {
	Item   int64  `json:"item"`
	Node   string `json:"node"`
	Status string `json:"status"` // FAILED, ERROR, or the item's error class
	Error  string `json:"error"`
}

// Counts are a request's work items by what happened to them.
type Counts struct {
	Items    int `json:"items"`    // work items made
	Resolved int `json:"resolved"` // resolved by this request (fetched)
	Avoided  int `json:"avoided"`  // selection or resolution AVOIDED
	Queued   int `json:"queued"`   // not yet past traverse nor ended
	Failed   int `json:"failed"`   // node errors
}

// CountItems counts work items by outcome.
func CountItems(items []*WorkItem) Counts {
	var c Counts
	for _, it := range items {
		if it.ParentID == 0 {
			continue
		}
		c.Items++
		st := it.Status
		switch {
		case it.Error != "" || str(st, StatusResolutionResult) == "FAILED" || str(st, StatusResolutionResult) == "ERROR" || str(st, StatusSelectionResult) == "FAILED":
			c.Failed++
		case str(st, StatusSelectionResult) == "AVOIDED":
			c.Avoided++
		case str(st, StatusTraversalResult) != "":
			if str(st, StatusResolutionResult) == "AVOIDED" {
				c.Avoided++
			} else {
				c.Resolved++
			}
		case str(st, StatusEndDetectResult) == "DONE":
		default:
			c.Queued++
		}
	}
	return c
}

// Progress returns a request's counts so far.
func Progress(ctx context.Context, core Core, jobID int64) (Counts, error) {
	items, err := listWorkItems(ctx, func(ctx context.Context, after string, limit int) ([]*record.Item, error) {
		return core.JobItems(ctx, jobID, after, limit)
	})
	if err != nil {
		return Counts{}, err
	}
	return CountItems(items), nil
}

// format builds the request's result and stores it as the request item's output.
func (g *Graph) format(ctx context.Context, t *action.Task, out action.Output) error {
	r, err := g.request(ctx, t.JobID)
	if err != nil {
		return err
	}
	items, err := taskWorkItems(ctx)
	if err != nil {
		return err
	}
	res := BuildResult(r, items)
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if err := out.SetOutput(ctx, OutputKind, b); err != nil {
		return err
	}
	return nil
}

// BuildResult builds a request's result from its work items.
func BuildResult(r *Request, items []*WorkItem) *Result {
	res := &Result{Type: r.Type, Roots: r.Roots, EndDetectReason: "TRAVERSE_COMPLETE", Counts: CountItems(items),
		Nodes: []string{}, Edges: []Edge{}}
	byID := make(map[int64]*WorkItem, len(items))
	for _, it := range items {
		byID[it.ID] = it
	}
	// The version each select key settled on, from the claimers.
	selectedBy := map[string]string{}
	for _, it := range items {
		if it.ParentID == 0 {
			if it.Error != "" { // register failed: no work item was made
				res.Errors = append(res.Errors, NodeError{Item: it.ID, Node: "request", Status: "ERROR", Error: it.Error})
			}
			if str(it.Status, StatusEndDetectReason) != "" {
				res.EndDetectReason = str(it.Status, StatusEndDetectReason)
			}
			continue
		}
		if v := str(work(it.Metadata), workVersion); v != "" {
			selectedBy[str(it.Metadata, keySelectKey)] = selectedPkg(it.Metadata) + "@" + v
		}
	}
	nodeOf := func(it *WorkItem) string {
		if it == nil || it.ParentID == 0 {
			return ""
		}
		return selectedBy[str(it.Metadata, keySelectKey)]
	}
	// A relocated version (maven) is no node: its relocation stands in its place.
	relocated := map[int64]bool{}
	for _, it := range items {
		if str(it.Metadata, keyKind) == "relocation" {
			relocated[it.ParentID] = true
		}
	}
	// Edges: parent work item's version → child's; children in order under each parent.
	children := map[string][]string{}
	seenEdge := map[Edge]bool{}
	versions := map[string][]string{}
	for _, it := range items {
		if it.ParentID == 0 {
			continue
		}
		if it.Error != "" || str(it.Status, StatusError) != "" {
			status := "ERROR" // a task that failed for good: the item's error
			switch {
			case str(it.Status, StatusResolutionResult) == "FAILED" || str(it.Status, StatusSelectionResult) == "FAILED":
				status = "FAILED"
			case str(it.Status, StatusResolutionResult) == "ERROR":
				status = "ERROR"
			}
			res.Errors = append(res.Errors, NodeError{Item: it.ID, Node: str(it.Metadata, keyPkg) + "@" + str(it.Metadata, keyAdvice),
				Status: status, Error: firstNonEmpty(str(it.Status, StatusError), it.Error)})
		}
		n := nodeOf(it)
		if n == "" || str(it.Status, StatusEndDetectReason) == "MAX_DEPTH_REACHED" || relocated[it.ID] {
			continue
		}
		p, v, _ := splitVersion(n)
		versions[p] = append(versions[p], v)
		parent := byID[it.ParentID]
		for parent != nil && relocated[parent.ID] {
			parent = byID[parent.ParentID]
		}
		if from := nodeOf(parent); from != "" {
			e := Edge{From: from, To: n}
			if !seenEdge[e] {
				seenEdge[e] = true
				res.Edges = append(res.Edges, e)
				children[from] = append(children[from], n)
			}
		}
	}
	sel := mvs(versions)
	if r.Type != "gomod" {
		// One version per package was selected (nearest wins): every node is the selection.
		sel = map[string]string{}
		for p, vs := range versions {
			sel[p] = vs[0]
		}
	}
	for p, v := range sel {
		res.Nodes = append(res.Nodes, p+"@"+v)
	}
	sort.Strings(res.Nodes)
	sort.Slice(res.Edges, func(i, j int) bool {
		if res.Edges[i].From != res.Edges[j].From {
			return res.Edges[i].From < res.Edges[j].From
		}
		return res.Edges[i].To < res.Edges[j].To
	})
	res.Paths = paths(r, children, sel)
	sort.Slice(res.Errors, func(i, j int) bool { return res.Errors[i].Node < res.Errors[j].Node })
	return res
}

// paths returns, for each selected node, the first path to it breadth first from the roots in
// order, each level in declaration order.
func paths(r *Request, children map[string][]string, sel map[string]string) [][]string {
	parent := map[string]string{}
	var queue []string
	seen := map[string]bool{}
	for _, root := range r.Roots {
		if !seen[root] {
			seen[root] = true
			queue = append(queue, root)
		}
	}
	for i := 0; i < len(queue); i++ {
		for _, c := range children[queue[i]] {
			if !seen[c] {
				seen[c] = true
				parent[c] = queue[i]
				queue = append(queue, c)
			}
		}
	}
	out := [][]string{}
	for _, n := range queue {
		p, v, _ := splitVersion(n)
		if sel[p] != v {
			continue
		}
		var path []string
		for c := n; c != ""; c = parent[c] {
			path = append([]string{c}, path...)
		}
		out = append(out, path)
	}
	return out
}

// orEmpty returns s, or an empty slice for a nil one: JSON's [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Render renders a result: node (one selected package version a line), path (one path a line,
// its nodes joined by " > "), dot (a Graphviz digraph) or json.
func Render(res *Result, format string) (string, error) {
	var b strings.Builder
	switch format {
	case "", "node":
		for _, n := range res.Nodes {
			b.WriteString(n + "\n")
		}
	case "path":
		for _, p := range res.Paths {
			b.WriteString(strings.Join(p, " > ") + "\n")
		}
	case "dot":
		b.WriteString("digraph deps {\n")
		for _, e := range res.Edges {
			fmt.Fprintf(&b, "  %q -> %q;\n", e.From, e.To)
		}
		b.WriteString("}\n")
	case "json":
		// The document's arrays are never null, in results stored before BuildResult made
		// them empty ones too.
		out := *res
		out.Roots, out.Nodes, out.Edges, out.Paths = orEmpty(res.Roots), orEmpty(res.Nodes), orEmpty(res.Edges), orEmpty(res.Paths)
		j, err := json.MarshalIndent(&out, "", "  ")
		if err != nil {
			return "", err
		}
		b.Write(j)
		b.WriteString("\n")
	default:
		return "", fmt.Errorf("format %q: want one of %s", format, strings.Join(Formats, ", "))
	}
	return b.String(), nil
}

// Records is what [LoadResult] and [TraverseState] read of the engine's records: a request's
// job's outputs and its request item. A [store.Store] satisfies it, and so do the API's records.
type Records interface {
	OutputList(ctx context.Context, p store.OutputListParams) ([]*record.Output, error)
	ItemList(ctx context.Context, p store.ItemListParams) ([]*record.Item, error)
}

// LoadResult returns a finished request's result, or store.ErrNotFound while it has none.
func LoadResult(ctx context.Context, s Records, jobID int64) (*Result, error) {
	outs, err := s.OutputList(ctx, store.OutputListParams{JobID: jobID, Kind: OutputKind, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(outs) == 0 {
		return nil, store.ErrNotFound
	}
	var res Result
	if err := json.Unmarshal(outs[0].Value, &res); err != nil {
		return nil, fmt.Errorf("graph result of job %d: %w", jobID, err)
	}
	return &res, nil
}

// TraverseState returns a request's state, as Cartographer's Traverse-State header gives it:
// TRAVERSING until the request item's end-detect recorded the end, then FORMATTING until the
// result is stored, then SUCCESS.
func TraverseState(ctx context.Context, s Records, jobID int64) (string, error) {
	var zero int64
	items, err := s.ItemList(ctx, store.ItemListParams{JobID: jobID, ParentID: &zero, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return "TRAVERSING", nil
	}
	var md map[string]any
	if err := json.Unmarshal(items[0].Metadata, &md); err != nil {
		return "", err
	}
	st, _ := md[keyStatus].(map[string]any)
	if str(st, StatusEndDetectResult) != "DONE" {
		return "TRAVERSING", nil
	}
	if _, err := LoadResult(ctx, s, jobID); err == nil {
		return "SUCCESS", nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	return "FORMATTING", nil
}
