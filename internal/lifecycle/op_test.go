package lifecycle

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
)

// wait is how long a cell waits for any one thing it expects.
const wait = 20 * time.Second

// testRetry: r1 and r2 fail; a retry after r1's cause is fixed shows r1's result and r2's error
// again, and every attempt of both stays in their history. While r1's second attempt runs, its
// error and error output are still shown: a retry deletes nothing, a new result replaces it.
func testRetry(t *testing.T, c *cell) {
	c.b.setFail("r1", "bad input r1")
	c.b.setFail("r2", "bad input r2")
	c.start(t)
	e := c.r.n.Engine
	job, err := startJob(t.Context(), c.r.n, c.path.workflow(false, false), 4, c.path.contents("r1", "r2"))
	if err != nil {
		t.Fatal(err)
	}
	v := waitFor(t, e, job.ID, wait, "the job to end", ended)
	if v.Job.State != record.JobComplete {
		t.Fatalf("job %s (%s), want complete with two items' errors", v.Job.State, v.Job.Error)
	}
	succeeded(t, v, "r0")
	succeeded(t, v, "r3")
	failedWith(t, v, "r1", "bad input r1")
	failedWith(t, v, "r2", "bad input r2")
	summary(t, v, 2, map[string]int{"bad input r1": 1, "bad input r2": 1})
	attempts(t, v, "r1", "bad input r1")
	ran(t, c, []string{"r0", "r1", "r2", "r3"})

	c.b.setFail("r1", "")
	// r1's second run is held until looked at, on the paths that can hold a run: not inline nor
	// held, which run inside a transaction (on SQLite the one writer, which the look waits for).
	holdable := !c.path.gated()
	if holdable {
		c.b.setBlock("r1")
	}
	runs := c.b.runCount("r1")
	if _, err := e.Retry(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	if holdable {
		waitFor(t, e, job.ID, wait, "r1's second attempt to start", func(*jobView) bool { return c.b.runCount("r1") > runs })
		v = look(t, e, job.ID)
		if it := v.Items["r1"]; it.Error == "" || it.Errors != 1 {
			t.Errorf("while r1 is retried: error %q, %d error outputs; want its error shown until a result replaces it", it.Error, it.Errors)
		}
		c.b.unblock()
	}
	v = waitFor(t, e, job.ID, wait, "the retried job to end", ended)
	if v.Job.State != record.JobComplete {
		t.Fatalf("retried job %s (%s), want complete", v.Job.State, v.Job.Error)
	}
	succeeded(t, v, "r0")
	succeeded(t, v, "r1")
	succeeded(t, v, "r3")
	failedWith(t, v, "r2", "bad input r2")
	summary(t, v, 3, map[string]int{"bad input r2": 1})
	attempts(t, v, "r1", "bad input r1", "")
	attempts(t, v, "r2", "bad input r2", "bad input r2")
	if c.path != cached {
		attempts(t, v, "r0", "")
	}
	if v.Progress.Fraction != 1 {
		t.Errorf("fraction %v, want 1", v.Progress.Fraction)
	}
}

// testCancel: r0 and r1 are done, r2–r5 are in flight or waiting when the job is canceled. Every
// item not processed is settled with the error "canceled" (an error output, counted in the
// summary); a running remote worker gets 404; the job ends canceled with its true fraction;
// `job retry` then re-runs the canceled items to the end.
func testCancel(t *testing.T, c *cell) {
	held := []string{"r2", "r3", "r4", "r5"}
	c.b.setBlock(held...)
	started := make(chan string, 16)
	c.b.started = func(n string) {
		select {
		case started <- n:
		default:
		}
	}
	c.start(t)
	e := c.r.n.Engine
	job, err := startJob(t.Context(), c.r.n, c.path.workflow(false, c.path.gated()), 6, c.path.contents("r0", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, job.ID, wait, "r0 and r1 done and a held item started", func(v *jobView) bool {
		return v.Items["r0"] != nil && v.Items["r0"].Docs == 1 && v.Items["r1"] != nil && v.Items["r1"].Docs == 1 && len(started) > 0
	})
	if err := e.Cancel(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	// The job may end before its items settle: wait for every item to show a result or an
	// error, then check which.
	v := waitFor(t, e, job.ID, wait, "the canceled job's items to settle", func(v *jobView) bool {
		if !ended(v) {
			return false
		}
		for _, n := range names(6) {
			if it := v.Items[n]; it == nil || it.Docs == 0 && it.Error == "" {
				return false
			}
		}
		return true
	})
	if v.Job.State != record.JobCanceled {
		t.Errorf("job %s, want canceled", v.Job.State)
	}
	succeeded(t, v, "r0")
	succeeded(t, v, "r1")
	for _, n := range held {
		failedWith(t, v, n, "canceled")
	}
	summary(t, v, 2, map[string]int{"canceled": 4})
	if f := v.Progress.Fraction; f >= 1 || f <= 0 {
		t.Errorf("canceled job's fraction %v, want its true fraction (0 < f < 1: 2 of 6 items done)", f)
	}
	if c.path == remotePath {
		waitFor(t, e, job.ID, wait, "the held remote task to get 404", func(*jobView) bool {
			c.b.mu.Lock()
			defer c.b.mu.Unlock()
			return c.b.gone > 0
		})
	}

	c.b.unblock()
	if _, err := e.Retry(t.Context(), job.ID); err != nil {
		t.Fatalf("retry the canceled job: %v", err)
	}
	v = waitFor(t, e, job.ID, wait, "the retried job to end", ended)
	if v.Job.State != record.JobComplete {
		t.Fatalf("retried job %s (%s), want complete", v.Job.State, v.Job.Error)
	}
	for _, n := range names(6) {
		succeeded(t, v, n)
	}
	summary(t, v, 6, map[string]int{})
}

// testEvent: every item waits for the external event "go". Fired by r1's key (or a body naming
// r1), it advances r1 alone; fired again it changes nothing; a key or body that matches no
// waiting item is an error. Firing the rest completes the job.
func testEvent(t *testing.T, c *cell) {
	c.start(t)
	e := c.r.n.Engine
	job, err := startJob(t.Context(), c.r.n, c.path.workflow(true, false), 4, c.path.contents())
	if err != nil {
		t.Fatal(err)
	}
	fire := func(id string) (*engine.Fired, error) {
		p := engine.FireParams{JobID: job.ID, Event: "go"}
		if c.op == opEventKey {
			p.Key, p.Value = "id", json.RawMessage(`"`+id+`"`)
		} else {
			p.Body = json.RawMessage(`{"id": "` + id + `"}`)
		}
		return e.Fire(t.Context(), p)
	}
	f, err := fire("r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Items) != 1 || f.Fired != 1 {
		t.Errorf("fired on %v (%d new), want r1's item alone", f.Items, f.Fired)
	}
	v := waitFor(t, e, job.ID, wait, "r1 to advance", func(v *jobView) bool { return v.Items["r1"] != nil && v.Items["r1"].Docs == 1 })
	succeeded(t, v, "r1")
	for _, n := range []string{"r0", "r2", "r3"} {
		if it := v.Items[n]; it.Docs+it.Errors != 0 || it.WorkState != "" || c.b.runCount(n) != 0 {
			t.Errorf("item %s advanced (work %q, %d outputs) on r1's event", n, it.WorkState, it.Docs+it.Errors)
		}
	}
	if f, err := fire("r1"); err != nil || f.Fired != 0 {
		t.Errorf("firing r1 again: %+v, %v; want nothing new", f, err)
	}
	var none *engine.NoMatchError
	if f, err := fire("nobody"); !errors.As(err, &none) {
		t.Errorf("an event matching no item: %+v, %v; want the error that nothing matched", f, err)
	}
	if ended(look(t, e, job.ID)) {
		t.Fatal("the job ended with three items waiting")
	}
	for _, n := range []string{"r0", "r2", "r3"} {
		if _, err := fire(n); err != nil {
			t.Fatal(err)
		}
	}
	v = waitFor(t, e, job.ID, wait, "the job to end", ended)
	if v.Job.State != record.JobComplete {
		t.Fatalf("job %s (%s), want complete", v.Job.State, v.Job.Error)
	}
	for _, n := range names(4) {
		succeeded(t, v, n)
		attempts(t, v, n, "")
	}
	summary(t, v, 4, map[string]int{})
	ran(t, c, names(4))
}
