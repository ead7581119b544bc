package graph_test

import (
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
)

// TestOverlappingRequestsResolveOnce starts two requests over overlapping graphs at the same
// time, 8 workers per action: every module version is fetched once at the source, the versions
// both need are resolved by one work item in all and AVOIDED by the other request's, and each
// result equals the request's run alone.
func TestOverlappingRequestsResolveOnce(t *testing.T) {
	t.Parallel()
	g, _ := randomGraph(7, 70)
	dir := t.TempDir()
	writeProxy(t, dir, g)
	reqA := graph.Request{Type: "gomod", Roots: []string{"example.com/m0@v1.0.0"}}
	reqB := graph.Request{Type: "gomod", Roots: []string{"example.com/m4@v1.0.0", "example.com/m9@v1.0.0"}}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		proxy := newCountingProxy(t, dir, nil)
		reqA.Source, reqB.Source = proxy.URL, proxy.URL
		k := startKit(t, open, 8, graph.Config{Egress: loopback(t)})
		jobA, jobB := k.startRequest(t, reqA), k.startRequest(t, reqB)
		resA, resB := k.result(t, jobA, 2*time.Minute), k.result(t, jobB, 2*time.Minute)

		for path, n := range proxy.fetches() {
			if n != 1 {
				t.Errorf("%s fetched %d times", path, n)
			}
		}
		// Every version was resolved (DONE) by exactly one work item in all; a version both
		// requests traversed is DONE in one and AVOIDED in the other.
		byVersion := map[string][]string{}
		for _, job := range []int64{jobA.ID, jobB.ID} {
			for _, md := range workItems(t, k.Store, job) {
				w, _ := md["work"].(map[string]any)
				v, _ := w["version"].(string)
				if v == "" || status(md, "selection-result") != "DONE" {
					continue
				}
				rr := status(md, "resolution-result")
				if rr != "DONE" && rr != "AVOIDED" {
					t.Errorf("job %d: work item %v@%s: resolution-result %q", job, md["pkg"], v, rr)
				}
				byVersion[md["pkg"].(string)+"@"+v] = append(byVersion[md["pkg"].(string)+"@"+v], rr)
			}
		}
		shared := 0
		for mv, rs := range byVersion {
			sort.Strings(rs)
			switch {
			case len(rs) == 2 && rs[0] == "AVOIDED" && rs[1] == "DONE":
				shared++
			case len(rs) != 1 || rs[0] != "DONE":
				t.Errorf("%s: %v, want DONE once (and AVOIDED in the other request when both traverse it)", mv, rs)
			}
		}
		if shared < 10 {
			t.Fatalf("the requests should overlap: %d versions traversed by both", shared)
		}
		t.Logf("%d fetches, %d versions resolved in one request and AVOIDED in the other", len(proxy.fetches()), shared)

		// Each alone, on a store of its own, gives the same result.
		for i, c := range []struct {
			req graph.Request
			got *graph.Result
		}{{reqA, resA}, {reqB, resB}} {
			alone := startKit(t, open, 8, graph.Config{Egress: loopback(t)}).run(t, c.req)
			c.got.Counts, alone.Counts = graph.Counts{}, graph.Counts{}
			if !reflect.DeepEqual(c.got, alone) {
				t.Errorf("request %d: concurrent result differs from its single run:\n%+v\n%+v", i, c.got, alone)
			}
		}
	})
}

// TestResultIndependentOfOrderAndWorkers runs the same graph with 1 and 16 workers per action,
// and with every .mod file's requirements (and the roots) shuffled: the same nodes and edges;
// the same paths too where the declaration order is the same.
func TestResultIndependentOfOrderAndWorkers(t *testing.T) {
	t.Parallel()
	type variant struct {
		dir, sdir     string
		roots, sroots []string
	}
	var variants []variant
	for seed := int64(1); seed <= 2; seed++ {
		g, roots := randomGraph(seed*100, 40)
		roots = append(roots, "example.com/m7@v1.0.0", "example.com/m20@v1.0.0")
		rng := rand.New(rand.NewSource(seed))
		shuffled := modGraph{}
		for mv, reqs := range g {
			r := append([]string(nil), reqs...)
			rng.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
			shuffled[mv] = r
		}
		sroots := append([]string(nil), roots...)
		for strings.Join(sroots, ",") == strings.Join(roots, ",") {
			rng.Shuffle(len(sroots), func(i, j int) { sroots[i], sroots[j] = sroots[j], sroots[i] })
		}
		v := variant{dir: t.TempDir(), sdir: t.TempDir(), roots: roots, sroots: sroots}
		writeProxy(t, v.dir, g)
		writeProxy(t, v.sdir, shuffled)
		variants = append(variants, v)
	}
	// One driver subtest for all variants: a second subtest of the same name would be "sqlite#01",
	// and the SQLite driver reads a '#' in its path as the start of a URI fragment.
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		for i, v := range variants {
			one := startKit(t, open, 1, graph.Config{}).run(t, graph.Request{Source: v.dir, Roots: v.roots})
			many := startKit(t, open, 16, graph.Config{}).run(t, graph.Request{Source: v.dir, Roots: v.roots})
			shuf := startKit(t, open, 16, graph.Config{}).run(t, graph.Request{Source: v.sdir, Roots: v.sroots})
			if len(one.Nodes) < 20 || one.Counts.Resolved == 0 {
				t.Fatalf("variant %d: a graph of %d modules (%+v) is too small to tell", i, len(one.Nodes), one.Counts)
			}
			for _, r := range []*graph.Result{one, many, shuf} {
				if r.Counts != one.Counts {
					t.Errorf("variant %d: counts %+v, want %+v", i, r.Counts, one.Counts)
				}
			}
			if !reflect.DeepEqual(one, many) {
				t.Errorf("variant %d: 1 worker and 16 differ:\n%v\n%v", i, one.Nodes, many.Nodes)
			}
			if !reflect.DeepEqual(one.Nodes, shuf.Nodes) || !reflect.DeepEqual(one.Edges, shuf.Edges) {
				t.Errorf("variant %d: shuffled declarations change the graph:\n%v\n%v", i, one.Nodes, shuf.Nodes)
			}
		}
	})
}
