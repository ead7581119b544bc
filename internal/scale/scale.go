// Package scale turns the task queues into a scaling signal: per queue and action, the backlog
// (ready tasks due now), the age of the oldest, the tasks running, the throughput (tasks
// completed in the last [Window]) and a recommended number of workers ([Recommend]). GET
// /v1/queues and /metrics serve it; `sluice worker --autoscale` and a Kubernetes autoscaler
// (docs/scale-out.md) act on it.
package scale

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// Window is how far back throughput is counted.
const Window = time.Minute

// DrainTarget is how soon the recommended workers would clear a queue's backlog at the
// throughput each worker showed in the last [Window].
const DrainTarget = time.Minute

// Queue is one queue's figures for one action.
type Queue struct {
	Queue  string `json:"queue"`
	Action string `json:"action"`
	// Backlog counts the ready tasks due now.
	Backlog int `json:"backlog"`
	// OldestAgeSeconds is how long the longest waiting ready task has waited; 0 with no backlog.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	Running          int     `json:"running"`
	// Throughput counts the tasks completed in the last minute.
	Throughput int `json:"throughput"`
	// RecommendedWorkers is [Recommend] of the figures above.
	RecommendedWorkers int `json:"recommended_workers"`
}

// Reader is what [Read] reads: a [store.Store] satisfies it.
type Reader interface {
	QueueStats(ctx context.Context, p store.QueueStatsParams) ([]store.QueueStat, error)
}

// Read returns the queues' figures as of now, by queue then action; queues with nothing ready,
// running or lately completed are left out.
func Read(ctx context.Context, r Reader, now time.Time) ([]Queue, error) {
	stats, err := r.QueueStats(ctx, store.QueueStatsParams{Now: now, Since: now.Add(-Window)})
	if err != nil {
		return nil, err
	}
	out := make([]Queue, 0, len(stats))
	for _, s := range stats {
		q := Queue{Queue: s.Queue, Action: s.Action, Backlog: s.Ready, Running: s.Running, Throughput: s.Completed}
		if s.Ready > 0 && !s.OldestReady.IsZero() {
			q.OldestAgeSeconds = max(now.Sub(s.OldestReady).Seconds(), 0)
		}
		q.RecommendedWorkers = Recommend(q.Backlog, q.Running, q.Throughput)
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b Queue) int {
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return strings.Compare(a.Action, b.Action)
	})
	return out, nil
}

// Recommend returns how many workers a queue needs, from its backlog, the tasks running and
// those completed in the last [Window]:
//
//   - no backlog: the running tasks' workers (running), so a queue scales down as it drains;
//   - a backlog and no completion in the window: nothing tells how fast a worker goes, so one
//     worker per task (running + backlog), which an autoscaler caps at its maximum;
//   - otherwise each busy worker completed throughput / max(running, 1) tasks in the window,
//     and ceil(backlog / (that × DrainTarget / Window)) workers clear the backlog within
//     [DrainTarget]; never fewer than running.
func Recommend(backlog, running, throughput int) int {
	switch {
	case backlog <= 0:
		return running
	case throughput <= 0:
		return running + backlog
	}
	perWorker := float64(throughput) / float64(max(running, 1)) * (DrainTarget.Seconds() / Window.Seconds())
	return max(running, int(math.Ceil(float64(backlog)/perWorker)))
}

// Total sums the recommendations of the queues an action set serves (all when actions is
// empty).
func Total(qs []Queue, actions []string) int {
	n := 0
	for _, q := range qs {
		if len(actions) == 0 || slices.Contains(actions, q.Action) {
			n += q.RecommendedWorkers
		}
	}
	return n
}

// Decide returns the number of local slots an autoscaled worker runs next: the recommendation
// clamped to [lo, hi]. Going up is at once (a backlog waits); going down is by half the
// distance at a time (rounded up), so a lull between two bursts does not drop every slot.
func Decide(current, lo, hi, recommended int) int {
	target := min(max(recommended, lo), hi)
	if target >= current {
		return target
	}
	return max(current-(current-target+1)/2, lo)
}
