// Package postgres is the scale-out [store.Store] driver: PostgreSQL through a pgx connection pool,
// shared by many sluice processes on many machines. Leases use FOR UPDATE SKIP LOCKED, so racing
// leasers never block on or double-lease a task; wake-ups use LISTEN/NOTIFY on the channel
// sluice_tasks.<schema>, always bounded by a timeout so a lost notification (or a PgBouncer in transaction
// pooling mode, where LISTEN does not work) only delays work, never loses it.
package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-project/sluice/internal/store"
)

//go:embed migrations/*.up.sql
var migrations embed.FS

// jobLockKey is the first key of the schema's jobs' ingest locks: a hash of its name.
func jobLockKey(schema string) int32 {
	h := fnv.New32a()
	h.Write([]byte("sluice jobs " + schema))
	return int32(h.Sum32())
}

// notifyChannel is the schema's LISTEN/NOTIFY channel; the payload is the queue that got ready
// work. One channel per schema: installations sharing a database do not wake each other.
func notifyChannel(schema string) string {
	ch := "sluice_tasks." + schema
	if len(ch) > 63 { // Postgres truncates identifiers to 63 bytes; pg_notify refuses longer names
		sum := sha256.Sum256([]byte(schema))
		ch = "sluice_tasks." + hex.EncodeToString(sum[:16])
	}
	return ch
}

// Config configures [Open].
type Config struct {
	// URL is a libpq connection string or postgres:// URL. pgx options in it apply, for example
	// pool_max_conns (default 10 here), or default_query_exec_mode=simple_protocol behind a PgBouncer older than
	// 1.21 in transaction pooling mode.
	URL string
	// Schema holds Sluice's tables; it is created if missing and set as the search_path of every
	// pooled connection, so several deployments (or tests) can share a database. Behind PgBouncer
	// in transaction pooling mode keep the default, or set the role's search_path instead.
	// Defaults to "public".
	Schema string
	// SkipMigrate makes Open leave the schema as it is; `sluice migrate` uses it to report and
	// apply migrations itself. By default Open applies pending migrations.
	SkipMigrate bool
}

// DB is the PostgreSQL store. It is safe for concurrent use.
type DB struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig // for the dedicated LISTEN and lock connections
	schema  string
	listen  *listener
	floors  pickFloors // where this process's next pick of each queue starts
	// openFloors is where this process's next check of a job's open items starts
	openFloors openFloors
	// jobLockKey is the schema's first key of its jobs' ingest locks (see JobIngestLock):
	// installations sharing a database do not wait for each other's.
	jobLockKey int32
	// notifier announces the ready queues of committed transactions (see notifier)
	notifier notifier
	// briefs are the records of the brief batches in flight (brief.go)
	briefs briefRecords
	// reserve holds item ids drawn ahead, for roots added in one round trip (roots_written_ahead.go)
	reserve idReserve
	// staleRoots is the job whose roots last failed to go in ahead: its next roots read first,
	// until another job's roots fail ahead (see ItemInsertRoots).
	staleRoots atomic.Int64
	*queries
}

var _ store.Store = (*DB)(nil)

// Open connects to the database, creates the schema if missing and, unless cfg.SkipMigrate is
// set, applies pending migrations. Connections are made lazily; Open pings once.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.Schema == "" {
		cfg.Schema = "public"
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	if !strings.Contains(cfg.URL, "pool_max_conns") {
		// pgx's default, max(4, GOMAXPROCS), is too few for a process whose writers, leases,
		// item reads and API share the pool: they queue for a connection while the database idles.
		pcfg.MaxConns = max(pcfg.MaxConns, 10)
	}
	setPath := "SET search_path TO " + pgx.Identifier{cfg.Schema}.Sanitize()
	own := &ownPIDs{m: map[uint32]bool{}}
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, setPath); err != nil {
			return err
		}
		own.add(c.PgConn().PID())
		return nil
	}
	pcfg.BeforeClose = func(c *pgx.Conn) { own.remove(c.PgConn().PID()) }
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	db := &DB{pool: pool, connCfg: pcfg.ConnConfig, schema: cfg.Schema, jobLockKey: jobLockKey(cfg.Schema)}
	db.listen = &listener{cfg: pcfg.ConnConfig, channel: notifyChannel(cfg.Schema), wake: make(chan struct{}), own: own}
	db.queries = &queries{db: db, c: pool}
	if err := db.createSchema(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if !cfg.SkipMigrate {
		if _, err := db.Migrate(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return db, nil
}

func (db *DB) createSchema(ctx context.Context) error {
	var exists bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, db.schema).Scan(&exists); err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	if exists {
		return nil
	}
	_, err := db.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{db.schema}.Sanitize())
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		err = nil // another process created it at the same moment
	}
	if err != nil {
		return fmt.Errorf("create schema %q: %w", db.schema, err)
	}
	return nil
}

// Schema returns the schema that holds Sluice's tables.
func (db *DB) Schema() string { return db.schema }

// DropSchema drops schema with everything in it, connecting to url on its own connection. It is
// for throwaway installations (`sluice-bench engine --database`); stores open on the schema break.
func DropSchema(ctx context.Context, url, schema string) error {
	if schema == "" || schema == "public" {
		return fmt.Errorf("drop schema %q: refusing to drop the default schema", schema)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("drop schema %q: connect: %w", schema, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %q: %w", schema, err)
	}
	return nil
}

// Close stops the listener and closes every connection but those of held locks, which
// [store.Lock.Release] closes.
func (db *DB) Close() error {
	db.listen.stop()
	db.notifier.wait()
	db.pool.Close() // after the transactions in flight, which may start a reservation
	db.reserve.wg.Wait()
	return nil
}

// DatabaseNow returns the database server's clock (clock_timestamp(), not the transaction's
// start): the time every process sharing the database agrees on for leases (package dbclock).
func (db *DB) DatabaseNow(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := db.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, mapErr(fmt.Errorf("read the database's time: %w", err))
	}
	return t.UTC(), nil
}

// WaitReplicated waits until every standby streaming from the database has flushed the WAL
// written so far — every transaction committed before the call — or ctx ends. With asynchronous
// replication a commit the primary acknowledged may be lost when a standby is promoted; what
// WaitReplicated returned for survives a failover to any standby that was streaming. It returns
// at once on a database without standbys, and when the role may not read pg_stat_replication's
// positions (a superuser's, or pg_read_all_stats's): the guarantee then needs synchronous
// replication (docs/scale-out.md). The outbox's relay calls it before it publishes.
func (db *DB) WaitReplicated(ctx context.Context) error {
	var lsn string
	if err := db.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return mapErr(fmt.Errorf("read the write-ahead log position: %w", err))
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var behind int
		if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE flush_lsn < $1::pg_lsn`, lsn).Scan(&behind); err != nil {
			return mapErr(fmt.Errorf("read the standbys' positions: %w", err))
		}
		if behind == 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Capabilities reports that many processes may share the database, that Wait listens, and that
// writes on separate pooled connections run concurrently.
func (db *DB) Capabilities() store.Capabilities {
	return store.Capabilities{MultiProcess: true, Listen: true, ConcurrentWrites: true}
}

// Notify implements [store.Notifier].
func (db *DB) Notify() (<-chan struct{}, func() ([]string, bool), func()) {
	return db.listen.notify(false)
}

// NotifyOthers is [DB.Notify] without the notifications sent by this DB's own connections:
// those of other processes (and other DBs of this one) only. A process whose every transaction
// that makes tasks ready already wakes its workers when it commits (the engine's OnReady) uses
// it, so that one task made ready does not wake them twice: the second wake would start a pick
// that finds the task taken by the first (a held batch's BEGIN, pick and ROLLBACK, for nothing).
// The wake on connecting is kept.
func (db *DB) NotifyOthers() (<-chan struct{}, func() ([]string, bool), func()) {
	return db.listen.notify(true)
}

// ownPIDs are the backend process ids of a pool's connections: a notification's sender is one
// of them when this DB sent it. Safe for concurrent use.
type ownPIDs struct {
	mu sync.Mutex
	m  map[uint32]bool
}

func (o *ownPIDs) add(pid uint32) {
	o.mu.Lock()
	o.m[pid] = true
	o.mu.Unlock()
}

func (o *ownPIDs) remove(pid uint32) {
	o.mu.Lock()
	delete(o.m, pid)
	o.mu.Unlock()
}

func (o *ownPIDs) has(pid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[pid]
}

// Wait blocks until a task becomes ready in any process (a NOTIFY on sluice_tasks), ctx ends, or d
// passes. The first call starts a listener on a dedicated connection; while it cannot listen,
// Wait just waits for d or ctx. Notifications sent before a waiter arrives are not remembered.
func (db *DB) Wait(ctx context.Context, d time.Duration) {
	wake := db.listen.subscribe()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}

// InTx runs fn in one transaction (READ COMMITTED) and commits it if fn returns nil. The queues
// of tasks that became ready in it are announced once it committed, beside the caller (see
// notifier). BEGIN is sent with the first statement and COMMIT with the later writes (see txConn).
// A transaction whose roots went in ahead on an assumption that did not hold (see
// ItemInsertRoots) runs once more, its roots then read first.
func (db *DB) InTx(ctx context.Context, fn func(tx store.Executor) error) error {
	ahead, err := db.inTx(ctx, fn)
	if ahead != 0 && errors.Is(err, errStale) {
		db.staleRoots.Store(ahead)
		_, err = db.inTx(ctx, fn)
	}
	return err
}

// inTx is one run of InTx; ahead is the job whose roots it wrote ahead, if any.
func (db *DB) inTx(ctx context.Context, fn func(tx store.Executor) error) (int64, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, mapErr(fmt.Errorf("begin: %w", err))
	}
	defer conn.Release()
	tc := &txConn{conn: conn.Conn()}
	q := &queries{db: db, c: tc, inTx: true}
	if err := fn(q); err != nil {
		tc.rollback(context.WithoutCancel(ctx))
		q.endBrief(ctx, false)
		// What its picks took is ready again, before their floors.
		db.floors.reset(q.picked)
		switch { // a statement whose error the caller wrapped without mapErr
		case unavailable(err):
			err = fmt.Errorf("%w: %w: %w", store.ErrRetry, store.ErrUnavailable, err)
		case retryable(err):
			err = fmt.Errorf("%w: %w", store.ErrRetry, err)
		}
		return q.aheadJob, err
	}
	if err := tc.commit(ctx); err != nil {
		tc.rollback(context.WithoutCancel(ctx))
		q.endBrief(ctx, false)
		db.floors.reset(q.picked)
		return q.aheadJob, mapErr(err)
	}
	q.endBrief(ctx, true)
	db.floors.reset(q.again)
	db.notifier.send(db, q.notify)
	return 0, nil
}

// notifier sends the notifications of committed transactions (pg_notify of their ready queues),
// on a pooled connection of its own, outside them. A transaction that notifies takes a lock that
// is one for the whole server (every database) from before its commit record until it is
// flushed: notifying transactions commit one at a time, each waiting for the others' WAL flush.
// Sent after the commit, a notification is a statement of its own that writes nothing, and this
// process's inserts wait neither for other processes' (or other installations') commits nor
// make them wait. The process's own workers are woken as the transaction commits (the engine's
// OnReady), not by these; other processes hear of the work a round trip later. Queues announced
// while a send is under way go out together in the next: at most one send at a time. A send that
// fails is dropped: a lost notification only delays work until the listeners' next poll.
type notifier struct {
	mu      sync.Mutex
	pending []string
	sending bool
	wg      sync.WaitGroup
}

// send announces the queues, beside the caller.
func (n *notifier) send(db *DB, queues []string) {
	if len(queues) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, q := range queues {
		if !slices.Contains(n.pending, q) {
			n.pending = append(n.pending, q)
		}
	}
	if n.sending {
		return
	}
	n.sending = true
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			n.mu.Lock()
			qs := n.pending
			n.pending = nil
			if len(qs) == 0 {
				n.sending = false
				n.mu.Unlock()
				return
			}
			n.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = db.pool.Exec(ctx, qNotifyQueues, qs, db.listen.channel)
			cancel()
		}
	}()
}

// wait waits for the send under way, if any.
func (n *notifier) wait() { n.wg.Wait() }

const qNotifyQueues = `SELECT pg_notify($2, q) FROM unnest($1::text[]) q`

// TryLock takes the session-level advisory lock called name (scoped to the schema) on a
// connection of its own, for a leader among the processes sharing the database (the maintenance
// loop). ok is false when another session holds it. The server releases the lock when that
// connection ends, so a killed process never keeps it; [store.Lock.Check] pings the connection to
// notice a lost one. Locking needs a direct or session-pooled connection: PgBouncer in transaction
// pooling mode cannot hold session locks.
//
// While the lock is taken, a try costs one query on the pool and no new connection.
func (db *DB) TryLock(ctx context.Context, name string) (store.Lock, bool, error) {
	key := db.schema + "." + name
	var held bool
	if err := db.pool.QueryRow(ctx, qLockHeld, key).Scan(&held); err != nil {
		return nil, false, fmt.Errorf("lock %q: %w", name, err)
	}
	if held {
		return nil, false, nil
	}
	cfg := db.connCfg.Copy()
	// The server keeps the lock until it notices the connection is gone. A killed process's
	// socket is closed by its kernel at once; these keepalives bound the wait for a leader cut
	// off by the network to about 25s instead of the system default of hours.
	cfg.RuntimeParams["tcp_keepalives_idle"] = "10"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "5"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("lock %q: connect: %w", name, err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&ok); err != nil || !ok {
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, false, fmt.Errorf("lock %q: %w", name, err)
		}
		return nil, false, nil
	}
	return &advisoryLock{conn: conn, key: key}, true, nil
}

var _ store.Locker = (*DB)(nil)

// qLockHeld reports whether any session holds the advisory lock with the key's hash in this
// database. pg_locks shows a bigint key as its high and low 32 bits in classid and objid.
const qLockHeld = `SELECT EXISTS (SELECT 1 FROM pg_locks l, (SELECT hashtextextended($1, 0) AS k) h
	WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = ((h.k >> 32) & 4294967295)::oid AND l.objid = (h.k & 4294967295)::oid)`

// advisoryLock is a held session-level advisory lock and the connection that holds it.
type advisoryLock struct {
	mu   sync.Mutex
	conn *pgx.Conn // nil once released
	key  string
}

func (l *advisoryLock) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return errors.New("lock released")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := l.conn.Ping(ctx); err != nil {
		return fmt.Errorf("lock %q: connection lost: %w", l.key, err)
	}
	return nil
}

func (l *advisoryLock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, l.key)
	_ = l.conn.Close(ctx)
	l.conn = nil
}

// listener owns the LISTEN connection and wakes every waiter on each notification.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	own     *ownPIDs // the pool's connections, for subscribers of others' notifications only

	mu      sync.Mutex
	wake    chan struct{} // closed and replaced on every notification
	subs    map[*subscriber]bool
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func (l *listener) subscribe() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startLocked()
	return l.wake
}

// subscriber is one [store.Notifier] channel with the queues announced since its last take.
type subscriber struct {
	ch     chan struct{} // buffered: a notification while the reader is busy is kept
	queues map[string]bool
	all    bool
	others bool // not woken by the notifications of the pool's own connections
}

func (l *listener) notify(others bool) (<-chan struct{}, func() ([]string, bool), func()) {
	s := &subscriber{ch: make(chan struct{}, 1), queues: map[string]bool{}, others: others}
	l.mu.Lock()
	if l.subs == nil {
		l.subs = map[*subscriber]bool{}
	}
	l.subs[s] = true
	l.startLocked()
	l.mu.Unlock()
	take := func() ([]string, bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		qs := make([]string, 0, len(s.queues))
		for q := range s.queues {
			qs = append(qs, q)
		}
		clear(s.queues)
		all := s.all
		s.all = false
		return qs, all
	}
	return s.ch, take, func() {
		l.mu.Lock()
		delete(l.subs, s)
		l.mu.Unlock()
	}
}

func (l *listener) startLocked() {
	if !l.started && !l.stopped {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done = cancel, make(chan struct{})
		go l.run(ctx)
	}
}

// broadcast wakes the Notify channels with the queue announced ("" when any queue may have work)
// and, unless subsOnly, the waiters of Wait. own says the pool's own connection sent it.
func (l *listener) broadcast(subsOnly bool, queue string, own bool) {
	l.mu.Lock()
	if !subsOnly {
		close(l.wake)
		l.wake = make(chan struct{})
	}
	for s := range l.subs {
		if own && s.others {
			continue
		}
		if queue == "" {
			s.all = true
		} else {
			s.queues[queue] = true
		}
		select {
		case s.ch <- struct{}{}:
		default: // one is pending already
		}
	}
	l.mu.Unlock()
}

func (l *listener) stop() {
	l.mu.Lock()
	l.stopped = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// run listens until ctx ends, reconnecting with backoff. Each time it is listening it wakes the
// Notify channels once (and, after a reconnect, the waiters too), since notifications sent while
// it was not are lost.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := time.Second
	for lost := false; ; lost = true {
		if l.listenOnce(ctx, lost) {
			backoff = time.Second
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// listenOnce connects, listens and forwards notifications until the connection fails or ctx ends.
// It reports whether it got as far as listening.
func (l *listener) listenOnce(ctx context.Context, reconnect bool) bool {
	conn, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return false
	}
	// Whatever was announced before this point was not heard: after a lost connection wake
	// everyone once; on the first, the Notify channels (a Wait that has just begun need not).
	l.broadcast(!reconnect, "", false)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		l.broadcast(false, n.Payload, l.own.has(n.PID))
	}
}

// Migration is one numbered schema migration.
type Migration struct {
	Version int
	Name    string // file name without .up.sql; empty for an applied version this binary lacks
	// AppliedAt is when it was applied; zero while pending.
	AppliedAt time.Time
}

// MigrationVersions lists the embedded migration numbers (for the test that both drivers match).
func MigrationVersions() []int {
	var out []int
	for _, m := range embedded() {
		out = append(out, m.Version)
	}
	return out
}

type embeddedMigration struct {
	Version int
	Name    string
	SQL     string
}

func embedded() []embeddedMigration {
	names, _ := fs.Glob(migrations, "migrations/*.up.sql")
	var out []embeddedMigration
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".up.sql")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			panic(fmt.Sprintf("postgres migration %s: bad number", n)) // a build-time mistake
		}
		body, _ := migrations.ReadFile(n)
		out = append(out, embeddedMigration{Version: v, Name: base, SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b embeddedMigration) int { return a.Version - b.Version })
	return out
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL DEFAULT '', applied_at bigint NOT NULL)`

// MigrationStatus lists every embedded migration with when it was applied (zero if pending),
// followed by applied versions this binary does not know (a newer sluice migrated the schema).
func (db *DB) MigrationStatus(ctx context.Context) ([]Migration, error) {
	applied := map[int]time.Time{}
	var exists bool
	if err := db.pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read migration status: %w", err)
	}
	if exists {
		rows, err := db.pool.Query(ctx, `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
		if err != nil {
			return nil, fmt.Errorf("read migration status: %w", err)
		}
		var v int
		var at int64
		if _, err := pgx.ForEachRow(rows, []any{&v, &at}, func() error { applied[v] = fromMicros(at); return nil }); err != nil {
			return nil, fmt.Errorf("read migration status: %w", err)
		}
	}
	var out []Migration
	for _, m := range embedded() {
		out = append(out, Migration{Version: m.Version, Name: m.Name, AppliedAt: applied[m.Version]})
		delete(applied, m.Version)
	}
	var unknown []Migration
	for v, at := range applied {
		unknown = append(unknown, Migration{Version: v, AppliedAt: at})
	}
	slices.SortFunc(unknown, func(a, b Migration) int { return a.Version - b.Version })
	return append(out, unknown...), nil
}

// Migrate applies pending migrations in one transaction, serialised across processes by an
// advisory lock, and returns those it applied.
func (db *DB) Migrate(ctx context.Context) ([]Migration, error) {
	var done []Migration
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, db.schema+".sluice.migrate"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, createMigrationsTable); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return err
		}
		have, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		now := time.Now()
		for _, m := range embedded() {
			if slices.Contains(have, m.Version) {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, m.Version, m.Name, micros(now)); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			done = append(done, Migration{Version: m.Version, Name: m.Name, AppliedAt: now.UTC().Truncate(time.Microsecond)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("migrate schema %q: %w", db.schema, err)
	}
	return done, nil
}

// mapErr maps pgx's errors to the store's.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.NotFoundFrom(err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	if isExpectErr(err) && !errors.Is(err, errStale) {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	if errors.As(err, &pe) && pe.Code == "53100" { // disk_full
		return fmt.Errorf("%w: %w", store.ErrFull, err)
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w: %w", store.ErrRetry, store.ErrUnavailable, err)
	}
	if retryable(err) {
		return fmt.Errorf("%w: %w", store.ErrRetry, err)
	}
	return err
}

// unavailable reports an error of reaching the database rather than of the statement: no
// connection could be made, the connection broke, or the server is shutting down or starting.
func unavailable(err error) bool {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.Canceled) {
		return false // marked already, or the caller gave up
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// Also when it wraps a deadline: the URL's connect_timeout ran out on every host (a
		// dead primary whose standby is not yet promoted, or a server too slow to answer).
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "connection reset")
}

// retryable reports a deadlock or a serialization failure not yet marked [store.ErrRetry].
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") && !errors.Is(err, store.ErrRetry)
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
