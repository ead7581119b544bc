package web

import (
	"testing"
	"time"
)

// TestSlowRule: a step with too few completed runs is slow past the minimum alone (its first
// runs count); with enough, past twice their 95th percentile, never before the minimum.
func TestSlowRule(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	r := slowRule{Min: 30 * time.Second}
	for _, tc := range []struct {
		name       string
		runs       []time.Duration
		after, p95 time.Duration
	}{
		{"no run yet", nil, 30 * time.Second, 0},
		{"four runs: too few", ms(90_000, 90_000, 90_000, 90_000), 30 * time.Second, 90 * time.Second},
		{"fast step: the minimum", ms(100, 120, 80, 110, 95, 105), 30 * time.Second, 120 * time.Millisecond},
		{"slow step: twice its p95", ms(20_000, 21_000, 25_000, 22_000, 60_000, 23_000, 24_000, 22_000, 21_000, 20_000,
			21_000, 22_000, 23_000, 24_000, 25_000, 20_000, 21_000, 22_000, 23_000, 24_000), 50 * time.Second, 25 * time.Second},
	} {
		after, p95 := r.after(tc.runs)
		if after != tc.after || p95 != tc.p95 {
			t.Errorf("%s: after %s, p95 %s; want %s, %s", tc.name, after, p95, tc.after, tc.p95)
		}
	}
}
