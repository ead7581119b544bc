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

// slowTask is a running task that has run longer than its action usually takes.
type slowTask struct {
	Task    *record.Task
	Running time.Duration
	Usual   time.Duration // 0 when there is no history
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

// slowFloor is the least running time shown as slow when the action has no history.
const slowFloor = time.Minute

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
		usual := map[string][]time.Duration{}
		done, err := w.rec.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, State: record.TaskComplete, Limit: 1000})
		if err != nil {
			return err
		}
		for _, t := range done {
			if !t.StartedAt.IsZero() && !t.FinishedAt.IsZero() {
				usual[t.Action] = append(usual[t.Action], t.FinishedAt.Sub(t.StartedAt))
			}
		}
		running, err := w.rec.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, State: record.TaskRunning, Limit: 1000})
		if err != nil {
			return err
		}
		for _, t := range running {
			d := since(now, t.StartedAt)
			u := median(usual[t.Action])
			if (u > 0 && d > 3*u && d > 5*time.Second) || (u == 0 && d > slowFloor) {
				slow = append(slow, slowTask{Task: t, Running: d, Usual: u})
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

// waitingSteps lists the steps of a running job's open items (up to 200) that wait on external
// events not yet fired. Blocked tasks have no row: a step waits on an external event when the
// item is still open, the step needs an external event not yet fired, and the step has not run.
func (w *Web) waitingSteps(ctx context.Context, j *record.Job, now time.Time) ([]waitingTask, error) {
	e := w.b.Engine()
	def, _, err := e.Definition(ctx, j.WorkflowName, j.WorkflowVersion)
	if err != nil || len(def.External) == 0 {
		return nil, nil
	}
	open, err := w.rec.ItemList(ctx, store.ItemListParams{JobID: j.ID, States: []record.ItemState{record.ItemWritten}, Limit: 200})
	if err != nil {
		return nil, err
	}
	var waiting []waitingTask
	for _, it := range open {
		fired, err := w.rec.EventListByItem(ctx, it.ID)
		if err != nil {
			return nil, err
		}
		tasks, err := w.rec.TaskListByItem(ctx, it.ID)
		if err != nil {
			return nil, err
		}
		ran := map[string]bool{}
		for _, t := range tasks {
			ran[t.Step] = true
		}
		for _, step := range def.Steps {
			if ran[step.Name] {
				continue
			}
			var evs []string
			for _, n := range step.Needs {
				if def.IsExternal(n) && !slices.Contains(fired, n) {
					evs = append(evs, n)
				}
			}
			if len(evs) > 0 {
				waiting = append(waiting, waitingTask{JobID: j.ID, ItemID: it.ID, Item: it.Name, Step: step.Name,
					Events: evs, Waiting: since(now, it.CreatedAt), Keys: metadataKeys(it.Metadata)})
			}
		}
	}
	return waiting, nil
}

// metadataKeys turns an item's metadata into key=value lines, sorted; values that are not a
// string, number or boolean are left out (an event cannot be sent by them).
func metadataKeys(md []byte) []string { return engine.CorrelationKeys(md) }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
