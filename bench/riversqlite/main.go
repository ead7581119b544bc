// riversqlite: River v0.31 + riversqlite (embedded SQLite, tuned as ../../../shared/bench/anchors-sqlite
// runs it) burning down N no-op jobs, for a backlog River's own insert cannot reach in a session.
//
// The shared harness inserts with client.InsertMany; on this machine that slowed as the table grew
// (1,884 jobs/s for the first 20,000, 350,000 in 21 minutes, so 1,000,000 did not finish in an
// hour). Its insert is not timed, so this harness writes the same rows in one SQL statement
// instead — the columns River's JobInsertFastMany writes, with River's defaults (max_attempts 25,
// priority 1, queue "default", state "available") — then starts the client exactly as the shared
// harness does and times from client.Start to the N-th completion event. Run it in a directory of
// its own (it writes river-bench.db there):
//
//	go run . -n 1000000 -workers 2000 -tuned
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"
)

type NoopArgs struct {
	Num int `json:"num"`
}

func (NoopArgs) Kind() string { return "noop" }

type NoopWorker struct {
	river.WorkerDefaults[NoopArgs]
}

func (w *NoopWorker) Work(ctx context.Context, job *river.Job[NoopArgs]) error { return nil }

func main() {
	var (
		dsn     = flag.String("dsn", "file:river-bench.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)", "sqlite DSN (modernc)")
		n       = flag.Int("n", 1000000, "number of jobs")
		workers = flag.Int("workers", 2000, "QueueConfig.MaxWorkers")
		tuned   = flag.Bool("tuned", false, "use riverbench's tuning: FetchCooldown=2ms FetchPollInterval=20ms")
	)
	flag.Parse()
	ctx := context.Background()

	pool, err := sql.Open("sqlite", *dsn)
	must(err)
	defer pool.Close()
	pool.SetMaxOpenConns(1) // riversqlite's recommendation, as the shared harness does

	driver := riversqlite.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	must(err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	must(err)
	_, err = pool.ExecContext(ctx, "DELETE FROM river_job")
	must(err)

	t0 := time.Now()
	_, err = pool.ExecContext(ctx, `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
INSERT INTO river_job (args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags)
SELECT json_object('num', i), datetime('now', 'subsec'), 'noop', 25, json('{}'), 1, 'default', datetime('now', 'subsec'), 'available', json('[]')
FROM seq`, *n)
	must(err)
	fmt.Printf("insert: %d jobs in one SQL statement in %s (not timed)\n", *n, time.Since(t0))

	ws := river.NewWorkers()
	river.AddWorker(ws, &NoopWorker{})
	rc := &river.Config{
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		Workers: ws,
	}
	if *tuned {
		rc.FetchCooldown = 2 * time.Millisecond
		rc.FetchPollInterval = 20 * time.Millisecond
	}
	client, err := river.NewClient(driver, rc)
	must(err)
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 100000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancelSub()
	var completed, failed atomic.Int64
	allDone := make(chan time.Time, 1)
	go func() {
		for ev := range events {
			if ev.Kind != river.EventKindJobCompleted {
				failed.Add(1)
			}
			if completed.Add(1) == int64(*n) {
				allDone <- time.Now()
				return
			}
		}
	}()

	fmt.Printf("river v0.31 riversqlite; go %s; GOMAXPROCS=%d; n=%d workers=%d tuned=%v\n",
		runtime.Version(), runtime.GOMAXPROCS(0), *n, *workers, *tuned)
	var cpu0 syscallRusage
	cpu0.read()
	t1 := time.Now()
	must(client.Start(ctx))
	end := <-allDone
	var cpu1 syscallRusage
	cpu1.read()
	work := end.Sub(t1)
	fmt.Printf("work:   %d jobs completed in %s = %.0f jobs/s (from client.Start to last completion event); %d not completed; %.1f µs CPU per job\n",
		*n, work, float64(*n)/work.Seconds(), failed.Load(), float64(cpu1.sub(cpu0).Microseconds())/float64(*n))

	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	must(client.Stop(stopCtx))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
