package engine_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// gates holds each running action until the test lets it go, so the test picks the order in
// which tasks complete.
type gates struct {
	mu      sync.Mutex
	waiting map[int64]chan struct{}
}

func (g *gates) hold(ctx context.Context, id int64) error {
	ch := make(chan struct{})
	g.mu.Lock()
	g.waiting[id] = ch
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release lets one waiting action go, chosen by r, and reports whether there was one.
func (g *gates) release(r *rand.Rand) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		return false
	}
	ids := make([]int64, 0, len(g.waiting))
	for id := range g.waiting {
		ids = append(ids, id)
	}
	// Map order is random but not seeded: sort, then pick with r.
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	id := ids[r.IntN(len(ids))]
	close(g.waiting[id])
	delete(g.waiting, id)
	return true
}

// fanout is how many children an item makes: a pure function of the seed and its name, so a
// replayed attempt makes the same ones.
func fanout(seed uint64, name string, depth int) int {
	if depth >= 3 {
		return 0
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", seed, name)
	return int(h.Sum64() % 4)
}

// TestProgressProperties runs random item trees, with random step weights, completing their
// tasks in random orders, and checks Overview's progress after every completion: the fraction
// stays in [0,1], never decreases (neither what the engine shows nor what the rows alone say),
// is below 1 while the job runs and 1 exactly when it completes. A canceled job shows the
// fraction its rows reached, below 1.
func TestProgressProperties(t *testing.T) {
	t.Parallel()
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			testProgressProperties(t, seed, seed%4 == 3)
		})
	}
}

func testProgressProperties(t *testing.T, seed uint64, cancel bool) {
	r := rand.New(rand.NewPCG(seed, 7))
	g := &gates{waiting: map[int64]chan struct{}{}}
	depthOf := func(name string) int { return strings.Count(name, "/") }
	h := newHarness(t, drivertest.OpenSQLite, func(h *harness) []action.Action {
		return []action.Action{
			h.act("mark", nil, func(ctx context.Context, at *action.Task, out action.Output) error {
				return g.hold(ctx, at.ID)
			}),
			h.act("split", nil, func(ctx context.Context, at *action.Task, out action.Output) error {
				if err := g.hold(ctx, at.ID); err != nil {
					return err
				}
				n := fanout(seed, at.Item.Name, depthOf(at.Item.Name))
				for i := range n {
					out.Progress(float64(i+1) / float64(n+1))
					if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/%d", at.Item.Name, i), ContentType: "text/plain"}); err != nil {
						return err
					}
				}
				out.Progress(1)
				return nil
			}),
			h.act("collect", nil, nil),
		}
	})
	weight := func() string { return fmt.Sprintf("%.2f", r.Float64()) }
	wf := fmt.Sprintf(`name: wf
steps:
  mark:    {action: mark,    needs: [start], progress_weight: %s}
  split:   {action: split,   needs: [start], progress_weight: %s}
  collect: {action: collect, needs: [children.done], progress_weight: %s}
`, weight(), weight(), weight())
	var roots []engine.Root
	for i := range 1 + r.IntN(3) {
		roots = append(roots, engine.Root{Ordinal: i, Name: fmt.Sprintf("r%d", i), Size: int64(1 + r.IntN(1000))})
	}
	job := h.start(wf, nil, roots...)
	h.startWorker()
	ctx := t.Context()
	var shown, rows float64
	check := func(when string) *engine.Progress {
		t.Helper()
		p, err := h.e.Progress(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		jp, err := h.db.JobProgress(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		raw := jp.Colored / jp.Total
		if p.Fraction < 0 || p.Fraction > 1 || raw < 0 || raw > 1+1e-9 {
			t.Fatalf("%s: fraction %v, rows %v: want both in [0,1]\n%s", when, p.Fraction, raw, wf)
		}
		// While the job runs, the fraction shown never goes down, exactly; once it ended (here,
		// canceled) it is its rows' sum, whose last bits depend on the order it is added up in
		// (a cancel rewrites rows): it may not go down by more than that noise, as the rows.
		noise := 0.0
		if p.State != record.JobRunning {
			noise = 1e-9
		}
		if p.Fraction < shown-noise || raw < rows-1e-9 {
			t.Fatalf("%s: fraction %v after %v, rows %v after %v: went down\n%s", when, p.Fraction, shown, raw, rows, wf)
		}
		if p.State == record.JobRunning && p.Fraction >= 1 {
			t.Fatalf("%s: running job at fraction %v", when, p.Fraction)
		}
		shown, rows = p.Fraction, raw
		return p
	}
	steps := 0
	cancelAt := 3 + r.IntN(6)
	for {
		p := check(fmt.Sprintf("after %d completions", steps))
		if p.State != record.JobRunning {
			break
		}
		if cancel && steps == cancelAt {
			if err := h.e.Cancel(ctx, job.ID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		poll.Until(t, 30*time.Second, "a task waiting or the job ended", func() (bool, string) {
			g.mu.Lock()
			n := len(g.waiting)
			g.mu.Unlock()
			j, err := h.db.JobGet(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return n > 0 || j.State != record.JobRunning, fmt.Sprint(h.tasks(job.ID))
		})
		if g.release(r) {
			steps++
		}
	}
	final := h.wait(job.ID)
	p := check("at the end")
	switch final.State {
	case record.JobComplete:
		if p.Fraction != 1 || p.ETA != 0 {
			t.Errorf("complete job: fraction %v ETA %v, want 1 and none", p.Fraction, p.ETA)
		}
	case record.JobCanceled:
		if p.Fraction >= 1 {
			t.Errorf("job canceled after %d of its completions shows fraction %v, want what it reached", steps, p.Fraction)
		}
		t.Logf("canceled at %.3f after %d completions", p.Fraction, steps)
	default:
		t.Errorf("job %s", final.State)
	}
}
