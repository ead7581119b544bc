package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metric"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// TestMetricsOfAttempts: a worker given a metric.Set records each attempt's run time by action
// and outcome and its queue wait by action, and counts its lease renewals and the leases they
// extended; a blocked task keeps being renewed. Its log lines about a task carry the ids.
func TestMetricsOfAttempts(t *testing.T) {
	t.Parallel()
	set := metric.New()
	started, release := make(chan struct{}, 1), make(chan struct{})
	block := &fn{spec: action.Spec{Name: "block"}, run: func(ctx context.Context, tk *action.Task, _ action.Output) error {
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	bad := &fn{spec: action.Spec{Name: "bad"}, run: func(ctx context.Context, tk *action.Task, _ action.Output) error {
		return action.Permanentf("bad input")
	}}
	const lease = 300 * time.Millisecond
	var logs poll.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := setupWith(t, drivertest.OpenSQLite, func(c *worker.Config) { c.LeaseDuration = lease; c.Metrics = set; c.Logger = logger }, block, bad)
	b.startJob(t, "m", "name: m\nsteps:\n  block: {action: block, needs: [start]}\n  bad: {action: bad, needs: [start]}\n",
		engine.Root{Name: "r"})
	<-started
	poll.Until(t, 30*time.Second, "two lease renewals of the blocked task", func() (bool, string) {
		n := counter(t, set, "sluice_lease_renewals_total", nil)
		tasks := counter(t, set, "sluice_lease_renewed_tasks_total", nil)
		return n >= 2 && tasks >= n, fmt.Sprintf("renewals %v extending %v leases", n, tasks)
	})
	close(release)
	poll.Until(t, 30*time.Second, "both attempts observed", func() (bool, string) {
		ok := histCount(t, set, "sluice_task_duration_seconds", map[string]string{"action": "block", "outcome": "succeeded"})
		failed := histCount(t, set, "sluice_task_duration_seconds", map[string]string{"action": "bad", "outcome": "failed"})
		return ok == 1 && failed == 1, fmt.Sprintf("block succeeded %d, bad failed %d", ok, failed)
	})
	for _, a := range []string{"block", "bad"} {
		if n := histCount(t, set, "sluice_task_queue_wait_seconds", map[string]string{"action": a}); n != 1 {
			t.Errorf("queue waits of %s = %d, want 1", a, n)
		}
	}
	// Every log line about a task names its job, item, task, action and attempt (JSON, as
	// --log-format json writes it).
	failedLines := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "task attempt failed" {
			failedLines++
		}
		if _, ok := rec["task_id"]; ok || rec["msg"] == "task attempt failed" {
			for _, k := range []string{"job_id", "item_id", "task_id", "action", "attempt"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("log line about a task lacks %s: %s", k, line)
				}
			}
		}
	}
	if failedLines != 1 {
		t.Errorf("%d lines say the bad attempt failed, want 1:\n%s", failedLines, logs.String())
	}
	if s := histSum(t, set, "sluice_task_duration_seconds", map[string]string{"action": "block", "outcome": "succeeded"}); s < (lease / 3).Seconds() {
		t.Errorf("the blocked attempt ran %vs by the histogram; it outlived two renewals, a third of %v apart", s, lease)
	}
}

// find returns the metric of the family called name whose labels include want.
func find(t *testing.T, set *metric.Set, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := set.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == k && lp.GetValue() == v
				}
				if !found {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

func counter(t *testing.T, set *metric.Set, name string, labels map[string]string) float64 {
	return find(t, set, name, labels).GetCounter().GetValue()
}

func histCount(t *testing.T, set *metric.Set, name string, labels map[string]string) uint64 {
	return find(t, set, name, labels).GetHistogram().GetSampleCount()
}

func histSum(t *testing.T, set *metric.Set, name string, labels map[string]string) float64 {
	return find(t, set, name, labels).GetHistogram().GetSampleSum()
}
