package workflow

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Graph is a workflow drawn as a Petri net: steps and events are the two kinds of node; edges
// run from each needed event to its step and from each step to the events it fires on success,
// on failure and as action outcomes. Build one with [NewGraph]; it is immutable and safe for
// concurrent use.
type Graph struct {
	name     string
	external map[string]bool
	nodes    []graphNode
	edges    []graphEdge
	counts   map[string]StepCounts // by step name; nil: no counts drawn
}

// StepCounts is how many of a step's tasks are queued (not yet running), running, done and
// failed, as a job's diagram shows them.
type StepCounts struct {
	Queued, Running, Done, Failed int
}

// String is the counts as a step's box shows them.
func (c StepCounts) String() string {
	return fmt.Sprintf("%d queued · %d running · %d done · %d failed", c.Queued, c.Running, c.Done, c.Failed)
}

// WithCounts returns the diagram showing each step's counts under its action (a step missing
// from counts has none yet); g is unchanged.
func (g *Graph) WithCounts(counts map[string]StepCounts) *Graph {
	c := *g
	c.counts = counts
	if c.counts == nil {
		c.counts = map[string]StepCounts{}
	}
	return &c
}

type nodeKind uint8

const (
	nodeEvent nodeKind = iota
	nodeStep
)

type graphNode struct {
	kind   nodeKind
	name   string
	action string // steps only
}

type edgeKind uint8

const (
	edgeNeeds edgeKind = iota
	edgeSuccess
	edgeFailure
	edgeOutcome
)

type graphEdge struct {
	from, to int
	kind     edgeKind
}

// NewGraph builds the diagram of def. lookup, when not nil, adds the outcome events each
// step's action can emit (dotted edges); without it only success and failure are drawn.
func NewGraph(def *Definition, lookup Lookup) *Graph {
	g := &Graph{name: def.Name, external: make(map[string]bool)}
	events := make(map[string]int)
	event := func(name string) int {
		if i, ok := events[name]; ok {
			return i
		}
		events[name] = len(g.nodes)
		g.nodes = append(g.nodes, graphNode{kind: nodeEvent, name: name})
		return len(g.nodes) - 1
	}
	event(EventStart)
	for _, e := range def.External {
		event(e)
		g.external[e] = true
	}
	type edgeKey struct {
		from, to int
		kind     edgeKind
	}
	seen := make(map[edgeKey]bool)
	edge := func(from, to int, kind edgeKind) {
		k := edgeKey{from, to, kind}
		if !seen[k] {
			seen[k] = true
			g.edges = append(g.edges, graphEdge{from, to, kind})
		}
	}
	for _, s := range def.Steps {
		if s == nil {
			continue
		}
		si := len(g.nodes)
		g.nodes = append(g.nodes, graphNode{kind: nodeStep, name: s.Name, action: s.Action})
		for _, e := range s.Needs {
			edge(event(e), si, edgeNeeds)
		}
		for _, e := range s.Success {
			edge(si, event(e), edgeSuccess)
		}
		for _, e := range s.Failure {
			edge(si, event(e), edgeFailure)
		}
		if lookup == nil {
			continue
		}
		if spec, ok := lookup(s.Action); ok {
			outcomes := slices.Clone(spec.Outcomes)
			if spec.OutcomesFor != nil {
				more, _ := callOutcomesFor(spec.OutcomesFor, s.With)
				outcomes = append(outcomes, more...)
			}
			for _, e := range outcomes {
				if checkName("event name", e) == "" {
					edge(si, event(e), edgeOutcome)
				}
			}
		}
	}
	return g
}

// DOT returns def's diagram in Graphviz DOT. See [Graph.DOT].
func DOT(def *Definition) string { return NewGraph(def, nil).DOT() }

// SVG returns def's diagram as a standalone SVG document. See [Graph.SVG].
func SVG(def *Definition) []byte { return NewGraph(def, nil).SVG() }

func (n graphNode) id() string {
	if n.kind == nodeStep {
		return "s:" + n.name
	}
	return "e:" + n.name
}

// eventFill colours the built-in and sink events so the way in and the ways out stand out.
func eventFill(name string) string {
	switch name {
	case EventStart:
		return "#d7f0d7"
	case EventChildrenDone:
		return "#e6e0f5"
	case EventFail:
		return "#f7d4d0"
	case EventOK:
		return "#d7f0d7"
	}
	return "#ffffff"
}

const (
	stepFill    = "#e8eefc"
	stepStroke  = "#3a5fb0"
	eventStroke = "#555555"
	failColor   = "#c0392b"
	edgeColor   = "#444444"
	extFill     = "#fdebd0"
)

// dotQuote quotes s as a DOT string.
func dotQuote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// DOT returns the diagram in Graphviz DOT. Node IDs are "s:NAME" for steps and "e:NAME" for
// events, so a step and an event may share a name. Failure edges are dashed red, outcome
// edges dotted.
func (g *Graph) DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(g.name))
	b.WriteString("  rankdir=TB;\n")
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=11];\n")
	b.WriteString("  edge [arrowsize=0.7];\n")
	for _, n := range g.nodes {
		if n.kind == nodeStep {
			fmt.Fprintf(&b, "  %s [shape=box, style=\"rounded,filled\", fillcolor=%q, color=%q, label=%s];\n",
				dotQuote(n.id()), stepFill, stepStroke, dotQuote(n.name+"\n("+n.action+")"))
			continue
		}
		fill := eventFill(n.name)
		if fill == "#ffffff" && g.external[n.name] {
			fill = extFill
		}
		fmt.Fprintf(&b, "  %s [shape=ellipse, style=filled, fillcolor=%q, label=%s];\n", dotQuote(n.id()), fill, dotQuote(n.name))
	}
	for _, e := range g.edges {
		fmt.Fprintf(&b, "  %s -> %s", dotQuote(g.nodes[e.from].id()), dotQuote(g.nodes[e.to].id()))
		switch e.kind {
		case edgeFailure:
			fmt.Fprintf(&b, " [style=dashed, color=%q]", failColor)
		case edgeOutcome:
			b.WriteString(" [style=dotted]")
		}
		b.WriteString(";\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// Text metrics for a 12px sans-serif font: an estimate, which is all an SVG without a font
// engine can do. Wide enough for most glyphs so labels stay inside their shapes.
const (
	charW      = 7.2
	smallW     = 6.2
	stepH      = 40.0
	countsH    = 15.0 // the counts line a job's diagram adds to a step
	eventH     = 30.0
	edgeSpread = 14.0
)

func (n graphNode) size() (w, h float64) {
	if n.kind == nodeStep {
		return max(float64(len(n.name))*charW, float64(len(n.action)+2)*smallW) + 24, stepH
	}
	return float64(len(n.name))*smallW + 32, eventH
}

// countsLine is the counts line of a step, as wide as it is drawn (utf8: the dots are one
// character each).
func countsLine(c StepCounts) (string, float64) {
	t := c.String()
	return t, float64(utf8.RuneCountInString(t))*smallW + 24
}

// SVG returns the diagram as a standalone SVG document laid out in layers from start and the
// external events downward: steps are rounded boxes labelled with their name and action, events
// ellipses; success edges are solid, failure edges dashed red, outcome edges dotted.
func (g *Graph) SVG() []byte {
	in := layoutInput{}
	for i, n := range g.nodes {
		w, h := n.size()
		if g.counts != nil && n.kind == nodeStep {
			_, cw := countsLine(g.counts[n.name])
			w, h = max(w, cw), h+countsH
		}
		in.w = append(in.w, w)
		in.h = append(in.h, h)
		if n.kind == nodeEvent && n.name == EventStart {
			in.roots = append([]int{i}, in.roots...)
		}
	}
	// Events with no producing edge come from outside (external, children.done) or from
	// nowhere; they are roots after start.
	produced := make(map[int]bool)
	for _, e := range g.edges {
		in.edges = append(in.edges, [2]int{e.from, e.to})
		if g.nodes[e.from].kind == nodeStep {
			produced[e.to] = true
		}
	}
	for i, n := range g.nodes {
		if n.kind == nodeEvent && n.name != EventStart && !produced[i] {
			in.roots = append(in.roots, i)
		}
	}
	lay := layout(in)

	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		lay.width, lay.height, lay.width, lay.height)
	fmt.Fprintf(&b, "<title>workflow %s</title>\n", esc(g.name))
	b.WriteString("<defs>\n")
	for _, m := range []struct{ id, color string }{{"sluice-arrow", edgeColor}, {"sluice-arrow-failure", failColor}} {
		fmt.Fprintf(&b, `<marker id="%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,1 L10,5 L0,9 z" fill="%s"/></marker>`+"\n", m.id, m.color)
	}
	b.WriteString("</defs>\n")
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="#ffffff"/>`+"\n", lay.width, lay.height)

	// Edges first, so nodes cover their ends. Parallel edges between the same two nodes (a step
	// that fires one event on success and on failure) bow apart so both stay visible.
	type nodePair struct{ a, b int }
	group := make(map[nodePair][]int)
	for i, e := range g.edges {
		k := nodePair{min(e.from, e.to), max(e.from, e.to)}
		group[k] = append(group[k], i)
	}
	b.WriteString(`<g class="edges" fill="none" stroke-width="1.3">` + "\n")
	for i, e := range g.edges {
		pts := lay.paths[i]
		if len(pts) < 2 {
			continue
		}
		k := nodePair{min(e.from, e.to), max(e.from, e.to)}
		grp := group[k]
		off := (float64(slices.Index(grp, i)) - float64(len(grp)-1)/2) * edgeSpread
		class, stroke, marker, dash := "needs", edgeColor, "sluice-arrow", ""
		switch e.kind {
		case edgeSuccess:
			class = "success"
		case edgeFailure:
			class, stroke, marker, dash = "failure", failColor, "sluice-arrow-failure", ` stroke-dasharray="6 4"`
		case edgeOutcome:
			class, dash = "outcome", ` stroke-dasharray="2 3"`
		}
		fmt.Fprintf(&b, `<path class="edge %s" d="%s" stroke="%s"%s marker-end="url(#%s)"><title>%s → %s</title></path>`+"\n",
			class, curve(pts, off), stroke, dash, marker, esc(g.nodes[e.from].name), esc(g.nodes[e.to].name))
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g class="nodes">` + "\n")
	for i, n := range g.nodes {
		x, y := lay.x[i], lay.y[i]
		w, h := in.w[i], in.h[i]
		if n.kind == nodeStep {
			fmt.Fprintf(&b, `<g class="step" data-name="%s"><title>step %s (action %s)</title>`, esc(n.name), esc(n.name), esc(n.action))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="6" fill="%s" stroke="%s"/>`, x-w/2, y-h/2, w, h, stepFill, stepStroke)
			top := y
			if g.counts != nil {
				top = y - countsH/2
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%s</text>`, x, top-3, esc(n.name))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="#555555">%s</text>`, x, top+12, esc(n.action))
			if g.counts != nil {
				line, _ := countsLine(g.counts[n.name])
				fmt.Fprintf(&b, `<text class="counts" x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="#1a1a1a">%s</text>`, x, top+27, esc(line))
			}
			b.WriteString("</g>\n")
			continue
		}
		fill := eventFill(n.name)
		if fill == "#ffffff" && g.external[n.name] {
			fill = extFill
		}
		fmt.Fprintf(&b, `<g class="event" data-name="%s"><title>event %s</title>`, esc(n.name), esc(n.name))
		fmt.Fprintf(&b, `<ellipse cx="%.1f" cy="%.1f" rx="%.1f" ry="%.1f" fill="%s" stroke="%s"/>`, x, y, w/2, h/2, fill, eventStroke)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text></g>`+"\n", x, y+4, esc(n.name))
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes()
}

// curve draws a polyline as cubic Bézier segments with vertical tangents, bowed sideways by off.
func curve(pts []point, off float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "M%.1f,%.1f", pts[0].x, pts[0].y)
	for i := 1; i < len(pts); i++ {
		p, q := pts[i-1], pts[i]
		dy := (q.y - p.y) / 2
		fmt.Fprintf(&b, " C%.1f,%.1f %.1f,%.1f %.1f,%.1f", p.x+off, p.y+dy, q.x+off, q.y-dy, q.x, q.y)
	}
	return b.String()
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writing to a strings.Builder cannot fail
	return b.String()
}
