package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/record"
)

// abandonAfter is how long a stop waits for the tasks it canceled at the end of the drain to
// return before it abandons them: an action that ignores its context (a blocking call with no
// deadline) must not keep the process from exiting.
var abandonAfter = 5 * time.Second

// running is the set of tasks whose action runs, for a stop's account of each of them. Safe for
// concurrent use.
type running struct {
	mu        sync.Mutex
	tasks     map[int64]*record.Task
	draining  bool
	abandoned map[int64]bool
}

func newRunning() *running {
	return &running{tasks: map[int64]*record.Task{}, abandoned: map[int64]bool{}}
}

func (r *running) add(t *record.Task) {
	r.mu.Lock()
	r.tasks[t.ID] = t
	r.mu.Unlock()
}

func (r *running) remove(id int64) {
	r.mu.Lock()
	delete(r.tasks, id)
	r.mu.Unlock()
}

// list returns the running tasks; with drain set, from now on the worker is draining.
func (r *running) list(drain bool) []*record.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.draining = r.draining || drain
	out := make([]*record.Task, 0, len(r.tasks))
	for _, t := range r.tasks {
		out = append(out, t)
	}
	return out
}

// isDraining reports whether a stop has begun.
func (r *running) isDraining() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.draining
}

// abandon marks the tasks still running as abandoned and returns them.
func (r *running) abandon() []*record.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*record.Task, 0, len(r.tasks))
	for id, t := range r.tasks {
		r.abandoned[id] = true
		out = append(out, t)
	}
	return out
}

func (r *running) isAbandoned(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.abandoned[id]
}

// drain lets the running tasks finish until ctx ends, then cancels them, and abandons those
// that still run abandonAfter later, releasing their leases. Leasing has stopped.
func (w *Worker) drain(ctx context.Context) {
	tasks := w.running.list(true)
	done := make(chan struct{})
	go func() { w.tasks.Wait(); close(done) }()
	select {
	case <-done:
		if len(tasks) > 0 {
			w.log.Info("stopped: every running task finished", "tasks", len(tasks))
		}
		return
	default:
	}
	args := []any{"tasks", len(tasks)}
	if dl, ok := ctx.Deadline(); ok {
		args = append(args, "drain", time.Until(dl).Round(time.Millisecond).String())
	}
	w.log.Info("stopping: no new leases; running tasks may finish", args...)
	select {
	case <-done:
		w.log.Info("stopped: every running task finished", "tasks", len(tasks))
		return
	case <-ctx.Done():
	}
	left := w.running.list(true)
	w.log.Warn("drain ended; canceling the tasks still running", "tasks", len(left))
	w.stopTasks()
	timer := time.NewTimer(abandonAfter)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	}
	for _, t := range w.running.abandon() {
		w.taskLog(t).Warn("task ignored its cancel: abandoned, its lease released; nothing it does from now on is committed", "waited", abandonAfter.String())
		w.release(t)
	}
}

// drained logs what became of a task that ended while the worker stopped: outcome is
// "finished" (its result, in err, is committed) or "released" (canceled, ready again).
func (w *Worker) drained(t *record.Task, outcome string, err error) {
	if !w.running.isDraining() {
		return
	}
	log := w.taskLog(t)
	switch {
	case outcome == "released":
		log.Warn("task canceled by the stop: its lease is released, another process takes it at once without spending an attempt")
	case err != nil:
		log.Info("task finished while draining", "error", err)
	default:
		log.Info("task finished while draining")
	}
}

func (w *Worker) taskLog(t *record.Task) *slog.Logger {
	return w.log.With("task_id", t.ID, "job_id", t.JobID, "item_id", t.ItemID, "action", t.Action, "attempt", t.Attempt)
}
