package cli

import (
	"math/rand/v2"
	"testing"
)

// TestIDRanges adds ids in a random order to the ranges and to a map: the same set, its ranges
// sorted, disjoint and not adjacent.
func TestIDRanges(t *testing.T) {
	t.Parallel()
	var r idRanges
	set := map[int64]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		id := 1 + rng.Int64N(1000)
		if id%7 == 0 {
			continue // gaps: ranges stay several
		}
		r = r.add(id)
		set[id] = true
	}
	for id := int64(0); id <= 1001; id++ {
		if r.has(id) != set[id] {
			t.Fatalf("has(%d) = %v, want %v", id, r.has(id), set[id])
		}
	}
	for i, e := range r {
		if e[0] > e[1] || i > 0 && r[i-1][1]+1 >= e[0] {
			t.Fatalf("range %d %v after %v: not sorted, disjoint and apart", i, e, r[max(i-1, 0)])
		}
	}
	if len(r) < 100 {
		t.Errorf("%d ranges for ids with a gap every 7", len(r))
	}
}
