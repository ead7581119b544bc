package scale_test

import (
	"testing"

	"github.com/sluice-project/sluice/internal/scale"
)

func TestRecommend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                         string
		backlog, running, throughput int
		want                         int
	}{
		{"idle", 0, 0, 0, 0},
		{"draining", 0, 3, 50, 3},
		{"backlog, rate unknown", 7, 1, 0, 8},
		{"one worker keeps up", 5, 1, 10, 1},
		{"needs three", 30, 1, 10, 3},
		{"rate per busy worker", 120, 4, 40, 12},
		{"never below running", 1, 6, 600, 6},
	} {
		if got := scale.Recommend(tc.backlog, tc.running, tc.throughput); got != tc.want {
			t.Errorf("%s: Recommend(%d, %d, %d) = %d, want %d", tc.name, tc.backlog, tc.running, tc.throughput, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                 string
		current, lo, hi, rec int
		want                 int
	}{
		{"up at once", 1, 1, 8, 6, 6},
		{"capped", 2, 1, 8, 50, 8},
		{"floor", 3, 2, 8, 0, 2},
		{"down by half the gap", 8, 1, 8, 0, 4},
		{"down the last one", 2, 1, 8, 1, 1},
		{"steady", 4, 1, 8, 4, 4},
	} {
		if got := scale.Decide(tc.current, tc.lo, tc.hi, tc.rec); got != tc.want {
			t.Errorf("%s: Decide(%d, %d, %d, %d) = %d, want %d", tc.name, tc.current, tc.lo, tc.hi, tc.rec, got, tc.want)
		}
	}
}

func TestTotal(t *testing.T) {
	t.Parallel()
	qs := []scale.Queue{{Action: "pdf", RecommendedWorkers: 3}, {Action: "office", RecommendedWorkers: 2}}
	if scale.Total(qs, nil) != 5 || scale.Total(qs, []string{"office"}) != 2 {
		t.Error("Total")
	}
}
