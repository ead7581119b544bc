package web

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fleet"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// slowTask is a running task that has run longer than its step usually takes.
type slowTask struct {
	Task    *record.Task
	Running time.Duration
	// Usual is the 95th percentile of the step's completed runs in the job, and Runs how many
	// there are; 0 and 0 when it has none.
	Usual time.Duration
	Runs  int
	// After is how long a run of the step may take before it is shown.
	After time.Duration
}

// waitingTask is a step of an item blocked on external events.
type waitingTask struct {
	JobID, ItemID int64
	Item, Step    string
	Events        []string
	Waiting       time.Duration
	// Keys are the item's metadata as key=value, sorted: the correlation keys an event may be
	// sent by.
	Keys []string
}

// backlog is a queue with ready tasks.
type backlog struct {
	Queue   string
	Ready   int
	Running int
	Retries int
}

// slowRule says when a running task is slow, from its step's completed runs in the job: past
// twice their 95th percentile once the step has run at least slowMinRuns times, and never
// before the minimum; until then, past the minimum alone, so the first runs of a step are
// shown too.
type slowRule struct {
	Min time.Duration
}

// slowMinRuns is how many completed runs of a step its percentile needs to be trusted.
const slowMinRuns = 5

// after returns how long a run of a step whose completed runs took runs may take before it is
// slow, and their 95th percentile (0 with none).
func (r slowRule) after(runs []time.Duration) (after, p95 time.Duration) {
	p95 = percentile(runs, 95)
	if len(runs) < slowMinRuns {
		return r.Min, p95
	}
	return max(2*p95, r.Min), p95
}

// operationsPage shows slow and stuck work across running jobs: tasks running longer than
// usual, tasks waiting on external events, and queues with a backlog.
func (w *Web) operationsPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	ctx := r.Context()
	e := w.b.Engine()
	jobs, err := w.rec.JobListRunning(ctx)
	if err != nil {
		return err
	}
	now := e.Now()
	var slow []slowTask
	var waiting []waitingTask
	queues := map[string]*backlog{}
	for _, j := range jobs {
		counts, err := w.rec.TaskCounts(ctx, j.ID)
		if err != nil {
			return err
		}
		for _, c := range counts {
			q := queues[c.Queue]
			if q == nil {
				q = &backlog{Queue: c.Queue}
				queues[c.Queue] = q
			}
			switch c.State {
			case record.TaskReady:
				q.Ready += c.Tasks
			case record.TaskRunning:
				q.Running += c.Tasks
			}
			q.Retries += c.Retries
		}
		running, err := w.rec.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, State: record.TaskRunning, Limit: 1000})
		if err != nil {
			return err
		}
		if len(running) > 0 {
			// The step's own history: the first 1,000 completed tasks of the job, by step.
			runs := map[string][]time.Duration{}
			done, err := w.rec.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, State: record.TaskComplete, Limit: 1000})
			if err != nil {
				return err
			}
			for _, t := range done {
				if !t.StartedAt.IsZero() && !t.FinishedAt.IsZero() {
					runs[t.Step] = append(runs[t.Step], t.FinishedAt.Sub(t.StartedAt))
				}
			}
			for _, t := range running {
				d := since(now, t.StartedAt)
				after, p95 := w.slow.after(runs[t.Step])
				if d > after {
					slow = append(slow, slowTask{Task: t, Running: d, Usual: p95, Runs: len(runs[t.Step]), After: after})
				}
			}
		}
		ws, err := w.waitingSteps(ctx, j, now)
		if err != nil {
			return err
		}
		waiting = append(waiting, ws...)
	}
	sort.Slice(slow, func(i, j int) bool { return slow[i].Running > slow[j].Running })
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].Waiting > waiting[j].Waiting })
	var qs []backlog
	for _, q := range queues {
		if q.Ready > 0 || q.Running > 0 {
			qs = append(qs, *q)
		}
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Ready > qs[j].Ready })
	workers, err := fleet.List(ctx, w.rec, now)
	if err != nil {
		return err
	}
	rows := make([]workerRow, len(workers))
	for i, m := range workers {
		rows[i] = workerRow{Member: m, Ago: ago(now.Sub(m.Seen))}
	}
	w.render(rw, r, http.StatusOK, "operations", s, pageData{Title: "Slow and stuck", Nav: "operations", Data: struct {
		Jobs    int
		Slow    []slowTask
		Waiting []waitingTask
		Queues  []backlog
		Workers []workerRow
	}{len(jobs), slow, waiting, qs, rows}})
	return nil
}

// workerRow is an engine process or a remote worker of the register, with how long ago it was
// last heard from.
type workerRow struct {
	fleet.Member
	Ago string
}

func ago(d time.Duration) string {
	if d < time.Second {
		return "just now"
	}
	return humanDuration(d) + " ago"
}

// waitingSteps lists the steps of a running job's open items (up to 200 items) that wait on
// external events not yet fired: the job's blocked step instances ([engine.Engine.Waits]) that
// need one.
func (w *Web) waitingSteps(ctx context.Context, j *record.Job, now time.Time) ([]waitingTask, error) {
	e := w.b.Engine()
	def, _, err := e.Definition(ctx, j.WorkflowName, j.WorkflowVersion)
	if err != nil || len(def.External) == 0 {
		return nil, nil
	}
	jw, err := e.Waits(ctx, j.ID, 200)
	if err != nil {
		return nil, err
	}
	var waiting []waitingTask
	for _, iw := range jw.Items {
		var evs []string
		for _, n := range iw.Needs {
			if def.IsExternal(n) {
				evs = append(evs, n)
			}
		}
		if len(evs) > 0 {
			waiting = append(waiting, waitingTask{JobID: j.ID, ItemID: iw.ItemID, Item: iw.Name, Step: iw.Step,
				Events: evs, Waiting: since(now, iw.Since), Keys: iw.Keys})
		}
	}
	return waiting, nil
}

// metadataKeys turns an item's metadata into key=value lines, sorted; values that are not a
// string, number or boolean are left out (an event cannot be sent by them).
func metadataKeys(md []byte) []string { return engine.CorrelationKeys(md) }

// percentile returns the p-th percentile of ds (nearest rank), 0 for none.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 × n), 1-based
	return s[max(rank, 1)-1]
}
