package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// resolver is a claim step's action for tests: it counts its runs per key (metadata.package),
// waits for its gate to open, and records who resolved.
type resolver struct {
	mu   sync.Mutex
	runs map[string]int
	gate chan struct{}
	fail map[string]bool // keys whose first run fails for good
}

func newResolver() *resolver {
	return &resolver{runs: map[string]int{}, gate: make(chan struct{}), fail: map[string]bool{}}
}

func (r *resolver) action() action.Action {
	return enginetest.Func("resolve", func(ctx context.Context, t *action.Task, out action.Output) error {
		pkg, _ := t.Item.Metadata["package"].(string)
		r.mu.Lock()
		r.runs[pkg]++
		n := r.runs[pkg]
		r.mu.Unlock()
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.fail[pkg] && n == 1 {
			return action.Permanentf("resolving %s failed", pkg)
		}
		out.SetMetadata(map[string]any{"resolved_by": t.Item.Name})
		out.Emit("resolved")
		return out.SetOutput(ctx, "resolution", json.RawMessage(fmt.Sprintf(`{"package":%q}`, pkg)))
	}).WithSpec(func(s *action.Spec) { s.Outcomes = []string{"resolved"} })
}

func (r *resolver) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.runs {
		out[k] = v
	}
	return out
}

const claimWorkflow = `name: claims
steps:
  resolve: {action: resolve, needs: [start], claim: {key: "{{metadata.package}}", reused: [avoided]}}
  avoid:   {action: note, needs: [avoided]}
  after:   {action: note, needs: [resolved]}
`

func note() action.Action {
	return enginetest.Func("note", func(context.Context, *action.Task, action.Output) error { return nil })
}

func packageRoots(n, keys int) []engine.Root {
	roots := make([]engine.Root, n)
	for i := range roots {
		roots[i] = engine.Root{Name: fmt.Sprintf("item-%03d", i), Metadata: map[string]any{"package": fmt.Sprintf("pkg-%d", i%keys)}}
	}
	return roots
}

// countStates counts the job's tasks of a step by state.
func countStates(t testing.TB, s store.Store, jobID int64, step string) map[record.TaskState]int {
	t.Helper()
	tasks, err := s.TaskListByJob(t.Context(), store.TaskListParams{JobID: jobID, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[record.TaskState]int{}
	for _, tk := range tasks {
		if tk.Step == step {
			out[tk.State]++
		}
	}
	return out
}

// TestClaim: 20 tasks over 2 keys; each key's work is done once, by the first task to claim it;
// the 18 others park (no lease) while it runs and then complete with its result — its metadata,
// outputs and outcome events — plus the step's reused event, without running the action.
func TestClaim(t *testing.T) {
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		r := newResolver()
		k := enginetest.StartWith(t, open, enginetest.Config{Worker: func(c *worker.Config) {
			c.Concurrency = map[string]int{"resolve": 8}
		}}, r.action(), note())
		job := k.StartJob(t, claimWorkflow, packageRoots(20, 2)...)
		poll.Until(t, 30*time.Second, "18 tasks parked", func() (bool, string) {
			c := countStates(t, k.Store, job.ID, "resolve")
			return c[record.TaskParked] == 18, fmt.Sprint(c)
		})
		close(r.gate)
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s (%s)", j.State, j.Error)
		}
		if got := r.counts(); got["pkg-0"] != 1 || got["pkg-1"] != 1 {
			t.Errorf("runs per key %v, want each once", got)
		}
		checkClaimResults(t, k.Store, job.ID, 20, 2)
		if c := countStates(t, k.Store, job.ID, "avoid"); c[record.TaskComplete] != 18 {
			t.Errorf("avoid (the reused event's step) ran %v, want 18 complete", c)
		}
		if c := countStates(t, k.Store, job.ID, "after"); c[record.TaskComplete] != 20 {
			t.Errorf("after (the claimer's outcome's step) ran %v, want 20 complete", c)
		}

		// Installation scope: a later job reuses the done claims at once, whatever its job.
		inst := "name: inst\nsteps:\n  resolve: {action: resolve, needs: [start], claim: {key: \"{{metadata.package}}\", scope: installation}}\n"
		j1 := k.StartJob(t, inst, packageRoots(4, 2)...)
		k.WaitJob(t, j1.ID, 30*time.Second)
		j2 := k.StartJob(t, inst, packageRoots(6, 2)...)
		if j := k.WaitJob(t, j2.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("second job %s (%s)", j.State, j.Error)
		}
		if got := r.counts(); got["pkg-0"] != 2 || got["pkg-1"] != 2 {
			t.Errorf("runs per key after two installation-scope jobs %v, want 2 each (1 per scope)", got)
		}
		checkClaimResults(t, k.Store, j2.ID, 6, -1)
	})
}

// checkClaimResults checks that every item of the job has a claimer's metadata and output, and
// that claimers of its items (unless -1: the names repeat another job's) resolved themselves.
func checkClaimResults(t *testing.T, s store.Store, jobID int64, n, claimers int) {
	t.Helper()
	items, err := s.ItemList(t.Context(), store.ItemListParams{JobID: jobID, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	own := 0
	for _, it := range items {
		var md map[string]any
		_ = json.Unmarshal(it.Metadata, &md)
		if md["resolved_by"] == nil {
			t.Errorf("item %s has no resolved_by: %s", it.Name, it.Metadata)
		}
		if md["resolved_by"] == it.Name {
			own++
		}
	}
	if len(items) != n || (claimers >= 0 && own != claimers) {
		t.Errorf("%d items, %d resolved by themselves; want %d and %d", len(items), own, n, claimers)
	}
	outs, err := s.OutputList(t.Context(), store.OutputListParams{JobID: jobID, Kind: "resolution", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != n {
		t.Errorf("%d resolution outputs, want %d", len(outs), n)
	}
}

// TestClaimFailureReleases: a claimer that fails for good drops the claim; its parked tasks run
// again, one of them claims the key and the rest reuse its result.
func TestClaimFailureReleases(t *testing.T) {
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		r := newResolver()
		r.fail["pkg-0"] = true
		close(r.gate)
		k := enginetest.Start(t, open, r.action(), note())
		job := k.StartJob(t, claimWorkflow, packageRoots(10, 1)...)
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s (%s)", j.State, j.Error)
		}
		if got := r.counts()["pkg-0"]; got != 2 {
			t.Errorf("runs %d, want 2 (the failed claimer, then its successor)", got)
		}
		if c := countStates(t, k.Store, job.ID, "resolve"); c[record.TaskFailed] != 1 || c[record.TaskComplete] != 9 {
			t.Errorf("resolve tasks %v, want 1 failed and 9 complete", c)
		}
	})
}

// TestClaimAcrossProcesses: two engines with their workers, each on its own pool of one
// PostgreSQL schema (as two processes), share 100 tasks over 10 keys: each key's work is done
// once, every parked task is released and completes with its claimer's result, and both
// processes do some of the work. The time from a claim's commit to its parked tasks' next start
// (the claimer's finish, stamped as its transaction starts, to the first released task's lease)
// is logged only: a timing is no assertion for a unit test.
func TestClaimAcrossProcesses(t *testing.T) {
	t.Parallel()
	open := drivertest.SharedPostgres(t)
	r := newResolver()
	cfg := enginetest.Config{Worker: func(c *worker.Config) { c.Concurrency = map[string]int{"resolve": 64} }}
	a := enginetest.StartWith(t, open, cfg, r.action(), note())
	b := enginetest.StartWith(t, open, cfg, r.action(), note())
	job := a.StartJob(t, claimWorkflow, packageRoots(100, 10)...)
	poll.Until(t, 60*time.Second, "90 tasks parked", func() (bool, string) {
		c := countStates(t, a.Store, job.ID, "resolve")
		return c[record.TaskParked] == 90, fmt.Sprint(c)
	})
	close(r.gate)
	if j := a.WaitJob(t, job.ID, 60*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s (%s)", j.State, j.Error)
	}
	got := r.counts()
	for i := range 10 {
		if n := got[fmt.Sprintf("pkg-%d", i)]; n != 1 {
			t.Errorf("key pkg-%d resolved %d times, want once", i, n)
		}
	}
	checkClaimResults(t, a.Store, job.ID, 100, 10)
	ran := [2]int64{}
	for i, k := range []*enginetest.Kit{a, b} {
		ran[i] = k.Worker.Stats()["resolve"].Runs + k.Worker.Stats()["resolve"].CacheHits
	}
	if ran[0] == 0 || ran[1] == 0 {
		t.Errorf("tasks finished per process %v: one process did nothing", ran)
	}
	// The release latency is a figure, not a property: logged, never asserted (it passed 1 s at
	// load 75 on the shared 2-core machine). releaseLatency fails the test if no parked task
	// reused a claim, which is what must hold.
	first, last := releaseLatency(t, a.Store, job.ID)
	t.Logf("claim commit → first parked task leased: median %v, max %v over 10 keys; → last leased: median %v, max %v", median(first), slices.Max(first), median(last), slices.Max(last))
}

// releaseLatency returns, per claimer, the time from its finish to the first and the last start
// of a task that reused its claim.
func releaseLatency(t *testing.T, s store.Store, jobID int64) (first, last []time.Duration) {
	t.Helper()
	items, err := s.ItemList(t.Context(), store.ItemListParams{JobID: jobID, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := s.TaskListByJob(t.Context(), store.TaskListParams{JobID: jobID, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	byItem := map[int64]*record.Task{}
	for _, tk := range tasks {
		if tk.Step == "resolve" {
			byItem[tk.ItemID] = tk
		}
	}
	claimer := map[string]*record.Task{}
	reusers := map[string][]*record.Task{}
	for _, it := range items {
		var md map[string]any
		_ = json.Unmarshal(it.Metadata, &md)
		pkg, _ := md["package"].(string)
		if md["resolved_by"] == it.Name {
			claimer[pkg] = byItem[it.ID]
		} else {
			reusers[pkg] = append(reusers[pkg], byItem[it.ID])
		}
	}
	for pkg, c := range claimer {
		var starts []time.Duration
		for _, r := range reusers[pkg] {
			starts = append(starts, r.StartedAt.Sub(c.FinishedAt))
		}
		if len(starts) == 0 {
			continue
		}
		first, last = append(first, slices.Min(starts)), append(last, slices.Max(starts))
	}
	if len(first) == 0 {
		t.Fatal("no claim was reused")
	}
	return first, last
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
