// Command riverstyle runs the two workflow shapes of `sluice-bench engine --mode fanout|chain`
// written the way a River user would, against the same PostgreSQL, so the two can be measured
// side by side (docs/performance.md). It is a module of its own, so that River stays out of
// Sluice's go.mod.
//
//	fanout: a root job inserts -items child jobs (InsertManyTx, with a counter row, in its
//	        transaction); each child, in its transaction, counts the row down and enqueues the
//	        collector when it reaches zero; the collector does nothing. Timed from the client's
//	        start to the collector's completion.
//	chain:  -items jobs each run -steps steps: a step's job enqueues the next step in the
//	        transaction that completes it (JobCompleteTx). Timed from the client's start to the
//	        last step's completion.
//
// River is tuned as in `river bench` (FetchCooldown 2 ms, FetchPollInterval 20 ms), except for
// its workers: each job here opens a transaction and holds a pool connection for it, so
// MaxWorkers is kept below the pool (-workers 16, -poolmax 20), leaving connections to River's
// own fetches, completer and leader election. With `river bench`'s 2,000 workers on a pool of
// 20, those waited behind the jobs' transactions (which queue on the fan-out's counter row) until
// their 10 s timeouts, again and again: fetches and completions stalled and a fan-out of 10,000
// took minutes; a child that waits for a connection past River's 1-minute job timeout fails. A
// failed attempt ends the run with its error (a retry would only add River's backoff). It prints
// one JSON line, with the CPU per job of this process and of this machine's postgres backends
// connected to its database.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type rootArgs struct {
	Children int `json:"children"`
}

func (rootArgs) Kind() string { return "fanout_root" }

type childArgs struct {
	Root int64 `json:"root"`
}

func (childArgs) Kind() string { return "fanout_child" }

type collectArgs struct {
	Root int64 `json:"root"`
}

func (collectArgs) Kind() string { return "fanout_collect" }

type stepArgs struct {
	Item  int `json:"item"`
	Step  int `json:"step"`
	Steps int `json:"steps"`
}

func (stepArgs) Kind() string { return "chain_step" }

type rootWorker struct {
	river.WorkerDefaults[rootArgs]
	pool *pgxpool.Pool
}

func (w *rootWorker) Work(ctx context.Context, job *river.Job[rootArgs]) error {
	return inTx(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO fanout_counter (root_id, remaining) VALUES ($1, $2) ON CONFLICT DO NOTHING`, job.ID, job.Args.Children); err != nil {
			return err
		}
		client := river.ClientFromContext[pgx.Tx](ctx)
		params := make([]river.InsertManyParams, 0, 1000)
		for i := 0; i < job.Args.Children; {
			params = params[:0]
			for ; len(params) < cap(params) && i < job.Args.Children; i++ {
				params = append(params, river.InsertManyParams{Args: childArgs{Root: job.ID}})
			}
			if _, err := client.InsertManyFastTx(ctx, tx, params); err != nil {
				return err
			}
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

type childWorker struct {
	river.WorkerDefaults[childArgs]
	pool *pgxpool.Pool
}

func (w *childWorker) Work(ctx context.Context, job *river.Job[childArgs]) error {
	return inTx(ctx, w.pool, func(tx pgx.Tx) error {
		var left int
		if err := tx.QueryRow(ctx, `UPDATE fanout_counter SET remaining = remaining - 1 WHERE root_id = $1 RETURNING remaining`, job.Args.Root).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			if _, err := river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx, collectArgs{Root: job.Args.Root}, nil); err != nil {
				return err
			}
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

type collectWorker struct {
	river.WorkerDefaults[collectArgs]
}

func (w *collectWorker) Work(context.Context, *river.Job[collectArgs]) error { return nil }

type stepWorker struct {
	river.WorkerDefaults[stepArgs]
	pool *pgxpool.Pool
}

func (w *stepWorker) Work(ctx context.Context, job *river.Job[stepArgs]) error {
	if job.Args.Step >= job.Args.Steps {
		return nil
	}
	return inTx(ctx, w.pool, func(tx pgx.Tx) error {
		next := job.Args
		next.Step++
		if _, err := river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx, next, nil); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

func inTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

type result struct {
	Peer        string  `json:"peer"`
	Mode        string  `json:"mode"`
	Items       int     `json:"items"`
	Steps       int     `json:"steps,omitempty"`
	Jobs        int     `json:"jobs"`
	Seconds     float64 `json:"seconds"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	ItemsPerSec float64 `json:"items_per_sec"`
	CPUPerJob   float64 `json:"cpu_us_per_job"`
	DBCPUPerJob float64 `json:"db_cpu_us_per_job"`
	NotDone     int     `json:"not_completed"`
}

func main() {
	var (
		dsn     = flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres DSN")
		mode    = flag.String("mode", "fanout", "fanout | chain")
		items   = flag.Int("items", 0, "fanout: children (default 10000); chain: items (default 2000)")
		steps   = flag.Int("steps", 10, "chain: steps per item")
		workers = flag.Int("workers", 16, "QueueConfig.MaxWorkers: below -poolmax, since each job holds a connection for its transaction")
		schema  = flag.String("schema", "riverstyle", "schema for River's tables (dropped and made anew)")
		poolMax = flag.Int("poolmax", 20, "pgxpool MaxConns: workers hold a connection for their transaction, and River's fetches starve behind them at pgx's default of 4")
	)
	flag.Parse()
	if *workers >= *poolMax {
		log.Fatalf("-workers %d must be below -poolmax %d: each job holds a pool connection, and River's own fetches and completer need some", *workers, *poolMax)
	}
	if *items == 0 {
		*items = map[string]int{"fanout": 10000, "chain": 2000}[*mode]
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, *dsn)
	must(err)
	_, err = admin.Exec(ctx, fmt.Sprintf("DROP SCHEMA IF EXISTS %[1]s CASCADE; CREATE SCHEMA %[1]s", pgx.Identifier{*schema}.Sanitize()))
	must(err)
	defer func() {
		_, _ = admin.Exec(ctx, fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE", pgx.Identifier{*schema}.Sanitize()))
		admin.Close(ctx)
	}()

	cfg, err := pgxpool.ParseConfig(*dsn)
	must(err)
	cfg.ConnConfig.RuntimeParams["search_path"] = *schema
	cfg.MaxConns = int32(*poolMax)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	must(err)
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: *schema})
	must(err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	must(err)
	_, err = pool.Exec(ctx, `CREATE TABLE fanout_counter (root_id bigint PRIMARY KEY, remaining integer NOT NULL)`)
	must(err)

	ws := river.NewWorkers()
	river.AddWorker(ws, &rootWorker{pool: pool})
	river.AddWorker(ws, &childWorker{pool: pool})
	river.AddWorker(ws, &collectWorker{})
	river.AddWorker(ws, &stepWorker{pool: pool})
	client, err := river.NewClient(driver, &river.Config{
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		Workers:           ws,
		Schema:            *schema,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	must(err)

	// The end: the collector's completion (fanout), or items × steps completions (chain).
	want := int64(1)
	if *mode == "chain" {
		want = int64(*items * *steps)
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: int(want) + *items + 1000,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}})
	defer cancel()
	var completed atomic.Int64
	done := make(chan time.Time, 1)
	go func() {
		for ev := range events {
			if ev.Kind != river.EventKindJobCompleted {
				var why string
				if n := len(ev.Job.Errors); n > 0 {
					why = ev.Job.Errors[n-1].Error
				}
				log.Fatalf("job %d (%s) failed (attempt %d): %s", ev.Job.ID, ev.Job.Kind, ev.Job.Attempt, why)
			}
			if (*mode == "fanout" && ev.Job.Kind == "fanout_collect") || (*mode == "chain" && completed.Add(1) == want) {
				done <- time.Now()
				return
			}
		}
	}()

	switch *mode {
	case "fanout":
		_, err = client.Insert(ctx, rootArgs{Children: *items}, nil)
		must(err)
	case "chain":
		params := make([]river.InsertManyParams, *items)
		for i := range params {
			params[i] = river.InsertManyParams{Args: stepArgs{Item: i, Step: 1, Steps: *steps}}
		}
		_, err = client.InsertMany(ctx, params)
		must(err)
	default:
		log.Fatalf("-mode must be fanout or chain, not %q", *mode)
	}
	db := cfg.ConnConfig.Database
	cpu0, db0 := selfCPU(), postgresCPU(db)
	t0 := time.Now()
	must(client.Start(ctx))
	end := <-done
	secs := end.Sub(t0).Seconds()
	cpu, dbCPU := selfCPU()-cpu0, postgresCPU(db)-db0
	stop, cancelStop := context.WithTimeout(ctx, 30*time.Second)
	defer cancelStop()
	must(client.Stop(stop))

	res := result{Peer: "river-style (River v0.51, tuned)", Mode: *mode, Items: *items, Seconds: secs}
	if *mode == "chain" {
		res.Steps = *steps
	}
	must(pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state <> 'completed') FROM river_job`).Scan(&res.Jobs, &res.NotDone))
	res.JobsPerSec = float64(res.Jobs) / secs
	res.ItemsPerSec = float64(*items) / secs
	res.CPUPerJob = float64(cpu.Microseconds()) / float64(res.Jobs)
	res.DBCPUPerJob = float64(dbCPU.Microseconds()) / float64(res.Jobs)
	must(json.NewEncoder(os.Stdout).Encode(res))
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postgresCPU sums the CPU time of this machine's postgres backends connected to the database
// db, from /proc (as sluice-bench engine does).
func postgresCPU(db string) time.Duration {
	ents, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), " "+db+" ") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
