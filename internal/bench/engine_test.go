package bench

import (
	"bytes"
	"encoding/json"
	"strings"
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
			code, stdout, stderr := run(t, append([]string{"engine"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var res engineResult
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

// TestBenchPaced: the paced bench inserts every root (several per tick when it is behind: the
// rate here is above the ticker's 1 ms floor), runs each, and reads a pickup latency back for
// each task.
func TestBenchPaced(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := run(t, "engine", "--mode", "paced", "--rate", "2000", "--tasks", "300")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res engineResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if res.Mode != "paced" || res.Tasks != 300 || res.InsertRate <= 0 || res.PickupMax <= 0 || res.PickupP50 > res.PickupMax {
		t.Errorf("got mode %q, %d tasks, %.0f inserts/s, pickup p50 %.2f ms, max %.2f ms; want paced, 300, a rate, latencies read back",
			res.Mode, res.Tasks, res.InsertRate, res.PickupP50, res.PickupMax)
	}
}

// TestBenchProcessesNeedsWorkflow: --processes is refused outside fanout and chain, naming the
// mode, since worker processes already running would work through a burndown's untimed insert.
func TestBenchProcessesNeedsWorkflow(t *testing.T) {
	t.Parallel()
	code, _, stderr := run(t, "engine", "--tasks", "10", "--processes", "2", "--database", "postgres://127.0.0.1:1/none")
	if code != 2 || !strings.Contains(stderr, "--processes runs the tasks of --mode fanout or chain, not of burndown") {
		t.Fatalf("exit %d, stderr %q; want 2 and the refusal naming burndown", code, stderr)
	}
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}
