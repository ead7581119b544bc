// Package sqlite is the embedded [store.Store] driver: one SQLite file in WAL mode, written through
// a single connection in IMMEDIATE transactions, read through a pool. Pure Go (modernc.org/sqlite),
// no cgo.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluice-project/sluice/internal/sqliteuri"
	"github.com/sluice-project/sluice/internal/store"
)

//go:embed migrations/*.up.sql
var migrations embed.FS

// Config configures [Open].
type Config struct {
	// Path is the database file.
	Path string
	// Synchronous is SQLite's synchronous pragma. NORMAL (the default) survives a process crash
	// (SIGKILL) at any instant in WAL mode; FULL also survives power loss at ~3× the commit cost.
	Synchronous string
	// ReadConns is the size of the read pool. Defaults to 4.
	ReadConns int
}

// DB is the SQLite store. It is safe for concurrent use.
type DB struct {
	w       *sql.DB  // exactly one connection: SQLite has one writer anyway, and queuing in Go is
	r       *sql.DB  // cheaper than SQLITE_BUSY retries (deferred transactions failed 62–83% here).
	stmts   sync.Map // query → *sql.Stmt prepared on w
	rstmts  sync.Map // query → *sql.Stmt prepared on r
	pending sync.Map // queries first seen inside a transaction, to prepare on w after it
	// domainSeen holds the domains' statements kept prepared (see domainSQL.cached), at most
	// maxDomainStmts of them; domainN counts them.
	domainSeen sync.Map
	domainN    atomic.Int64
	ckpt       *sql.DB // the background checkpointer's connection
	stop       chan struct{}
	done       sync.WaitGroup
	*queries
}

// checkpointEvery is how often the background checkpointer copies the write-ahead log into the
// database file. Left to SQLite, the commit that crosses wal_autocheckpoint pages runs the
// checkpoint (and its fsync of the database file) itself, holding the only writer for
// milliseconds: the tail of pickup latency. A passive checkpoint on a connection of its own
// never blocks the writer; the automatic one stays as a backstop at a higher mark.
const checkpointEvery = 250 * time.Millisecond

var _ store.Store = (*DB)(nil)

// Open opens (creating if needed) the database and applies pending migrations.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.Synchronous == "" {
		cfg.Synchronous = "NORMAL"
	}
	if cfg.ReadConns <= 0 {
		cfg.ReadConns = 4
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+cfg.Synchronous+")")
	// busy_timeout covers other processes (a `sluice event fire` next to a running engine).
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(0)")
	q.Add("_pragma", "cache_size(-8000)")
	q.Add("_pragma", "wal_autocheckpoint(8000)") // backstop (~32 MB); see checkpointEvery
	// IMMEDIATE: take the write lock at BEGIN, so a read that turns into a write never fails
	// with SQLITE_BUSY halfway through (deps.md §8).
	q.Set("_txlock", "immediate")
	dsn := sqliteuri.File(cfg.Path, q)
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	// Each connection has a page cache of its own, outside Go's heap and its memory limit, and
	// fills it as the database outgrows it: 32 MB each on six connections held 150 MB more in
	// an ingest of 100,000 files than in one of 10,000. The driver's allocator gives a cached
	// page (4 KiB and a header) an 8 KiB slot, so a cache takes about twice its size. The
	// writer keeps 8 MB (the index pages its writes touch); readers, whose work is point reads
	// the OS's page cache serves as well, keep 1 MB, and the checkpointer, which reads nothing
	// through its cache, 0.5 MB.
	r, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)&_pragma=cache_size(-1000)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	r.SetMaxOpenConns(cfg.ReadConns)
	r.SetMaxIdleConns(cfg.ReadConns)
	ckpt, err := sql.Open("sqlite", dsn+"&_pragma=cache_size(-500)")
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	ckpt.SetMaxOpenConns(1)
	db := &DB{w: w, r: r, ckpt: ckpt, stop: make(chan struct{})}
	db.queries = &queries{db: db, r: r, w: w}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	db.done.Add(1)
	go db.checkpoint()
	return db, nil
}

// checkpoint runs passive checkpoints until Close.
func (db *DB) checkpoint() {
	defer db.done.Done()
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			// Errors (a busy database) only mean this round copied less; the next one retries.
			_, _ = db.ckpt.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

// Close closes the database.
func (db *DB) Close() error {
	if db.stop != nil {
		close(db.stop)
		db.done.Wait()
		db.stop = nil
	}
	return errors.Join(db.r.Close(), db.w.Close(), db.ckpt.Close())
}

// Capabilities reports that the embedded store is single-process, with one writer.
func (db *DB) Capabilities() store.Capabilities { return store.Capabilities{} }

// TryLock takes any lock at once: one engine process opens the database at a time (the data
// dir's lock), and it holds every lock.
func (db *DB) TryLock(ctx context.Context, name string) (store.Lock, bool, error) {
	return soleLock{}, true, nil
}

// soleLock is a lock of the one process: never lost, nothing to release.
type soleLock struct{}

func (soleLock) Check(context.Context) error { return nil }
func (soleLock) Release()                    {}

// Notify returns a channel that never receives: without Listen, nothing is announced that the
// one process does not know.
func (db *DB) Notify() (<-chan struct{}, func() ([]string, bool), func()) {
	return nil, func() ([]string, bool) { return nil, false }, func() {}
}

// NotifyOthers is Notify: there are no others.
func (db *DB) NotifyOthers() (<-chan struct{}, func() ([]string, bool), func()) { return db.Notify() }

// Wait waits for d or ctx: SQLite cannot signal other processes.
func (db *DB) Wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// InTx runs fn in an IMMEDIATE transaction on the writer connection.
func (db *DB) InTx(ctx context.Context, fn func(tx store.Executor) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(fmt.Errorf("begin: %w", err))
	}
	q := &queries{db: db, r: tx, w: tx, tx: tx}
	if err := fn(q); err != nil {
		_ = tx.Rollback()
		db.releaseBrief(ctx, q.brief)
		return markFull(err)
	}
	if err := tx.Commit(); err != nil {
		db.releaseBrief(ctx, q.brief)
		return mapErr(fmt.Errorf("commit: %w", err))
	}
	db.pending.Range(func(k, _ any) bool {
		db.pending.Delete(k)
		if _, ok := db.stmts.Load(k); !ok {
			if st, err := db.w.PrepareContext(ctx, k.(string)); err == nil {
				if _, loaded := db.stmts.LoadOrStore(k, st); loaded {
					st.Close()
				}
			}
		}
		return true
	})
	return nil
}

func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.up.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: bad number", base)
		}
		var n int
		if err := db.w.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, v).Scan(&n); err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		if n > 0 {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := db.w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, v, time.Now().UTC().UnixMicro()); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
	}
	return nil
}

// MigrationVersions lists the embedded migration numbers (for the test that both drivers match).
func MigrationVersions() []int {
	names, _ := fs.Glob(migrations, "migrations/*.up.sql")
	var out []int
	for _, n := range names {
		v, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(n, "migrations/"), "_", 2)[0])
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

// mapErr maps SQLite's errors to the store's.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.NotFoundFrom(err)
	}
	if err := markFull(err); errors.Is(err, store.ErrFull) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		}
	}
	return err
}

// markFull marks err with [store.ErrFull] when SQLite failed for a full disk and no query
// mapped it already.
func markFull(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL && !errors.Is(err, store.ErrFull) {
		return fmt.Errorf("%w: %w", store.ErrFull, err)
	}
	return err
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UTC().UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}
