package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/store"
)

// benchResult is what `sluice bench engine` prints.
type benchResult struct {
	Mode        string  `json:"mode"`
	Tasks       int     `json:"tasks"`
	Seconds     float64 `json:"seconds"`
	TasksPerSec float64 `json:"tasks_per_sec"`
	PickupP50   float64 `json:"pickup_p50_ms"`
	PickupP99   float64 `json:"pickup_p99_ms"`
	E2EP50      float64 `json:"e2e_p50_ms"`
	E2EP99      float64 `json:"e2e_p99_ms"`
	Store       string  `json:"store"`
	Workers     int     `json:"workers"`
	InsertSecs  float64 `json:"insert_seconds"`
}

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("bench needs a subcommand: engine, ingest")
	}
	switch args[0] {
	case "engine":
		return benchEngine(ctx, e, args[1:])
	case "ingest":
		return benchIngest(ctx, e, args[1:])
	default:
		return usagef("unknown bench subcommand %q", args[0])
	}
}

func benchEngine(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "bench engine", "bench engine --tasks N [--mode burndown|stream|paced --rate R] [--workers W]")
	tasks := fs.Int("tasks", 20000, "number of one-step no-op items")
	mode := fs.String("mode", "burndown", "burndown (insert all, then work), stream (work while inserting) or paced (insert at --rate)")
	rate := fs.Float64("rate", 200, "paced: items inserted per second")
	workers := fs.Int("workers", 0, "no-op concurrency (0: the action's default)")
	keep := fs.Bool("keep", false, "keep the temporary data dir")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured part to this file")
	fs.Lookup("data").DefValue = ""
	c.data = ""
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if !oneOf(*mode, "burndown", "stream", "paced") {
		return usagef("--mode must be burndown, stream or paced")
	}
	if *tasks <= 0 {
		return usagef("--tasks must be positive")
	}
	if c.data == "" || c.data == "sluice-data" {
		dir, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return err
		}
		if !*keep {
			defer os.RemoveAll(dir)
		}
		c.data = filepath.Join(dir, "data")
	}
	conc := map[string]int{}
	if *workers > 0 {
		conc["noop"] = *workers
	}
	n, err := node.Open(ctx, node.Config{DataDir: c.data, Engine: true, Logger: c.logger(e), Concurrency: conc})
	if err != nil {
		return err
	}
	defer n.Close()
	if err := applyBuiltin(ctx, n, "bench"); err != nil {
		return err
	}
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "bench"})
	if err != nil {
		return err
	}
	roots := make([]engine.Root, *tasks)
	for i := range roots {
		roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("item-%d", i), Size: 1}
	}
	res := benchResult{Mode: *mode, Tasks: *tasks, Store: "sqlite", Workers: *workers}
	var start time.Time
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	switch *mode {
	case "burndown":
		t0 := time.Now()
		if err := n.Engine.AddRoots(ctx, job, roots); err != nil {
			return err
		}
		res.InsertSecs = time.Since(t0).Seconds()
		start = time.Now()
		n.Start(ctx)
	case "stream":
		n.Start(ctx)
		start = time.Now()
		for i := 0; i < len(roots); i += 100 {
			if err := n.Engine.AddRoots(ctx, job, roots[i:min(i+100, len(roots))]); err != nil {
				return err
			}
		}
		res.InsertSecs = time.Since(start).Seconds()
	case "paced":
		n.Start(ctx)
		start = time.Now()
		every := time.Duration(float64(time.Second) / *rate)
		for i := range roots {
			if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
			if err := n.Engine.AddRoots(ctx, job, roots[i:i+1]); err != nil {
				return err
			}
		}
		res.InsertSecs = time.Since(start).Seconds()
	}
	for {
		j, err := n.Store.JobGet(ctx, job.ID)
		if err != nil {
			return err
		}
		if j.State != store.JobRunning {
			if j.State != store.JobComplete {
				return fmt.Errorf("bench job ended %s: %s", j.State, j.Error)
			}
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	res.Seconds = time.Since(start).Seconds()
	n.Stop(5 * time.Second)
	res.TasksPerSec = float64(*tasks) / res.Seconds
	var pickup, e2e []float64
	var after int64
	for {
		ts, err := n.Store.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, AfterID: after, Limit: 5000})
		if err != nil {
			return err
		}
		for _, t := range ts {
			pickup = append(pickup, ms(t.StartedAt.Sub(t.CreatedAt)))
			e2e = append(e2e, ms(t.FinishedAt.Sub(t.CreatedAt)))
		}
		if len(ts) < 5000 {
			break
		}
		after = ts[len(ts)-1].ID
	}
	res.PickupP50, res.PickupP99 = percentile(pickup, 50), percentile(pickup, 99)
	res.E2EP50, res.E2EP99 = percentile(e2e, 50), percentile(e2e, 99)
	enc := json.NewEncoder(e.stdout)
	return enc.Encode(res)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	i := int(float64(len(v)-1) * p / 100)
	return float64(int(v[i]*100)) / 100
}
