package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// jobItems pages the items of a job through core, for [listWorkItems].
func jobItems(core Core, jobID int64) func(ctx context.Context, after string, limit int) ([]*record.Item, error) {
	return func(ctx context.Context, after string, limit int) ([]*record.Item, error) {
		return core.JobItems(ctx, jobID, after, limit)
	}
}

// Progress returns a request's counts so far.
func Progress(ctx context.Context, core Core, jobID int64) (Counts, error) {
	items, err := listWorkItems(ctx, jobItems(core, jobID))
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
	res, err := BuildResult(ctx, r, items, relationships)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if err := out.SetOutput(ctx, OutputKind, b); err != nil {
		return err
	}
	return nil
}

// RelationshipsFunc reads a resolved version's relationships (a [Store]'s Relationships).
type RelationshipsFunc func(ctx context.Context, typ, pkg, version string) ([]Relationship, error)

// BuildResult builds a request's result from its work items; an npm request's from the tree npm
// would build of them, reading the versions' relationships with rels.
func BuildResult(ctx context.Context, r *Request, items []*WorkItem, rels RelationshipsFunc) (*Result, error) {
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
		if ne, ok := nodeError(it); ok {
			res.Errors = append(res.Errors, ne)
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
	if r.Type == "npm" {
		if err := npmResult(ctx, r, res, selectedBy, rels); err != nil {
			return nil, err
		}
		sort.Slice(res.Errors, func(i, j int) bool { return res.Errors[i].Node < res.Errors[j].Node })
		return res, nil
	}
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
	sortEdges(res.Edges)
	roots := make([]string, len(r.Roots))
	for i, root := range r.Roots {
		// A root's version as selected ("latest" resolved).
		roots[i] = firstNonEmpty(selectedBy[r.Type+":"+root], root)
	}
	res.Paths = paths(roots, children, func(n string) bool {
		p, v, _ := splitVersion(n)
		return sel[p] == v
	})
	sort.Slice(res.Errors, func(i, j int) bool { return res.Errors[i].Node < res.Errors[j].Node })
	return res, nil
}

// npmResult fills an npm request's nodes, edges and paths from the tree npm would build of the
// request's selections (see [npmTree]).
func npmResult(ctx context.Context, r *Request, res *Result, selectedBy map[string]string, rels RelationshipsFunc) error {
	var readErr error
	tr := &npmTree{
		pick: func(name, spec string) (string, string, bool) {
			p, v, ok := splitVersion(selectedBy["npm:"+name+"@"+spec])
			return p, v, ok
		},
		rels: func(pkg, version string, dist int) []Relationship {
			if r.MaxDepth > 0 && dist >= r.MaxDepth {
				return nil // the traversal stopped below: its relationships were not followed
			}
			all, err := rels(ctx, "npm", pkg, version)
			if err != nil && readErr == nil {
				readErr = err
			}
			scope := ScopeRuntime
			if dist == 0 {
				scope = r.Scope // a root's
			}
			return follow(r, all, scope, nil)
		},
	}
	nodes, edges := tr.build(r.Roots)
	if readErr != nil {
		return readErr
	}
	res.Nodes, res.Edges = nodes, edges
	sortEdges(res.Edges)
	children := map[string][]string{}
	for _, e := range edges {
		children[e.From] = append(children[e.From], e.To)
	}
	res.Paths = paths(r.Roots, children, func(string) bool { return true })
	return nil
}

func sortEdges(es []Edge) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].From != es[j].From {
			return es[i].From < es[j].From
		}
		return es[i].To < es[j].To
	})
}

// nodeError returns a work item's node error, if it has one: FAILED or ERROR recorded by a
// route, or the error of a task that failed for good.
func nodeError(it *WorkItem) (NodeError, bool) {
	if it.ParentID == 0 || (it.Error == "" && str(it.Status, StatusError) == "") {
		return NodeError{}, false
	}
	status := "ERROR" // a task that failed for good: the item's error
	if str(it.Status, StatusResolutionResult) == "FAILED" || str(it.Status, StatusSelectionResult) == "FAILED" {
		status = "FAILED"
	}
	return NodeError{Item: it.ID, Node: str(it.Metadata, keyPkg) + "@" + str(it.Metadata, keyAdvice),
		Status: status, Error: firstNonEmpty(str(it.Status, StatusError), it.Error)}, true
}

// StopReason returns why a failed request stopped: the errors its routes recorded on its work
// items (an unknown package type's resolution-result ERROR names the type), joined with "; ",
// or "" when none did. Work items the job's end settled say only that, and are left out.
func StopReason(ctx context.Context, core Core, jobID int64) (string, error) {
	items, err := listWorkItems(ctx, jobItems(core, jobID))
	if err != nil {
		return "", err
	}
	var msgs []string
	for _, it := range items {
		if e := str(it.Status, StatusError); e != "" && !slices.Contains(msgs, e) {
			msgs = append(msgs, e)
		}
		if len(msgs) == 3 {
			break
		}
	}
	return strings.Join(msgs, "; "), nil
}

// paths returns, for each selected node, the first path to it breadth first from the roots in
// order, each level in declaration order.
func paths(roots []string, children map[string][]string, selected func(node string) bool) [][]string {
	parent := map[string]string{}
	var queue []string
	seen := map[string]bool{}
	for _, root := range roots {
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
		if !selected(n) {
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

// Render renders a result: node (one selected package version a line), path (every path from a
// root to each node, a path a line, its nodes joined by " > ", at most 100 per node and then a
// line counting the others), dot (a Graphviz digraph) or json. A template is rendered by
// [RenderTemplate].
func Render(res *Result, format string) (string, error) {
	var b strings.Builder
	switch format {
	case "", "node":
		for _, n := range res.Nodes {
			b.WriteString(n + "\n")
		}
	case "path":
		b.WriteString(renderPaths(res))
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
	case "template":
		return "", errors.New("format template: a template is needed (format template=FILE, or the request's template)")
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

// Status is a request's progress (GET /v1/graphs/{id}/status): its work items by outcome so far,
// and the depth the traversal reached (the roots are depth 0).
type Status struct {
	// State is the Traverse-State: TRAVERSING, FORMATTING, SUCCESS or ERROR.
	State string `json:"state"`
	Counts
	Depth int `json:"depth"`
}

// RequestStatus returns a request's progress.
func RequestStatus(ctx context.Context, core Core, jobID int64) (Status, error) {
	items, err := listWorkItems(ctx, jobItems(core, jobID))
	if err != nil {
		return Status{}, err
	}
	st := Status{Counts: CountItems(items)}
	for _, it := range items {
		if it.ParentID != 0 && it.Depth-1 > st.Depth {
			st.Depth = it.Depth - 1
		}
	}
	return st, nil
}

// LogEntry is one work item's decisions (GET /v1/graphs/{id}/logs): what each route recorded,
// with Cartographer's header names (select-status, selection-result, resolve-status,
// resolution-result, traversal-result, end-detect-result, end-detect-reason, error), and the
// item's own decisions (the version selected, the claimers).
type LogEntry struct {
	Item    int64  `json:"item"`
	Parent  int64  `json:"parent"`
	Depth   int    `json:"depth"` // the roots are 0
	Package string `json:"package"`
	Advice  string `json:"advice"`
	Kind    string `json:"kind"`
	Scope   string `json:"scope"`
	// Headers are the routes' statuses.
	Headers map[string]any `json:"headers"`
	// Work is what the item's routes decided: version, selected, resolve_key, select_claimer,
	// resolve_claimer.
	Work map[string]any `json:"work"`
	// Error is the error of a task of the item that failed for good.
	Error string `json:"error,omitempty"`
}

// maxLogPage bounds one page of a request's log.
const maxLogPage = 5000

// RequestLog returns up to limit (at most 5,000) work items' log entries in tree order, those
// after the sort key after, and the key to ask the next page after ("" at the end).
func RequestLog(ctx context.Context, core Core, jobID int64, after string, limit int) ([]LogEntry, string, error) {
	if limit <= 0 || limit > maxLogPage {
		limit = maxLogPage
	}
	out := []LogEntry{}
	for {
		want := limit - len(out)
		items, err := core.JobItems(ctx, jobID, after, want)
		if err != nil {
			return nil, "", err
		}
		for _, it := range items {
			after = it.SortKey
			if it.ParentID == 0 {
				continue
			}
			var md map[string]any
			if err := json.Unmarshal(it.Metadata, &md); err != nil {
				return nil, "", fmt.Errorf("metadata of item %d: %w", it.ID, err)
			}
			st, _ := md[keyStatus].(map[string]any)
			out = append(out, LogEntry{Item: it.ID, Parent: it.ParentID, Depth: it.Depth - 1, Package: str(md, keyPkg), Advice: str(md, keyAdvice),
				Kind: str(md, keyKind), Scope: str(md, keyScope), Headers: orEmptyMap(st), Work: orEmptyMap(work(md)), Error: it.Error})
		}
		switch {
		case len(items) < want:
			return out, "", nil // the end
		case len(out) >= limit:
			return out, after, nil
		}
	}
}

func orEmptyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
