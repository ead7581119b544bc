// Package node opens a Sluice installation — a data directory with its database and blobs, or a
// database URL and a blob store — and wires the engine, the action catalog and the in-process
// workers. It is the composition root shared by the CLI commands and end-to-end tests.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/action/detect"
	"github.com/sluice-project/sluice/internal/action/email"
	"github.com/sluice-project/sluice/internal/action/execaction"
	"github.com/sluice-project/sluice/internal/action/html"
	"github.com/sluice-project/sluice/internal/action/httpaction"
	"github.com/sluice-project/sluice/internal/action/image"
	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/action/office"
	"github.com/sluice-project/sluice/internal/action/pdf"
	"github.com/sluice-project/sluice/internal/action/text"
	"github.com/sluice-project/sluice/internal/action/unpack"
	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/dbclock"
	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/fleet"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/maintenance"
	"github.com/sluice-project/sluice/internal/metric"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/sqlite"
	"github.com/sluice-project/sluice/internal/subprocess"
	"github.com/sluice-project/sluice/internal/watch"
	"github.com/sluice-project/sluice/internal/worker"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// Config configures [Open].
type Config struct {
	// DataDir holds the embedded database and blobs. Defaults to ./sluice-data.
	DataDir string
	// Engine is true for processes that run workers: they take the data dir's lock (one engine
	// per embedded installation) and reclaim tasks a killed predecessor left running.
	Engine bool
	Logger *slog.Logger
	// Concurrency overrides action concurrency by name.
	Concurrency map[string]int
	// Remote lists actions handed to remote workers instead of running in process.
	Remote map[string]bool
	// MaxItemDepth and MaxJobItems bound every job's item tree (see engine.Config); zero means
	// the engine's defaults.
	MaxItemDepth int
	MaxJobItems  int64
	// MaxBacklog bounds a job's unprocessed items below a step that creates children (see
	// engine.Config); zero means the engine's default.
	MaxBacklog int
	// UnavailableBackoff is the wait of a task whose blob store did not answer (see
	// engine.Config); zero means the engine's default.
	UnavailableBackoff time.Duration
	// OpenStore, when set, replaces the embedded SQLite store (Postgres).
	OpenStore func(ctx context.Context) (store.Store, error)
	// Blobs, when set, replaces the data dir's blob directory (S3).
	Blobs blob.Store
	// OpenS3 opens the s3://bucket/prefix locations an ingest sheet's files may be in (the
	// objects workflow; see [objects.Service.S3]). Nil refuses them.
	OpenS3 objects.S3Opener
	// PathRoots are the path roots (--path-root) the objects and graph actions open the local
	// directories jobs name through (a sheet's files_dir, a graph request's source), when they
	// run: one outside them fails its task permanently, however the job was created. Nil opens
	// any directory — for processes whose jobs name directories their own user chose (the
	// CLI's commands), never for a server.
	PathRoots *pathroot.Roots
	// MaxBatch bounds writes per transaction; see worker.Config.
	MaxBatch int
	// Queues limits the actions this process runs; nil means all.
	Queues []string
	// LeaseDuration is the task lease; see worker.Config. Defaults to 30s. The maintenance
	// leader reaps expired leases every third of it, and followers try to take over leadership
	// as often, at most every 5s.
	LeaseDuration time.Duration
	// Drain is how long running tasks may finish when the context given to [Node.Start] ends
	// before they are canceled and their leases released; see worker.Config. Defaults to 30s.
	Drain time.Duration
	// GCInterval is how often the maintenance leader deletes unreferenced blobs; negative
	// disables it. See maintenance.Config. Defaults to 6h.
	GCInterval time.Duration
	// Egress is the policy of the addresses actions may connect to (the http action). Nil is
	// egress's default: loopback, private and link-local addresses are refused.
	Egress *egress.Policy
	// PollInterval bounds how long an idle worker waits before looking for work no wake-up
	// announced; see worker.Config. On a store that listens (Postgres), other processes' ready
	// tasks wake it at once, so the poll is only the fallback (behind PgBouncer, say).
	PollInterval time.Duration
	// Topics are the outbox's sinks and the sources; see [Topics].
	Topics Topics
	// Fileset configures the fileset workflow's actions (platforms, limits); its Egress is
	// replaced by Egress above, its PartialDir defaults to <data dir>/fileset-partial, and its
	// Sinks are those of Topics' sinks its workflow publishes to.
	Fileset fileset.Config
	// Metrics records the worker's task attempts and lease renewals (served on /metrics by
	// sluice serve). Nil records nothing.
	Metrics *metric.Set
	// Actions are registered in the catalog beside the built-in ones (an embedder's own, through
	// package sluice); a name taken by a built-in action is an error.
	Actions []action.Action
	// OnJobEnd, when set, is called after a transaction of this process that ended a job
	// committed, with the job's final state (`sluice-bench engine` waits on it).
	OnJobEnd func(jobID int64, state record.JobState)
}

// Node is an opened installation.
type Node struct {
	Store   store.Store
	Blobs   blob.Store
	Catalog *action.Catalog
	// Graph is the graph workflow's domain and actions (bound to Store).
	Graph *graph.Graph
	// Egress is the policy every outbound connection made for a workflow obeys: share it with
	// anything that downloads for a job (its Client).
	Egress *egress.Policy
	Engine *engine.Engine
	Worker *worker.Worker
	// Fileset is the fileset workflow's actions, bound to the store and blobs.
	Fileset *fileset.Fileset
	// Objects serves the objects workflow's actions (ingest sheets, works, file sets).
	Objects *objects.Service
	// Fleet is the register of engine processes and remote workers, written by engine
	// processes (nil otherwise); a worker protocol server adds its clients with
	// [fleet.Register.ServeRemotes].
	Fleet *fleet.Register
	// Maintenance is the maintenance loop of engine processes (nil otherwise): one process among
	// those sharing the store leads it.
	Maintenance *maintenance.Loop
	DataDir     string
	lock        *os.File
	records     *subprocess.Records // engine processes' running converters
	// clock is the time of leases and deadlines: the database's, on a store shared over the
	// network (nil: the local clock).
	clock *dbclock.Clock
	log   *slog.Logger
	drain time.Duration

	mu        sync.Mutex
	listeners []Listener

	// The goroutine that turns the store's notifications into worker wake-ups (listen).
	listenOnce sync.Once
	stopListen context.CancelFunc
	listening  sync.WaitGroup

	topics *topics
}

// Listener hears about tasks made ready and tasks to cancel, for components outside the
// in-process worker (the remote worker protocol server), and stops with the node.
type Listener struct {
	Wake   func()
	Cancel func(taskIDs []int64)
	// Drain, when set, is called by [Node.Stop] alongside the worker's drain: it stops handing
	// out tasks and lets those handed out finish until ctx ends.
	Drain func(ctx context.Context)
	// Stop, when set, is called by [Node.Stop] once every drain ended, while the worker's
	// writer still runs: it gives back the tasks still handed out.
	Stop func()
}

// Listen adds a listener.
func (n *Node) Listen(l Listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listeners = append(n.listeners, l)
}

func (n *Node) each(fn func(Listener)) {
	n.mu.Lock()
	ls := n.listeners
	n.mu.Unlock()
	for _, l := range ls {
		fn(l)
	}
}

// Catalog returns the catalog of built-in actions under the default egress policy.
func Catalog() *action.Catalog { return CatalogWith(nil) }

// CatalogWith returns the catalog of built-in actions; those that connect out (http) obey the
// egress policy p.
func CatalogWith(p *egress.Policy) *action.Catalog {
	return catalogWith(p, newDomains(p, fileset.Config{}, nil, nil))
}

// domains are the services of the built-in workflows that keep rows of their own (graph,
// fileset, objects): the catalog holds their actions, which read their rows through their tasks'
// read ports (engine.Reads), so nothing binds them to a store.
type domains struct {
	graph   *graph.Graph
	fileset *fileset.Fileset
	objects *objects.Service
}

// newDomains makes the domains' services; those that connect out obey the egress policy p,
// objects opens S3 locations with openS3, and both objects and graph open local directories
// through roots.
func newDomains(p *egress.Policy, fcfg fileset.Config, openS3 objects.S3Opener, roots *pathroot.Roots) domains {
	fcfg.Egress = p
	return domains{graph: graph.New(graph.Config{Egress: p, Roots: roots}), fileset: fileset.New(fcfg),
		objects: &objects.Service{S3: openS3, Roots: roots, Egress: p}}
}

// configDomains makes the domains' services with the process's configuration in cfg.
func configDomains(cfg Config) domains {
	fcfg := cfg.Fileset
	if fcfg.PartialDir == "" {
		fcfg.PartialDir = filepath.Join(cfg.DataDir, "fileset-partial")
	}
	// The fileset workflow's jobs publish their results only to the sinks configured.
	for _, name := range []string{fileset.SinkName, fileset.SandcrawlerSinkName} {
		if _, ok := cfg.Topics.Sinks[name]; ok {
			fcfg.Sinks = append(fcfg.Sinks, name)
		}
	}
	return newDomains(cfg.Egress, fcfg, cfg.OpenS3, cfg.PathRoots)
}

// WorkerCatalog returns the catalog of built-in actions as a node opened with cfg would hold
// them, for a process that runs them without a store (a remote worker: workerproto.RunBuiltin).
// Only the per-process configuration of cfg counts: egress, fileset, path roots, S3 opener, data
// dir (its fileset-partial directory) and actions.
func WorkerCatalog(cfg Config) *action.Catalog {
	if abs, err := filepath.Abs(cfg.DataDir); err == nil && cfg.DataDir != "" {
		cfg.DataDir = abs
	}
	cat := catalogWith(cfg.Egress, configDomains(cfg))
	for _, a := range cfg.Actions {
		if _, dup := cat.Lookup(a.Spec().Name); !dup && a.Spec().Name != "" {
			cat.Register(a)
		}
	}
	return cat
}

// catalogWith is [CatalogWith] with the domains' actions served by d.
func catalogWith(p *egress.Policy, d domains) *action.Catalog {
	cat := &action.Catalog{}
	r := &text.Renderer{}
	cat.Register(
		basic.NewNoop(), basic.NewPass(), basic.NewFail(), basic.NewEmit(), basic.NewSpawn(), execaction.New(), httpaction.New(httpaction.Config{Egress: p}),
		detect.New(detect.Config{}), unpack.New(unpack.Config{}), email.New(email.Config{}),
		pdf.New(), office.New(), image.New(), text.New(r), html.New(r), ingest.New(),
		workerproto.RemoteAction(),
	)
	cat.Register(d.graph.Actions()...)
	cat.Register(d.fileset.Actions()...)
	cat.Register(d.objects.Actions()...)
	return cat
}

// ErrLocked is returned when another engine process holds the data dir.
var ErrLocked = errors.New("data dir is in use by another sluice process")

// ErrMigrated is returned when a data dir's embedded database was copied to PostgreSQL
// (`sluice migrate copy`) and a node opens it without [Config.OpenStore].
var ErrMigrated = errors.New("data dir was copied to PostgreSQL; its embedded database is stale")

// The layout of a data dir: the embedded database file, the blob directory, and the marker a
// successful `sluice migrate copy` leaves. A node opened with its own store
// ([Config.OpenStore]) but no [Config.Blobs] still keeps blobs in BlobsDir. While MigratedFile
// exists, Open refuses the embedded database: an engine on it, or a GC checking references in
// it, would work on stale rows (a GC would delete the new installation's blobs in BlobsDir).
const (
	DatabaseFile = "sluice.db"
	BlobsDir     = "blobs"
	MigratedFile = "MIGRATED"
	// ConvertersDir records the converters an engine process runs (subprocess.Records).
	ConvertersDir = "converters"
)

// LockDataDir takes the data dir's lock (an exclusive flock on <dir>/lock), which every engine
// process on the embedded store holds while it runs, and returns it; closing the file releases
// it, as does the process's exit. It fails with an error wrapping [ErrLocked] when another
// process holds it for [lockWait].
//
// The wait is for a process that is dying: the lock goes only once every process holding its
// file is gone, and a process killed (kill -9) while it was starting a converter leaves, for
// the moments the kernel takes to end it too, a child between fork and exec with a copy of the
// lock's descriptor. A restart right after the kill (a supervisor's, a crash test's) found the
// dir "in use by another sluice process".
func LockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		if lockBusy != nil {
			lockBusy()
		}
		time.Sleep(lockPoll)
	}
}

// lockWait is how long [LockDataDir] waits for a lock held by another process; lockPoll how
// often it tries again meanwhile.
// lockBusy, when set (by tests), is called each time the lock was found held.
var (
	lockWait = 2 * time.Second
	lockPoll = 10 * time.Millisecond
	lockBusy func()
)

// Open opens the installation. With cfg.Engine it also takes the lock, reclaims orphaned tasks
// and creates (but does not start) the worker.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Drain <= 0 {
		cfg.Drain = 30 * time.Second
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "sluice-data"
	}
	// Absolute: converters run in their task's directory under it, so a relative path handed to
	// a tool (an output file, LibreOffice's profile) would resolve against the wrong directory.
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := configDomains(cfg)
	n := &Node{DataDir: cfg.DataDir, log: cfg.Logger, drain: cfg.Drain, Catalog: catalogWith(cfg.Egress, d), Egress: cfg.Egress,
		Graph: d.graph, Fileset: d.fileset, Objects: d.objects}
	for _, a := range cfg.Actions {
		if _, dup := n.Catalog.Lookup(a.Spec().Name); dup || a.Spec().Name == "" {
			return nil, fmt.Errorf("action %q: the name is empty or taken by a built-in action", a.Spec().Name)
		}
		n.Catalog.Register(a)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if cfg.OpenStore == nil {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, MigratedFile)); err == nil {
			return nil, fmt.Errorf("%w: pass --database (see %s), or delete that file to use the embedded database again",
				ErrMigrated, filepath.Join(cfg.DataDir, MigratedFile))
		}
	}
	if cfg.Engine && cfg.OpenStore == nil {
		lock, err := LockDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		n.lock = lock
	}
	var err error
	if cfg.OpenStore != nil {
		n.Store, err = cfg.OpenStore(ctx)
	} else {
		// Through a *sqlite.DB, not straight into n.Store: a failed Open's nil *DB in the
		// interface is not a nil Store, and Close called it (a panic on a corrupt sluice.db).
		var db *sqlite.DB
		if db, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(cfg.DataDir, DatabaseFile)}); err == nil {
			n.Store = db
		}
	}
	if err != nil {
		n.Store = nil
		n.Close()
		return nil, err
	}
	now := dbclock.LocalClock()
	if src, ok := n.Store.(dbclock.Source); ok {
		// Processes on several machines compare each other's leases: one clock for all of
		// them, the database's (a worker's clock minutes off neither steals live leases nor
		// keeps dead ones).
		n.clock = dbclock.New(dbclock.Config{Source: src, Logger: cfg.Logger})
		if err := n.clock.Sync(ctx); err != nil {
			n.Close()
			return nil, fmt.Errorf("read the database's time: %w", err)
		}
		now = n.clock.Now
	}
	n.Blobs = cfg.Blobs
	if n.Blobs == nil {
		d, err := blob.OpenDir(filepath.Join(cfg.DataDir, BlobsDir), blob.DirOptions{SmallMax: blob.DefaultSmallMax})
		if err != nil {
			n.Close()
			return nil, err
		}
		n.Blobs = d
	}
	var w *worker.Worker
	n.Engine = engine.New(engine.Config{Store: n.Store, Catalog: n.Catalog, Logger: cfg.Logger, Remote: cfg.Remote, MaxItemDepth: cfg.MaxItemDepth, MaxJobItems: cfg.MaxJobItems, MaxBacklog: cfg.MaxBacklog, UnavailableBackoff: cfg.UnavailableBackoff, Now: now,
		TempDir: filepath.Join(cfg.DataDir, "tmp"), // made (emptied) below when this node runs a worker
		OnReady: func(queues []string) {
			if w != nil {
				w.Ready(queues)
			}
			n.each(func(l Listener) { l.Wake() })
		},
		OnCancel: func(ids []int64) {
			if w != nil {
				w.CancelTasks(ids)
			}
			n.each(func(l Listener) { l.Cancel(ids) })
		},
		OnJobEnd: func(jobID int64, state record.JobState) {
			if cfg.OnJobEnd != nil {
				cfg.OnJobEnd(jobID, state)
			}
			n.traceJobEnd(jobID, state)
		}})
	if err := graph.Register(ctx, n.Engine); err != nil {
		n.Close()
		return nil, err
	}
	if err := objects.Register(ctx, n.Engine); err != nil {
		n.Close()
		return nil, err
	}
	if err := watch.Register(ctx, n.Engine); err != nil {
		n.Close()
		return nil, err
	}
	// Before the topics: a watching source's cursors are in the watchers' table.
	if err := n.openTopics(ctx, cfg); err != nil {
		n.Close()
		return nil, err
	}
	if err := fileset.Register(ctx, n.Engine); err != nil {
		n.Close()
		return nil, err
	}
	if err := docsearch.Register(ctx, n.Engine); err != nil {
		n.Close()
		return nil, err
	}
	if err := audit.Register(ctx, n.Engine); err != nil {
		n.Close()
		return nil, err
	}
	if cfg.Engine && n.topics.fed[fileset.WorkflowName] {
		// A source creates its jobs on the workflow's latest version: this process's
		// configuration of it is stored, so a fresh installation's first request has a
		// workflow to run.
		if _, err := n.Fileset.ApplyWorkflow(ctx, n.Engine); err != nil {
			n.Close()
			return nil, err
		}
	}
	if cfg.Engine {
		// Converters a killed predecessor left running (they die with it as a rule; see
		// subprocess.Records for the exceptions) go before their attempt dirs do.
		n.records, err = subprocess.OpenRecords(filepath.Join(cfg.DataDir, ConvertersDir))
		if err != nil {
			n.Close()
			return nil, err
		}
		if _, err := n.records.Reap(cfg.Logger); err != nil {
			n.Close()
			return nil, err
		}
		tmp := filepath.Join(cfg.DataDir, "tmp")
		_ = os.RemoveAll(tmp) // attempt dirs of a killed process
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			n.Close()
			return nil, err
		}
		// One name for the process: its inline steps' attempts and its leases'.
		w = worker.New(worker.Config{Engine: n.Engine, Owner: n.Engine.Owner(), Blobs: n.Blobs, Logger: cfg.Logger, Concurrency: cfg.Concurrency,
			TempDir: tmp, MaxBatch: cfg.MaxBatch, Queues: cfg.Queues, LeaseDuration: cfg.LeaseDuration,
			PollInterval: cfg.PollInterval, Metrics: cfg.Metrics, Drain: cfg.Drain})
		n.Worker = w
		lease := cfg.LeaseDuration
		if lease <= 0 {
			lease = worker.DefaultLeaseDuration
		}
		n.Fleet = fleet.New(fleet.Config{Store: n.Store, Logger: cfg.Logger, Now: now, ID: w.Owner(), Actions: cfg.Queues, InFlight: w.InFlight})
		if err := n.Fleet.Register(ctx, n.Engine); err != nil {
			n.Close()
			return nil, err
		}
		n.Maintenance = maintenance.New(maintenance.Config{Engine: n.Engine, Blobs: n.Blobs, Tasks: n.Store, Locker: n.Store, Logger: cfg.Logger,
			ReapInterval: lease / 3, ElectInterval: min(lease/3, 5*time.Second), GCInterval: cfg.GCInterval})
		if n.lock != nil {
			// The lock proves no other process runs these tasks: reclaim them all now instead
			// of waiting for their leases to expire.
			for {
				k, err := n.Engine.Reclaim(ctx, engine.ReclaimParams{All: true})
				if err != nil {
					n.Close()
					return nil, fmt.Errorf("reclaim tasks: %w", err)
				}
				if k == 0 {
					break
				}
				cfg.Logger.Info("reclaimed tasks of a previous run", "tasks", k)
			}
		}
	}
	return n, nil
}

// Start starts the workers and the maintenance loop. Calling it again does nothing.
func (n *Node) Start(ctx context.Context) {
	if n.clock != nil {
		n.clock.Start(ctx)
	}
	if n.Worker != nil {
		ctx = subprocess.WithRecords(ctx, n.records)
		n.Worker.Start(ctx)
		if n.Store.Capabilities().Listen {
			n.listenOnce.Do(func() {
				lctx, cancel := context.WithCancel(ctx)
				n.mu.Lock()
				n.stopListen = cancel
				n.mu.Unlock()
				n.listening.Add(1)
				go func() { defer n.listening.Done(); n.listen(lctx) }()
			})
		}
	}
	if n.Maintenance != nil {
		n.Maintenance.Start(ctx)
	}
	if n.Fleet != nil {
		n.Fleet.Start(ctx)
	}
	n.startTopics(ctx)
}

// Stop stops the maintenance loop, handing leadership to another process, then the workers,
// listen wakes the worker whenever a task becomes ready in the shared database, in this process
// or another (Postgres LISTEN/NOTIFY, [store.Store.Wait]): without it a worker would find other
// processes' tasks only at its next poll.
//
// The node's own transactions wake its worker through the engine's OnReady as they commit; the
// store leaves out their notifications (NotifyOthers), so that one task made ready wakes the
// worker once, not twice (the second wake's pick found nothing: half the held batches of
// `sluice-bench engine --mode paced` on Postgres).
func (n *Node) listen(ctx context.Context) {
	ch, take, stop := n.Store.NotifyOthers()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if queues, all := take(); all {
				n.Worker.Wake()
			} else {
				n.Worker.WakeQueues(queues)
			}
		}
	}
}

func (n *Node) unlisten() {
	n.mu.Lock()
	stop := n.stopListen
	n.mu.Unlock()
	if stop != nil {
		stop()
		n.listening.Wait()
	}
}

// Drain returns how long running tasks may finish when the node stops ([Config.Drain]).
func (n *Node) Drain() time.Duration { return n.drain }

// Stop stops the node's sources, listeners, maintenance and workers: the worker and the
// listeners' drains stop leasing and let running tasks finish for up to grace, together; then the
// worker cancels its tasks still running and releases their leases ([worker.Worker.Stop]), and
// the listeners give back theirs ([Listener.Stop]) before the worker's writer stops.
func (n *Node) Stop(grace time.Duration) {
	n.stopSources()
	n.unlisten()
	if n.Maintenance != nil {
		n.Maintenance.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var drains sync.WaitGroup
	n.each(func(l Listener) {
		if l.Drain != nil {
			drains.Go(func() { l.Drain(ctx) })
		}
	})
	if n.Worker != nil {
		n.Worker.Drain(ctx)
	}
	drains.Wait()
	n.each(func(l Listener) {
		if l.Stop != nil {
			l.Stop()
		}
	})
	if n.Worker != nil {
		n.Worker.Stop(ctx)
	}
	if n.Fleet != nil {
		n.Fleet.Stop()
	}
	n.stopRelays(grace)
}

// Close stops the maintenance loop if Stop did not, and releases the store and the lock.
func (n *Node) Close() error {
	if n.Fleet != nil {
		n.Fleet.Stop()
	}
	n.stopSources()
	n.stopRelays(0)
	n.unlisten()
	if n.Maintenance != nil {
		n.Maintenance.Stop()
	}
	if n.clock != nil {
		n.clock.Stop()
	}
	if n.Catalog != nil {
		// Actions that keep tools running (the office action's warm converters) end them.
		for _, name := range n.Catalog.Names() {
			if a, ok := n.Catalog.Lookup(name); ok {
				if c, ok := a.(interface{ Close() }); ok {
					c.Close()
				}
			}
		}
	}
	var errs []error
	if n.Store != nil {
		errs = append(errs, n.Store.Close())
	}
	if c, ok := n.Blobs.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
	}
	if n.lock != nil {
		errs = append(errs, n.lock.Close())
	}
	return errors.Join(errs...)
}

// Problems lists in plain words what keeps the node from doing its work now — an outage of its
// blob store — for /readyz and the web UI's banner. It is empty while all is well.
func (n *Node) Problems(context.Context) []string {
	var out []string
	if o, down := blob.OutageOf(n.Blobs); down {
		out = append(out, o.String()+"; tasks wait and retry without spending their attempts")
	}
	return out
}

// WriteMetrics writes the metrics of the node's parts beside the API's own: the blob store's
// health and the outbox's.
func (n *Node) WriteMetrics(ctx context.Context, w io.Writer) error {
	blob.WriteMetrics(w, n.Blobs)
	return n.Outbox().WriteMetrics(ctx, w)
}
