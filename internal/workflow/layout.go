package workflow

import (
	"math"
	"slices"
)

// This file is a small layered (Sugiyama-style) graph layout for the SVG diagram:
//  1. break cycles by reversing DFS back edges (a step may need an event it also fires);
//  2. assign layers by longest path from the sources, then pull each source down to just above
//     its first consumer so external events sit next to the steps that wait for them;
//  3. split edges that span several layers with dummy nodes;
//  4. order each layer by repeated barycenter sweeps, keeping the order with fewest crossings;
//  5. assign x by repeatedly moving nodes toward their neighbours' mean while keeping them
//     apart, and y by layer;
//  6. route each edge through its dummies' positions.
// Everything is deterministic: the same definition always gives the same drawing.

type point struct{ x, y float64 }

// layoutInput is a graph to lay out: node sizes, edges by index, and preferred roots.
type layoutInput struct {
	w, h  []float64
	edges [][2]int
	roots []int // nodes to start the DFS from, in order (start, external events)
}

// layoutOutput places nodes by their centres and routes each input edge as a polyline from its
// source's border to its target's border.
type layoutOutput struct {
	x, y          []float64
	paths         [][]point
	width, height float64
}

const (
	layoutMargin   = 20.0
	layoutLayerGap = 48.0
	layoutNodeGap  = 28.0
	layoutDummyGap = 10.0
	layoutSweeps   = 24
	layoutXPasses  = 12
	// layoutMaxDummies bounds the dummy nodes of long edges.
	layoutMaxDummies = 4000
)

func layout(in layoutInput) layoutOutput {
	n := len(in.w)
	out := make([][]int, n)
	indeg := make([]int, n)
	type pair struct{ a, b int }
	seenPair := make(map[pair]bool)
	for _, e := range in.edges {
		p := pair{e[0], e[1]}
		if e[0] == e[1] || seenPair[p] {
			continue
		}
		seenPair[p] = true
		out[e[0]] = append(out[e[0]], e[1])
		indeg[e[1]]++
	}

	// 1. DFS from the roots, then from sources, then from anything left; back edges reverse.
	state := make([]uint8, n) // 0 new, 1 on stack, 2 done
	order := make([]int, n)   // discovery order, the initial ordering within layers
	next := 0
	reversed := make(map[pair]bool)
	var visit func(v int)
	visit = func(v int) {
		state[v] = 1
		order[v] = next
		next++
		for _, w := range out[v] {
			switch state[w] {
			case 0:
				visit(w)
			case 1:
				reversed[pair{v, w}] = true
			}
		}
		state[v] = 2
	}
	starts := slices.Clone(in.roots)
	for v := range n {
		if indeg[v] == 0 {
			starts = append(starts, v)
		}
	}
	for v := range n {
		starts = append(starts, v)
	}
	for _, v := range starts {
		if state[v] == 0 {
			visit(v)
		}
	}

	// The acyclic graph: every edge points down.
	dagOut := make([][]int, n)
	dagIn := make([][]int, n)
	dagSeen := make(map[pair]bool)
	dagPair := func(a, b int) pair {
		if reversed[pair{a, b}] {
			return pair{b, a}
		}
		return pair{a, b}
	}
	for _, e := range in.edges {
		if e[0] == e[1] {
			continue
		}
		p := dagPair(e[0], e[1])
		if !dagSeen[p] {
			dagSeen[p] = true
			dagOut[p.a] = append(dagOut[p.a], p.b)
			dagIn[p.b] = append(dagIn[p.b], p.a)
		}
	}

	// 2. Longest-path layering in topological order.
	layer := make([]int, n)
	deg := make([]int, n)
	var queue []int
	for v := range n {
		deg[v] = len(dagIn[v])
		if deg[v] == 0 {
			queue = append(queue, v)
		}
	}
	slices.SortFunc(queue, func(a, b int) int { return order[a] - order[b] })
	topo := make([]int, 0, n)
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		topo = append(topo, v)
		for _, w := range dagOut[v] {
			layer[w] = max(layer[w], layer[v]+1)
			if deg[w]--; deg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	for _, v := range topo {
		if len(dagIn[v]) == 0 && len(dagOut[v]) > 0 {
			lo := math.MaxInt
			for _, w := range dagOut[v] {
				lo = min(lo, layer[w])
			}
			layer[v] = lo - 1
		}
	}

	// 3. Dummy nodes for long edges. Node ids ≥ n are dummies.
	w, h := slices.Clone(in.w), slices.Clone(in.h)
	chains := make(map[pair][]int)
	nodeLayer := slices.Clone(layer)
	var up, down [][]int
	up, down = make([][]int, n), make([][]int, n)
	link := func(a, b int) {
		down[a] = append(down[a], b)
		up[b] = append(up[b], a)
	}
	// Dummies cost time and memory in proportion to the layers an edge spans; a hostile
	// definition could ask for millions. Short edges get them first; edges past the budget are
	// drawn straight and left out of crossing reduction.
	var long []pair
	for _, v := range topo {
		for _, t := range dagOut[v] {
			long = append(long, pair{v, t})
		}
	}
	slices.SortStableFunc(long, func(p, q pair) int {
		return (layer[p.b] - layer[p.a]) - (layer[q.b] - layer[q.a])
	})
	budget := layoutMaxDummies
	for _, e := range long {
		v, t := e.a, e.b
		span := layer[t] - layer[v] - 1
		if span > budget {
			chains[e] = []int{v, t}
			continue
		}
		budget -= span
		chain := []int{v}
		prev := v
		for l := layer[v] + 1; l < layer[t]; l++ {
			d := len(w)
			w, h = append(w, 0), append(h, 0)
			nodeLayer = append(nodeLayer, l)
			up, down = append(up, nil), append(down, nil)
			order = append(order, order[v])
			link(prev, d)
			chain = append(chain, d)
			prev = d
		}
		link(prev, t)
		chains[e] = append(chain, t)
	}
	total := len(w)
	nLayers := 0
	for _, l := range nodeLayer {
		nLayers = max(nLayers, l+1)
	}
	layers := make([][]int, nLayers)
	for v := range total {
		layers[nodeLayer[v]] = append(layers[nodeLayer[v]], v)
	}

	// 4. Barycenter ordering.
	pos := make([]float64, total)
	for _, l := range layers {
		slices.SortStableFunc(l, func(a, b int) int { return order[a] - order[b] })
		for i, v := range l {
			pos[v] = float64(i)
		}
	}
	best := cloneLayers(layers)
	bestCross := crossings(layers, down, pos)
	for sweep := 0; sweep < layoutSweeps && bestCross > 0; sweep++ {
		if sweep%2 == 0 {
			for i := 1; i < nLayers; i++ {
				reorder(layers[i], up, pos)
			}
		} else {
			for i := nLayers - 2; i >= 0; i-- {
				reorder(layers[i], down, pos)
			}
		}
		if c := crossings(layers, down, pos); c < bestCross {
			bestCross, best = c, cloneLayers(layers)
		}
	}
	layers = best
	for _, l := range layers {
		for i, v := range l {
			pos[v] = float64(i)
		}
	}

	// 5. Coordinates.
	x := make([]float64, total)
	y := make([]float64, total)
	sep := func(a, b int) float64 {
		gap := layoutNodeGap
		if a >= n || b >= n {
			gap = layoutDummyGap
		}
		return (w[a]+w[b])/2 + gap
	}
	top := layoutMargin
	for _, l := range layers {
		lh := 0.0
		for _, v := range l {
			lh = max(lh, h[v])
		}
		for i, v := range l {
			y[v] = top + lh/2
			if i > 0 {
				x[v] = x[l[i-1]] + sep(l[i-1], v)
			}
		}
		top += lh + layoutLayerGap
	}
	for pass := range layoutXPasses {
		if pass%2 == 0 {
			for i := 1; i < nLayers; i++ {
				place(layers[i], up, x, sep)
			}
		} else {
			for i := nLayers - 2; i >= 0; i-- {
				place(layers[i], down, x, sep)
			}
		}
	}
	minX, maxX := math.Inf(1), math.Inf(-1)
	for v := range total {
		minX = min(minX, x[v]-w[v]/2)
		maxX = max(maxX, x[v]+w[v]/2)
	}
	if total == 0 {
		minX, maxX = 0, 0
	}
	for v := range total {
		x[v] += layoutMargin - minX
	}

	// 6. Routes.
	res := layoutOutput{x: x[:n], y: y[:n], width: maxX - minX + 2*layoutMargin, height: top - layoutLayerGap + layoutMargin}
	if total == 0 {
		res.height = 2 * layoutMargin
	}
	res.paths = make([][]point, len(in.edges))
	for i, e := range in.edges {
		if e[0] == e[1] {
			continue
		}
		p := dagPair(e[0], e[1])
		chain := chains[p]
		pts := make([]point, 0, len(chain))
		for j, v := range chain {
			pt := point{x[v], y[v]}
			switch j {
			case 0:
				pt.y += h[v] / 2
			case len(chain) - 1:
				pt.y -= h[v] / 2
			}
			pts = append(pts, pt)
		}
		if p.a != e[0] {
			slices.Reverse(pts)
		}
		res.paths[i] = pts
	}
	return res
}

func cloneLayers(ls [][]int) [][]int {
	out := make([][]int, len(ls))
	for i, l := range ls {
		out[i] = slices.Clone(l)
	}
	return out
}

// reorder sorts a layer by the mean position of each node's neighbours in the adjacent layer;
// a node without neighbours keeps its position.
func reorder(l []int, adj [][]int, pos []float64) {
	key := make(map[int]float64, len(l))
	for _, v := range l {
		if len(adj[v]) == 0 {
			key[v] = pos[v]
			continue
		}
		sum := 0.0
		for _, u := range adj[v] {
			sum += pos[u]
		}
		key[v] = sum / float64(len(adj[v]))
	}
	slices.SortStableFunc(l, func(a, b int) int {
		switch ka, kb := key[a], key[b]; {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	for i, v := range l {
		pos[v] = float64(i)
	}
}

// crossings counts edge crossings between adjacent layers by counting inversions.
func crossings(layers [][]int, down [][]int, pos []float64) int {
	total := 0
	for i := 0; i+1 < len(layers); i++ {
		type seg struct{ a, b int }
		var segs []seg
		for _, v := range layers[i] {
			for _, u := range down[v] {
				segs = append(segs, seg{int(pos[v]), int(pos[u])})
			}
		}
		slices.SortFunc(segs, func(p, q seg) int {
			if p.a != q.a {
				return p.a - q.a
			}
			return p.b - q.b
		})
		// Fenwick tree over target positions: count earlier segments ending to the right.
		size := len(layers[i+1]) + 1
		tree := make([]int, size+1)
		seen := 0
		for _, s := range segs {
			le := 0
			for j := s.b + 1; j > 0; j -= j & -j {
				le += tree[j]
			}
			total += seen - le
			for j := s.b + 1; j <= size; j += j & -j {
				tree[j]++
			}
			seen++
		}
	}
	return total
}

// place moves the nodes of a layer toward the mean x of their neighbours while keeping the
// layer's order and spacing: the mean of the leftmost and rightmost feasible placements.
func place(l []int, adj [][]int, x []float64, sep func(a, b int) float64) {
	if len(l) == 0 {
		return
	}
	want := make([]float64, len(l))
	for i, v := range l {
		want[i] = x[v]
		if len(adj[v]) > 0 {
			sum := 0.0
			for _, u := range adj[v] {
				sum += x[u]
			}
			want[i] = sum / float64(len(adj[v]))
		}
	}
	left := make([]float64, len(l))
	right := make([]float64, len(l))
	for i := range l {
		left[i] = want[i]
		if i > 0 {
			left[i] = max(want[i], left[i-1]+sep(l[i-1], l[i]))
		}
	}
	for i := len(l) - 1; i >= 0; i-- {
		right[i] = want[i]
		if i < len(l)-1 {
			right[i] = min(want[i], right[i+1]-sep(l[i], l[i+1]))
		}
	}
	for i, v := range l {
		x[v] = (left[i] + right[i]) / 2
	}
}
