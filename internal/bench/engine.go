package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// engineResult is what `sluice-bench engine` prints.
type engineResult struct {
	Mode  string `json:"mode"`
	Tasks int    `json:"tasks"`
	// TasksRun counts the tasks that ran (not skipped); Items, the fanout's children or the
	// chain's roots; Retries, attempts beyond each task's first (work lost and done again).
	TasksRun    int     `json:"tasks_run,omitempty"`
	Items       int     `json:"items,omitempty"`
	ItemsPerSec float64 `json:"items_per_sec,omitempty"`
	Retries     int     `json:"retries"`
	Processes   int     `json:"worker_processes,omitempty"`
	Seconds     float64 `json:"seconds"`
	TasksPerSec float64 `json:"tasks_per_sec"`
	PickupP50   float64 `json:"pickup_p50_ms"`
	PickupP99   float64 `json:"pickup_p99_ms"`
	E2EP50      float64 `json:"e2e_p50_ms"`
	E2EP99      float64 `json:"e2e_p99_ms"`
	PickupMax   float64 `json:"pickup_max_ms"`
	E2EMax      float64 `json:"e2e_max_ms"`
	Store       string  `json:"store"`
	Workers     int     `json:"workers"`
	InsertSecs  float64 `json:"insert_seconds"`
	// InsertRate is the rate the paced mode held: its tasks over the seconds it took to insert them.
	InsertRate float64 `json:"insert_per_sec,omitempty"`
	// CPUPerTask is the process's CPU time (user + system) over the timed part per task: unlike
	// tasks_per_sec it barely moves when other processes share the machine.
	CPUPerTask float64 `json:"cpu_us_per_task"`
	// DBCPUPerTask is the CPU time of this machine's postgres backends connected to the bench's
	// database over the timed part, per task (Postgres on this machine only).
	DBCPUPerTask float64 `json:"db_cpu_us_per_task,omitempty"`
}

func runEngine(ctx context.Context, e *env, args []string) error {
	fs, verbose := newFlags(e, "engine", "engine --tasks N [--mode burndown|stream|paced --rate R] [--workers W] [--remote] | --mode fanout|chain --items N [--steps K] [--processes P]", args)
	o := engineOpts{}
	fs.IntVar(&o.tasks, "tasks", 20000, "number of one-step no-op items")
	fs.StringVar(&o.mode, "mode", "burndown", "burndown (insert all, then work; latencies only up to 200,000 tasks), stream (work while inserting), paced (insert at --rate), fanout (a root, --items children, a collector) or chain (--items roots of --steps steps each)")
	fs.IntVar(&o.items, "items", 0, "fanout: children of the root (default 10000); chain: roots (default 2000)")
	fs.IntVar(&o.steps, "steps", 10, "chain: no-op steps in sequence per item")
	fs.IntVar(&o.processes, "processes", 0, "with --database: run the tasks in this many `sluice worker` processes instead of in the bench's")
	fs.StringVar(&o.sluice, "sluice", "", "the sluice binary --processes runs (default: sluice beside this executable, else on PATH)")
	fs.Float64Var(&o.rate, "rate", 200, "paced: items inserted per second")
	fs.IntVar(&o.workers, "workers", 0, "no-op concurrency (0: the action's default); with --remote, the number of remote workers (default 8)")
	remote := fs.Bool("remote", false, "also run the same tasks through remote workers over HTTP (the worker protocol) and report both")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary data dir (and with --database, the bench's schema, named on stderr)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured part to this file")
	database := fs.String("database", "", "a postgres:// URL: measure PostgreSQL, in a schema made for the run and dropped after (default: SQLite in a temporary dir)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !slices.Contains([]string{"burndown", "stream", "paced", "fanout", "chain"}, o.mode) {
		return usagef("--mode must be burndown, stream, paced, fanout or chain")
	}
	workflowMode := o.mode == "fanout" || o.mode == "chain"
	if o.items == 0 {
		o.items = map[string]int{"fanout": 10000, "chain": 2000}[o.mode]
	}
	if o.items < 0 || o.steps <= 0 || o.processes < 0 {
		return usagef("--items, --steps and --processes must be positive")
	}
	if o.processes > 0 && (*database == "" || *remote) {
		return usagef("--processes needs --database and no --remote")
	}
	// The worker processes are running before the roots go in, so in a burndown they would work
	// through the untimed insert (it commits 500 roots at a time): a rate of its own clock's
	// making. A fanout or chain inserts one root, or few, and times all the work after them.
	if o.processes > 0 && !workflowMode {
		return usagef("--processes runs the tasks of --mode fanout or chain, not of %s (its workers would run the tasks while the untimed insert goes on)", o.mode)
	}
	if o.tasks <= 0 {
		return usagef("--tasks must be positive")
	}
	o.log = logger(e, *verbose)
	if *database != "" {
		var err error
		if o.dsn, err = postgresURL(*database); err != nil {
			return err
		}
	}
	if o.processes > 0 {
		var err error
		if o.sluice, err = sluiceBinary(o.sluice); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "worker processes run %s\n", o.sluice)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	o.data = filepath.Join(dir, "in-process")
	remoteWorkers := o.workers
	if *remote {
		o.workers = 0 // --workers counts the remote workers; in process keeps its default
	}
	local, err := measure(ctx, o)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	if !*remote {
		return enc.Encode(local)
	}
	o.data = filepath.Join(dir, "remote")
	o.remote = true
	o.workers = remoteWorkers
	if o.workers == 0 {
		o.workers = 8
	}
	o.cpuprofile = ""
	rem, err := measure(ctx, o)
	if err != nil {
		return err
	}
	return enc.Encode(map[string]any{"in_process": local, "remote": rem, "remote_over_in_process": rem.TasksPerSec / local.TasksPerSec})
}

// logger is the engine's logger: debug on stderr with -v, none without.
func logger(e *env, verbose bool) *slog.Logger {
	if !verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type engineOpts struct {
	tasks      int
	mode       string
	rate       float64
	workers    int
	remote     bool
	items      int
	steps      int
	processes  int
	data       string
	dsn        string // with --database: bench in a new schema of this database, dropped after
	sluice     string // with --processes: the sluice binary the worker processes run
	cpuprofile string
	keep       bool // keep the data dir and the Postgres schema
	log        *slog.Logger
}

// measure runs one bench job in a fresh data dir and reads latencies back from the tasks'
// stored timestamps.
func measure(ctx context.Context, o engineOpts) (*engineResult, error) {
	conc := map[string]int{}
	// ended wakes the wait for the job's end as soon as this process's transaction that ended
	// it commits, as River's harness stops its clock at its last completion event.
	ended := make(chan struct{}, 1)
	cfg := node.Config{DataDir: o.data, Engine: true, Logger: o.log, Concurrency: conc, OnJobEnd: func(int64, record.JobState) {
		select {
		case ended <- struct{}{}:
		default:
		}
	}}
	if o.remote {
		cfg.Remote = map[string]bool{"noop": true}
	} else if o.workers > 0 {
		conc["noop"] = o.workers
	}
	storeName, schema := "sqlite", ""
	if o.dsn != "" {
		storeName = "postgres"
		var drop func()
		schema, drop = useSchema(ctx, &cfg, o.dsn, o.keep, o.log)
		defer drop() // deferred first, so it runs after the node (and its pool) closed
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	wf, roots, err := engineWorkflow(ctx, n.Engine, o)
	if err != nil {
		return nil, err
	}
	sub, err := n.Engine.Submit(ctx, engine.SubmitParams{Workflow: wf})
	if err != nil {
		return nil, err
	}
	job := sub.Job()
	res := &engineResult{Mode: o.mode, Tasks: o.tasks, Store: storeName, Workers: o.workers}
	startWorkers := func() { n.Start(ctx) }
	var procs workerProcs
	if o.processes > 0 {
		procs, err = startWorkerProcs(ctx, o.sluice, o.processes, withSchema(o.dsn, schema), filepath.Dir(o.data))
		if err != nil {
			return nil, err
		}
		defer procs.stop()
		startWorkers = func() {}
		res.Processes = o.processes
	}
	if o.remote {
		res.Store = storeName + ", remote workers over HTTP"
		stop, err := startRemoteWorkers(ctx, n, o.workers)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	stopProfile := func() {}
	defer func() { stopProfile() }()
	// The profile covers the measured part: in burndown, not the insert.
	profile := func() error {
		if o.cpuprofile == "" {
			return nil
		}
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
		return nil
	}
	var start time.Time
	var cpu0, db0 time.Duration
	switch o.mode {
	case "burndown", "fanout", "chain":
		t0 := time.Now()
		if err := add(ctx, sub, roots); err != nil {
			return nil, err
		}
		res.InsertSecs = time.Since(t0).Seconds()
		if err := profile(); err != nil {
			return nil, err
		}
		// The CPU times first: reading Postgres's (every process's line in /proc) is not the
		// burndown's work.
		cpu0, db0 = cpuTime()+procs.cpu(), postgresCPU(dbName(o.dsn))
		start = time.Now()
		startWorkers()
	case "stream":
		if err := profile(); err != nil {
			return nil, err
		}
		startWorkers()
		start, cpu0 = time.Now(), cpuTime()
		for i := 0; i < len(roots); i += 100 {
			if err := add(ctx, sub, roots[i:min(i+100, len(roots))]); err != nil {
				return nil, err
			}
		}
		res.InsertSecs = time.Since(start).Seconds()
	case "paced":
		if err := profile(); err != nil {
			return nil, err
		}
		startWorkers()
		start, cpu0 = time.Now(), cpuTime()
		if err := pace(ctx, sub, roots, o.rate, start); err != nil {
			return nil, err
		}
		res.InsertSecs = time.Since(start).Seconds()
		res.InsertRate = float64(len(roots)) / res.InsertSecs
	}
	if err := sub.Seal(ctx); err != nil {
		return nil, err
	}
	for {
		j, err := n.Store.JobGet(ctx, job.ID)
		if err != nil {
			return nil, err
		}
		if j.State != record.JobRunning {
			if j.State != record.JobComplete {
				return nil, fmt.Errorf("bench job ended %s: %s", j.State, j.Error)
			}
			break
		}
		// Each poll is a query: do not load the database it measures. In process the job's end
		// wakes it; worker processes end the job in theirs.
		every := 100 * time.Millisecond
		if o.processes > 0 || o.remote {
			every = 5 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ended:
		case <-time.After(every):
		}
	}
	res.Seconds = time.Since(start).Seconds()
	stopProfile()
	cpu, db := cpuTime()+procs.cpu()-cpu0, postgresCPU(dbName(o.dsn))-db0
	n.Stop(5 * time.Second)
	if o.mode == "fanout" || o.mode == "chain" {
		if err := countTasksByState(ctx, n.Store, job.ID, res); err != nil {
			return nil, err
		}
		res.Items = o.items
		res.ItemsPerSec = float64(o.items) / res.Seconds
	}
	res.CPUPerTask = float64(cpu.Microseconds()) / float64(res.Tasks)
	if storeName == "postgres" && db0 > 0 {
		res.DBCPUPerTask = float64(db.Microseconds()) / float64(res.Tasks)
	}
	res.TasksPerSec = float64(res.Tasks) / res.Seconds
	if o.mode == "fanout" || o.mode == "chain" {
		return res, nil // skipped tasks have no latency to read back
	}
	if o.mode == "burndown" && o.tasks > burndownReadBackMax {
		// A burndown's latencies are mostly the wait behind the insert, and reading back a
		// million tasks takes minutes on Postgres (see readBackPage).
		return res, nil
	}
	var pickup, e2e []float64
	var after int64
	for {
		ts, err := n.Store.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, AfterID: after, Limit: readBackPage})
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			pickup = append(pickup, ms(t.StartedAt.Sub(t.CreatedAt)))
			e2e = append(e2e, ms(t.FinishedAt.Sub(t.CreatedAt)))
		}
		if len(ts) < readBackPage {
			break
		}
		after = ts[len(ts)-1].ID
	}
	res.PickupP50, res.PickupP99 = percentile(pickup, 50), percentile(pickup, 99)
	res.E2EP50, res.E2EP99 = percentile(e2e, 50), percentile(e2e, 99)
	res.PickupMax, res.E2EMax = percentile(pickup, 100), percentile(e2e, 100)
	return res, nil
}

// pace inserts roots at rate per second from start: on each tick of a ticker, in one
// transaction, every root due by then. An insert that takes longer than the interval (a commit's
// fsync on a loaded machine) delays the roots due meanwhile to the next tick instead of slowing
// the whole run: it holds its rate as long as an insert of a few roots keeps up. Each task's
// pickup latency is read back from its stored times (created when its root was inserted).
func pace(ctx context.Context, sub *engine.Submission, roots []engine.Root, rate float64, start time.Time) error {
	every := max(time.Duration(float64(time.Second)/rate), time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for done := 0; done < len(roots); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		due := min(int(time.Since(start).Seconds()*rate)+1, len(roots))
		if due <= done {
			continue
		}
		if err := add(ctx, sub, roots[done:due]); err != nil {
			return err
		}
		done = due
	}
	return nil
}

// add adds roots to the job and commits them before it returns, so that what is measured
// includes their insert.
func add(ctx context.Context, sub *engine.Submission, roots []engine.Root) error {
	if err := sub.Add(ctx, roots...); err != nil {
		return err
	}
	return sub.Flush(ctx)
}

// startRemoteWorkers serves the worker protocol on a loopback port and runs w Go workers that
// answer each no-op task with `done`.
func startRemoteWorkers(ctx context.Context, n *node.Node, w int) (func(), error) {
	backend := workerproto.NewBackend(n.Engine, n.Blobs, n.Worker)
	wp := workerproto.New(workerproto.Config{Backend: backend})
	n.Listen(node.Listener{Wake: wp.Wake, Cancel: wp.CancelTasks})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: wp.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	n.Start(ctx) // the committer the protocol server writes through
	wp.Start(ctx)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	client := &workerproto.Client{Server: "http://" + ln.Addr().String() + "/v1/workers",
		HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: w * 2}}}
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				t, err := client.Poll(wctx, "noop")
				if err != nil || t == nil {
					continue
				}
				_ = t.Post(wctx, "done", nil)
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
		_ = srv.Close()
		wp.Stop()
	}, nil
}

// useSchema points cfg at a new schema of the PostgreSQL database at dsn and returns the
// schema's name and the function that drops it once the node is closed (with keep, it names the
// schema on stderr instead).
func useSchema(ctx context.Context, cfg *node.Config, dsn string, keep bool, log *slog.Logger) (string, func()) {
	schema := "sluice_bench_" + strings.ToLower(rand.Text()[:10])
	cfg.OpenStore = func(ctx context.Context) (store.Store, error) {
		return postgres.Open(ctx, postgres.Config{URL: dsn, Schema: schema})
	}
	return schema, func() {
		if keep {
			fmt.Fprintf(os.Stderr, "bench schema kept: %s\n", schema)
			return
		}
		if err := postgres.DropSchema(context.WithoutCancel(ctx), dsn, schema); err != nil {
			log.Error("drop bench schema", "schema", schema, "error", err)
		}
	}
}

// readBackPage is how many tasks a bench reads back per query. On Postgres each page reads
// every task of the job (there is no index of tasks by job: 004_drop_tasks_job.up.sql), so
// large pages keep reading back 100,000 tasks to a few passes.
const readBackPage = 50_000

// burndownReadBackMax is the largest burndown whose latencies are read back.
const burndownReadBackMax = 200_000

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	i := int(float64(len(v)-1) * p / 100)
	return float64(int(v[i]*100)) / 100
}
