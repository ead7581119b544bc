// Package lifecycle holds the lifecycle matrix: every way a user changes a job's course — retry,
// cancel, SIGTERM, SIGKILL, an external event by correlation key or by body — crossed with every
// way a task runs — an ordinary lease (local), the engine's own run in the transaction that makes
// the task ready (inline), a held batch of brief tasks (held), a replay of the conversion cache
// (cached), a worker over the HTTP worker protocol (remote) — on both store drivers.
//
// Each cell runs a small job through a node (the composition `sluice serve` and `sluice run`
// use, the worker protocol served over HTTP) and asserts only what a user sees: the job's state
// and fraction done, each item's error, the job's outputs (a document per item that succeeded,
// an error output with its reason per item that did not) and the summary `sluice run` prints of
// them (documents, errors, reasons counted), and the item's history (every attempt of the step
// under test, with its start, end, error and worker). None of it names how a task runs, so the
// matrix holds whatever the engine's core becomes; each cell only checks, where a user could
// tell, that its path was taken (the cache answered, a held batch held). SIGTERM and SIGKILL
// cells run the node in a child process (this test binary again) and signal it.
//
// What it guarantees, per op, on every path and driver:
//   - retry: an item's error and error output stay until a new result replaces them; every
//     attempt stays in its history; an item that fails again shows its error again, one that
//     succeeds its document and, before it, its failed attempt.
//   - cancel: every item not yet processed is settled with the error "canceled", an error
//     output counted in the summary; a remote worker holding a task gets 404; the job ends
//     canceled with its true fraction; a retry re-runs the canceled items to the end.
//   - SIGTERM: the process stops within its drain and a little more, leaving no task running;
//     the next start completes the job, nothing lost or doubled.
//   - SIGKILL: the next start completes the job; every item has exactly one result.
//   - event by key, by body: the event advances exactly the matching item; firing it again
//     changes nothing; a key or body matching no item is an error ([engine.NoMatchError]).
//
// Cells that cannot exist are listed in [impossible] with the reason, and skip saying it.
package lifecycle

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"go.uber.org/goleak"
)

// TestMain runs the child's part when this binary is a SIGTERM/SIGKILL cell's child, and
// otherwise the tests, failing them if a goroutine outlives them.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	// The cells mostly wait (for a database, a child process, a job): run more of them at once
	// than go test's default of one per CPU, unless -parallel was given.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
	}
	goleak.VerifyTestMain(m,
		// pgx's pool health check and the SQLite driver's connection openers may outlive a
		// closed store by a moment.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

type op string

const (
	opRetry     op = "retry"
	opCancel    op = "cancel"
	opSIGTERM   op = "sigterm"
	opSIGKILL   op = "sigkill"
	opEventKey  op = "event-key"
	opEventBody op = "event-body"
)

var ops = []op{opRetry, opCancel, opSIGTERM, opSIGKILL, opEventKey, opEventBody}

// impossible lists the cells that cannot exist, with the reason. The others all exist: a path
// whose run cannot be held (inline, held) is held in flight by a local gate step before it.
var impossible = map[op]map[path]string{
	opEventKey:  {held: briefWaits},
	opEventBody: {held: briefWaits},
}

// briefWaits is why a held-batch step cannot wait for an external event.
const briefWaits = "a held-batch (brief) step waiting for an external event does not hold its item's " +
	"children.done back (brief actions create no children: docs/workflows.md), so the documents " +
	"collector ingests the item before the event lets the step run: its result never reaches the output"

// TestLifecycle runs the matrix: {op} × {path} × {driver}, each cell a parallel subtest.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	for _, o := range ops {
		t.Run(string(o), func(t *testing.T) {
			t.Parallel()
			for _, p := range paths {
				t.Run(string(p), func(t *testing.T) {
					t.Parallel()
					if why := impossible[o][p]; why != "" {
						t.Skipf("impossible: %s", why)
					}
					enginetest.ForEachDriver(t, func(t *testing.T, _ enginetest.Open) {
						t.Parallel()
						runCell(t, o, p)
					})
				})
			}
		})
	}
}

// cell is one cell's set-up: where its store is, and for in-process ops its running node.
type cell struct {
	op   op
	path path
	at   where
	b    *behaviour
	r    *running
}

func newCell(t *testing.T, o op, p path) *cell {
	t.Helper()
	data, err := mkdir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &cell{op: o, path: p, at: where{Driver: "sqlite", Data: data}, b: newBehaviour()}
	if strings.HasSuffix(t.Name(), "/postgres") {
		desc, _ := enginetest.ChildStore(t)
		c.at = where{Driver: "postgres", Data: data, Store: desc}
	}
	return c
}

// start starts the cell's node in this process, stopped when t ends.
func (c *cell) start(t *testing.T) {
	t.Helper()
	// Not t.Context(): it ends before the cleanups run, and the node must stop in order.
	r, err := startNode(context.Background(), c.at, c.path, c.b, 5*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	c.r = r
	t.Cleanup(func() {
		c.b.unblock()
		r.stop()
	})
}

func runCell(t *testing.T, o op, p path) {
	c := newCell(t, o, p)
	switch o {
	case opRetry:
		testRetry(t, c)
	case opCancel:
		testCancel(t, c)
	case opSIGTERM, opSIGKILL:
		testSignal(t, c)
	case opEventKey, opEventBody:
		testEvent(t, c)
	default:
		t.Fatalf("no driver for op %s", o)
	}
}

// view is what a user sees of one item.
type view struct {
	State record.ItemState
	Error string
	// Docs and Errors are the item's outputs of each kind; Reason is its error output's message.
	Docs, Errors int
	Reason       string
	// Attempts are the runs of its work step, in order, from the item's history.
	Attempts []engine.Attempt
	// WorkState is the state of its work step's task ("" when it has none yet).
	WorkState record.TaskState
}

// jobView is what a user sees of a job: its state, progress and items by name.
type jobView struct {
	Job      *record.Job
	Progress *engine.Progress
	Items    map[string]*view
}

func (v *jobView) String() string {
	names := make([]string, 0, len(v.Items))
	for n := range v.Items {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "job %s %q, progress %.2f items %v;", v.Job.State, v.Job.Error, v.Progress.Fraction, v.Progress.Items)
	for _, n := range names {
		it := v.Items[n]
		fmt.Fprintf(&b, " %s{%s err=%q docs=%d errors=%d reason=%q work=%s attempts=%d}", n, it.State, it.Error, it.Docs, it.Errors,
			it.Reason, it.WorkState, len(it.Attempts))
	}
	return b.String()
}

// stores holds the store of each engine the matrix opens (*engine.Engine → store.Store): what
// look reads, as the API and the CLI read it.
var (
	storesMu sync.Mutex
	stores   = map[*engine.Engine]store.Store{}
)

// opened records the store of an engine the matrix opened, for look.
func opened(e *engine.Engine, db store.Store) {
	storesMu.Lock()
	defer storesMu.Unlock()
	stores[e] = db
}

// look reads the job as a user sees it.
func look(t *testing.T, e *engine.Engine, jobID int64) *jobView {
	t.Helper()
	ctx := t.Context()
	storesMu.Lock()
	db, ok := stores[e]
	storesMu.Unlock()
	if !ok {
		t.Fatal("look: an engine the matrix did not open")
	}
	job, err := db.JobGet(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := e.Progress(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	items, err := db.ItemList(ctx, store.ItemListParams{JobID: jobID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	v := &jobView{Job: job, Progress: prog, Items: map[string]*view{}}
	byID := map[int64]*view{}
	for _, it := range items {
		if _, dup := v.Items[it.Name]; dup {
			t.Errorf("item %s twice", it.Name)
		}
		iv := &view{State: it.State, Error: it.Error}
		v.Items[it.Name], byID[it.ID] = iv, iv
		tasks, err := db.TaskListByItem(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			if tk.Step != "work" {
				continue
			}
			if iv.WorkState != "" {
				t.Errorf("item %s has two work tasks", it.Name)
			}
			iv.WorkState = tk.State
		}
		history, err := e.ItemHistory(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range history {
			if a.Step == "work" {
				iv.Attempts = append(iv.Attempts, a)
			}
		}
	}
	for _, kind := range []string{ingest.KindDocument, ingest.KindError} {
		outs, err := db.OutputList(ctx, store.OutputListParams{JobID: jobID, Kind: kind, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			iv := byID[o.ItemID]
			if iv == nil {
				t.Errorf("output %s of an unknown item %d", kind, o.ItemID)
				continue
			}
			if kind == ingest.KindDocument {
				iv.Docs++
				continue
			}
			iv.Errors++
			var e ingest.Error
			if err := json.Unmarshal(o.Value, &e); err != nil {
				t.Errorf("error output %s: %v", o.Value, err)
			}
			iv.Reason = e.Message
		}
	}
	return v
}

// waitFor polls the job's view until cond holds, failing t after d with the last view.
func waitFor(t *testing.T, e *engine.Engine, jobID int64, d time.Duration, what string, cond func(*jobView) bool) *jobView {
	t.Helper()
	var v *jobView
	poll.Until(t, d, what, func() (bool, string) {
		v = look(t, e, jobID)
		return cond(v), v.String()
	})
	return v
}

func ended(v *jobView) bool { return v.Job.State != record.JobRunning }

// succeeded checks that the item shows its result: no error, one document, no error output.
func succeeded(t *testing.T, v *jobView, name string) {
	t.Helper()
	it := v.Items[name]
	if it == nil {
		t.Errorf("no item %s", name)
		return
	}
	if it.Error != "" || it.Docs != 1 || it.Errors != 0 {
		t.Errorf("item %s: error %q, %d documents, %d error outputs; want its one document and no error", name, it.Error, it.Docs, it.Errors)
	}
}

// failedWith checks that the item shows its error: the error, and one error output with it as
// the reason (and no document).
func failedWith(t *testing.T, v *jobView, name, reason string) {
	t.Helper()
	it := v.Items[name]
	if it == nil {
		t.Errorf("no item %s", name)
		return
	}
	if !strings.Contains(it.Error, reason) || it.Errors != 1 || !strings.Contains(it.Reason, reason) || it.Docs != 0 {
		t.Errorf("item %s: error %q, %d error outputs (reason %q), %d documents; want the error %q shown once",
			name, it.Error, it.Errors, it.Reason, it.Docs, reason)
	}
}

// attempts checks the item's work attempts: their errors in order ("" for a success), each with
// its start, end and worker.
func attempts(t *testing.T, v *jobView, name string, errs ...string) {
	t.Helper()
	it := v.Items[name]
	if it == nil {
		t.Errorf("no item %s", name)
		return
	}
	var got, incomplete []string
	for _, a := range it.Attempts {
		got = append(got, a.Error)
		if a.StartedAt.IsZero() || a.FinishedAt.Before(a.StartedAt) || a.Worker == "" {
			incomplete = append(incomplete, fmt.Sprintf("%d (%s): start %s, end %s, worker %q", a.Attempt, a.State,
				a.StartedAt.Format(time.StampMicro), a.FinishedAt.Format(time.StampMicro), a.Worker))
		}
	}
	if len(incomplete) > 0 {
		t.Errorf("item %s's history lacks a start, an end after it or the worker of attempts %s", name, strings.Join(incomplete, "; "))
	}
	ok := len(got) == len(errs)
	for i := 0; ok && i < len(errs); i++ {
		ok = strings.Contains(got[i], errs[i]) && (errs[i] != "" || got[i] == "")
	}
	if !ok {
		t.Errorf("item %s attempts' errors %q, want %q", name, got, errs)
	}
}

// summary checks the job's summary as `sluice run` prints it: the documents, the errors and
// the errors' reasons counted.
func summary(t *testing.T, v *jobView, docs int, reasons map[string]int) {
	t.Helper()
	gotDocs, gotErrs, got := 0, 0, map[string]int{}
	for _, it := range v.Items {
		gotDocs += it.Docs
		gotErrs += it.Errors
		if it.Errors > 0 {
			got[it.Reason] += it.Errors
		}
	}
	errs := 0
	for _, n := range reasons {
		errs += n
	}
	if gotDocs != docs || gotErrs != errs || fmt.Sprint(got) != fmt.Sprint(reasons) {
		t.Errorf("summary: %d documents, %d errors %v; want %d documents, %d errors %v", gotDocs, gotErrs, got, docs, errs, reasons)
	}
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%d", i)
	}
	return out
}

// ran checks that the path's own code did the work: the remote worker or the in-process action
// ran for every item that needed it, the cache answered all but one item with one content, a
// held batch ran its tasks with their rows still ready and an ordinary lease with its row
// running.
func ran(t *testing.T, c *cell, items []string) {
	t.Helper()
	want := map[path]record.TaskState{local: record.TaskRunning, held: record.TaskReady}[c.path]
	c.b.mu.Lock()
	for n, got := range c.b.rows {
		if got != want {
			t.Errorf("work ran on %s with its task's row %s; want %s on the %s path", n, got, want, c.path)
		}
	}
	c.b.mu.Unlock()
	if c.path == cached {
		if n := c.b.totalRuns(); n == 0 || n >= len(items) {
			t.Errorf("work ran %d times for %d items of one content; want replays from the cache", n, len(items))
		}
		return
	}
	for _, n := range items {
		if c.b.runCount(n) == 0 {
			t.Errorf("work never ran for %s on the %s path", n, c.path)
		}
	}
}
