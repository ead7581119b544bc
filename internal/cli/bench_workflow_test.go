package cli

import (
	"encoding/json"
	"testing"
)

// TestBenchWorkflows: the fanout and chain benches run their workflows to the end and count
// every task: the fanout's root has split and collect, each child work and two skipped steps;
// the chain's items run each of their steps once.
func TestBenchWorkflows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		args           []string
		tasks, run     int
		items, retries int
	}{
		{"fanout", []string{"--mode", "fanout", "--items", "40"}, 3 + 3*40, 2 + 40, 40, 0},
		{"chain", []string{"--mode", "chain", "--items", "6", "--steps", "4"}, 24, 24, 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(t, append([]string{"bench", "engine"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var res benchResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("%v: %s", err, stdout)
			}
			if res.Tasks != tc.tasks || res.TasksRun != tc.run || res.Items != tc.items || res.Retries != tc.retries || res.TasksPerSec <= 0 {
				t.Errorf("got %d tasks (%d run), %d items, %d retries, %.0f tasks/s; want %d (%d), %d, %d",
					res.Tasks, res.TasksRun, res.Items, res.Retries, res.TasksPerSec, tc.tasks, tc.run, tc.items, tc.retries)
			}
		})
	}
}
