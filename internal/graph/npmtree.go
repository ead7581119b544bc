package graph

import (
	"sort"
	"strings"
)

// npmTree builds the node_modules tree `npm install` builds (npm's arborist, buildIdealTree) from
// a request's selections, and returns what it holds: the package versions reachable from the
// roots, and the edges by which each package resolves each dependency. Any number of versions of a
// package coexist, and a dependency is added only where its dependent cannot already see a
// version its range holds — npm's dedup, by hoisting:
//
//   - Nodes are processed breadth first, by depth and then location; a node's dependencies in
//     name order. A dependency resolves, as Node.js does, to the nearest node_modules holding
//     the name, walking up from its dependent; if that version satisfies the range, nothing is
//     added.
//
//   - Otherwise the version npm-pick-manifest picks (the request's selection for that package
//     and range) is placed as high as it can go: walking up from the dependent (a peer
//     dependency from the dependent's parent, so that it is a sibling), a level is fine if it
//     holds no package of the name and placing it there hides no version a package below
//     relies on; at a level that holds the name, the same version is kept, a version every
//     dependent of the current one accepts (and no lower) replaces it, and anything else stops
//     the walk (the dependent's own level replaces the current one, which re-resolves deeper).
//
//   - After a placement, a node of the same name below it that the version its grandparent
//     level resolves to stands in for (the same version, or an equal one its dependents accept)
//     is removed, with what only it needed (arborist's pruneDedupable).
//
//   - The result is what the roots reach, each edge resolved as Node.js would.
//
//   - A replaced version's dependencies that the new version does not have go, with what only
//     they needed, whoever else depended on them (arborist's REPLACE); those dependents resolve
//     the name again.
//
// npm's arborist does more (peer sets placed with their dependent), and on some graphs its tree
// holds a version this one does not (docs/graph.md).
//
// pick returns the package and version selected for a package and range (false: none, a node
// error); rels a version's relationships that the traversal follows at a distance from the roots
// (0: a root), whatever the tree depth hoisting gave the node.
type npmTree struct {
	live map[*npmNode]bool // the nodes in the tree
	pick func(name, spec string) (string, string, bool)
	rels func(pkg, version string, dist int) []Relationship
}

type npmNode struct {
	name, version string
	sv            semverV
	parent        *npmNode
	children      map[string]*npmNode
	depth         int // in the tree: node_modules levels
	dist          int // from the roots by dependencies, as its first placement found it
	loc           string
	edges         []Relationship
	gone          bool
}

// resolve returns the node a dependency of n on name resolves to.
func (n *npmNode) resolve(name string) *npmNode {
	for t := n; t != nil; t = t.parent {
		if c := t.children[name]; c != nil {
			return c
		}
	}
	return nil
}

func (n *npmNode) descendantOf(t *npmNode) bool {
	for p := n; p != nil; p = p.parent {
		if p == t {
			return true
		}
	}
	return false
}

// satisfies reports whether node c holds spec, as npm's dep-valid decides: any version holds
// "*" (a prerelease too); a range holds the versions it holds; and any version holds a dist-tag,
// which npm cannot check without the registry.
func (tr *npmTree) satisfies(c *npmNode, spec string) bool {
	spec = strings.TrimSpace(spec)
	if spec == "*" || spec == "" {
		return true
	}
	if rng, err := parseNpmRange(spec); err == nil {
		return rng.satisfies(c.sv)
	}
	return isTagName(spec)
}

func (tr *npmTree) newNode(name, version string, parent *npmNode, dist int) *npmNode {
	sv, _ := parseSemver(version)
	n := &npmNode{name: name, version: version, sv: sv, parent: parent, children: map[string]*npmNode{}, dist: dist}
	if parent != nil {
		n.depth = parent.depth + 1
		n.loc = strings.TrimPrefix(parent.loc+"/node_modules/"+name, "/")
		parent.children[name] = n
	}
	n.edges = tr.rels(name, version, dist)
	if tr.live == nil {
		tr.live = map[*npmNode]bool{}
	}
	tr.live[n] = true
	return n
}

// dependents returns the nodes of the tree whose dependency on cur's name resolves to cur, with
// their specs, processed or not (npm's edgesIn), those inside cur left out.
func (tr *npmTree) dependents(cur *npmNode) map[*npmNode]string {
	out := map[*npmNode]string{}
	for n := range tr.live {
		if n.gone || n.descendantOf(cur) {
			continue
		}
		for _, e := range n.edges {
			if e.Target == cur.name && n.resolve(cur.name) == cur {
				out[n] = e.Advice
			}
		}
	}
	return out
}

// build builds the tree from the roots ("name@version") and returns its nodes ("name@version",
// sorted) and edges.
func (tr *npmTree) build(roots []string) ([]string, []Edge) {
	top := &npmNode{children: map[string]*npmNode{}, dist: -1}
	for _, r := range roots {
		name, ver, _ := splitVersion(r)
		top.edges = append(top.edges, Relationship{Target: name, Advice: ver, Kind: "root"})
	}
	sort.SliceStable(top.edges, func(i, j int) bool { return top.edges[i].Target < top.edges[j].Target })
	tr.live = map[*npmNode]bool{top: true}
	queue := []*npmNode{top}
	queued := map[*npmNode]bool{top: true}
	enqueue := func(n *npmNode) {
		if !queued[n] {
			queued[n] = true
			queue = append(queue, n)
		}
	}
	for steps := 0; len(queue) > 0 && steps < 1_000_000; steps++ {
		sort.SliceStable(queue, func(i, j int) bool {
			if queue[i].depth != queue[j].depth {
				return queue[i].depth < queue[j].depth
			}
			return queue[i].loc < queue[j].loc
		})
		n := queue[0]
		queue = queue[1:]
		delete(queued, n)
		if n.gone {
			continue
		}
		var problems []Relationship
		for _, e := range n.edges {
			if c := n.resolve(e.Target); c == nil || !tr.satisfies(c, e.Advice) {
				problems = append(problems, e)
			}
		}
		for _, e := range problems {
			if c := n.resolve(e.Target); c != nil && tr.satisfies(c, e.Advice) {
				continue // placed by an earlier dependency of this step
			}
			pkg, ver, ok := tr.pick(e.Target, e.Advice)
			if !ok || pkg != e.Target {
				continue // a node error, or an override to another package: nothing placed
			}
			placed, requeue := tr.place(n, e, ver)
			if placed == nil {
				continue
			}
			if placed.parent != nil {
				tr.pruneBelow(placed.parent, placed)
			}
			enqueue(placed)
			for _, d := range requeue {
				enqueue(d)
			}
		}
	}
	// What the roots reach, resolving each edge as Node.js would.
	seen := map[*npmNode]bool{top: true}
	order := []*npmNode{top}
	var edges []Edge
	seenEdge := map[Edge]bool{}
	for i := 0; i < len(order); i++ {
		n := order[i]
		for _, e := range n.edges {
			c := n.resolve(e.Target)
			if c == nil || !tr.satisfies(c, e.Advice) {
				continue
			}
			if n != top {
				ed := Edge{From: n.name + "@" + n.version, To: c.name + "@" + c.version}
				if !seenEdge[ed] {
					seenEdge[ed] = true
					edges = append(edges, ed)
				}
			}
			if !seen[c] {
				seen[c] = true
				order = append(order, c)
			}
		}
	}
	set := map[string]bool{}
	for _, n := range order[1:] {
		set[n.name+"@"+n.version] = true
	}
	nodes := make([]string, 0, len(set))
	for k := range set {
		nodes = append(nodes, k)
	}
	sort.Strings(nodes)
	return nodes, edges
}

// place places version ver of e's target for dependent n, and returns the node its dependency
// resolves to and the dependents to process again (their dependency was replaced by a version
// they do not accept).
func (tr *npmTree) place(n *npmNode, e Relationship, ver string) (*npmNode, []*npmNode) {
	name := e.Target
	sv, _ := parseSemver(ver)
	start := n
	if strings.HasPrefix(e.Kind, "peer") && n.parent != nil {
		start = n.parent
	}
	var target *npmNode
	for t := start; t != nil; t = t.parent {
		cur := t.children[name]
		if cur != nil {
			switch {
			case cur.version == ver || tr.satisfies(cur, e.Advice) && !(compareSemver(sv, cur.sv) >= 0 && tr.canReplace(cur, sv)):
				return cur, nil // KEEP
			case compareSemver(sv, cur.sv) >= 0 && tr.canReplace(cur, sv), t == n:
				return tr.replace(t, cur, ver, n.dist+1)
			}
			break // CONFLICT: the last level fine is the one
		}
		if t != n && tr.shadows(t, name, sv) {
			break
		}
		target = t
	}
	if target == nil {
		target = n // nested in the dependent: npm's last resort (a peer conflict is ERESOLVE there)
		if c := n.children[name]; c != nil {
			return tr.replace(n, c, ver, n.dist+1)
		}
	}
	return tr.newNode(name, ver, target, n.dist+1), nil
}

// canReplace reports whether every dependent of cur accepts version sv.
func (tr *npmTree) canReplace(cur *npmNode, sv semverV) bool {
	probe := &npmNode{name: cur.name, version: sv.String(), sv: sv}
	for _, spec := range tr.dependents(cur) {
		if !tr.satisfies(probe, spec) {
			return false
		}
	}
	return true
}

// shadows reports whether placing version sv of name at t would hide, from a package below t,
// the version above t it resolves to and relies on.
func (tr *npmTree) shadows(t *npmNode, name string, sv semverV) bool {
	cur := t.resolve(name)
	if cur == nil {
		return false
	}
	probe := &npmNode{name: name, version: sv.String(), sv: sv}
	for d, spec := range tr.dependents(cur) {
		if d.descendantOf(t) && tr.satisfies(cur, spec) && !tr.satisfies(probe, spec) {
			return true
		}
	}
	return false
}

// replace puts version ver in cur's place at t, cur's children moved under it, and returns it
// with cur's dependents that do not accept it.
func (tr *npmTree) replace(t, cur *npmNode, ver string, dist int) (*npmNode, []*npmNode) {
	deps := tr.dependents(cur)
	cur.gone = true
	delete(tr.live, cur)
	delete(t.children, cur.name)
	nn := tr.newNode(cur.name, ver, t, min(dist, cur.dist))
	for name, c := range cur.children {
		c.parent = nn
		nn.children[name] = c
	}
	var requeue []*npmNode
	for d, spec := range deps {
		if !tr.satisfies(nn, spec) {
			requeue = append(requeue, d)
		}
	}
	// What the old version depended on and the new one does not goes, with what only it needed,
	// unless a package outside what goes still relies on it (arborist's replaceOldDep and
	// pruneForReplacement: the old dependencies' sets gathered with the edges into each set's
	// first node ignored, then gathered again counting every valid edge from outside but the
	// new node's); a package that depended on what goes resolves the name again when it is
	// processed.
	has := map[string]bool{}
	for _, e := range nn.edges {
		has[e.Target] = true
	}
	gone := map[*npmNode]bool{}
	for _, e := range cur.edges {
		if has[e.Target] {
			continue
		}
		to := nn.resolve(e.Target)
		if to == nil || to.parent == nil {
			continue
		}
		for _, d := range tr.pruneSet(to) {
			gone[d] = true
		}
	}
	for kept := true; kept; {
		kept = false
		for d := range gone {
			for dep, spec := range tr.dependents(d) {
				if dep != nn && !gone[dep] && tr.satisfies(d, spec) {
					delete(gone, d)
					kept = true
					break
				}
			}
		}
	}
	drop := make([]*npmNode, 0, len(gone))
	for d := range gone {
		drop = append(drop, d)
	}
	sort.Slice(drop, func(i, j int) bool { return drop[i].loc < drop[j].loc })
	for _, d := range drop {
		for dep := range tr.dependents(d) {
			requeue = append(requeue, dep)
		}
		tr.remove(d)
	}
	sort.Slice(requeue, func(i, j int) bool { return requeue[i].loc < requeue[j].loc })
	return nn, requeue
}

// pruneBelow removes, after a placement at target, the nodes of the same name below target that
// the placed one (or another above them) now stands in for, and for those kept, their children
// that can go (arborist's pruneDedupable after placeDep).
func (tr *npmTree) pruneBelow(target, placed *npmNode) {
	var same []*npmNode
	for m := range tr.live {
		if m != placed && !m.gone && m.name == placed.name && m.parent != nil && m.descendantOf(target) {
			same = append(same, m)
		}
	}
	sort.Slice(same, func(i, j int) bool { return same[i].loc < same[j].loc })
	for _, m := range same {
		if m.gone || tr.prune(m) {
			continue
		}
		kids := make([]*npmNode, 0, len(m.children))
		for _, k := range m.children {
			kids = append(kids, k)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i].loc < kids[j].loc })
		for _, k := range kids {
			if !k.gone {
				tr.prune(k)
			}
		}
	}
}

// prune removes m, with the nodes only it needs, if it can be deduplicated: nothing depends on
// it, or the same name resolved from its parent's parent is the same version, or one every
// dependent of m accepts at an equal version (arborist's canDedupe, without preferDedupe).
func (tr *npmTree) prune(m *npmNode) bool {
	if m.parent == nil || m.parent.parent == nil {
		return false // a top-level package
	}
	deps := tr.dependents(m)
	if len(deps) > 0 {
		other := m.parent.parent.resolve(m.name)
		switch {
		case other == nil:
			return false
		case other.version == m.version:
		case !tr.canReplace(m, other.sv) || compareSemver(other.sv, m.sv) != 0:
			return false
		}
	}
	for _, n := range tr.pruneSet(m) {
		tr.remove(n)
	}
	return true
}

// pruneSet returns m and what only it (and what only they need) depends on: arborist's
// gatherDepSet, edges into m not counted.
func (tr *npmTree) pruneSet(m *npmNode) []*npmNode {
	set := map[*npmNode]bool{m: true}
	for grew := true; grew; {
		grew = false
		for n := range set {
			for _, e := range n.edges {
				to := n.resolve(e.Target)
				if to == nil || set[to] || to.parent == nil || !tr.satisfies(to, e.Advice) {
					continue
				}
				only := true
				for d := range tr.dependents(to) {
					if !set[d] {
						only = false
						break
					}
				}
				if only {
					set[to] = true
					grew = true
				}
			}
		}
	}
	out := make([]*npmNode, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].loc < out[j].loc })
	return out
}

// remove takes n and the nodes nested in it out of the tree.
func (tr *npmTree) remove(n *npmNode) {
	if n.gone {
		return
	}
	n.gone = true
	delete(tr.live, n)
	if n.parent != nil && n.parent.children[n.name] == n {
		delete(n.parent.children, n.name)
	}
	for _, c := range n.children {
		tr.remove(c)
	}
}
