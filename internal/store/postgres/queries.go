package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// querier is what the pool and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// queries implements store.Executor over the pool (each call its own transaction) or over one
// transaction. pgx prepares and caches each statement per connection, so the constants below are
// parsed once per connection.
type queries struct {
	db     *DB
	c      querier
	inTx   bool
	notify []string // queues with newly ready tasks, announced at commit
	// again and picked are the queues this transaction made tasks ready again in (readyAgain) and
	// picked from: their pick floors are cleared once it commits, and once it rolls back.
	again, picked []string
	// prefetched is the job of the items ItemInsertMany added, read in the same batch: the
	// engine reads it next, to fire the items' start. It answers that JobGet only if nothing
	// was sent or queued since (prefetchedAt is the txConn's count of sends then): a root added
	// at 200 per second is then 2 round trips, not 3.
	prefetched   *record.Job
	prefetchedAt int
	// fresh is the items this transaction inserted, with the tasks and events it wrote for
	// them (inserted_rows.go).
	fresh fresh
	// aheadJob is the job whose roots this transaction wrote ahead (roots_written_ahead.go), or 0.
	aheadJob int64
	// brief is the brief batch this transaction holds (brief.go), or nil.
	brief *briefBatch
}

// readyAgain is ready for tasks made ready again (given back, retried, unparked), which may lie
// before the queue's pick floor: it clears that floor as the change commits (see pickFloors).
func (q *queries) readyAgain(ctx context.Context, queue string) error {
	if !q.inTx {
		q.db.floors.reset([]string{queue})
	} else if !slices.Contains(q.again, queue) {
		q.again = append(q.again, queue)
	}
	return q.ready(ctx, queue)
}

// ready announces new ready work on queue: at commit inside a transaction, at once outside.
func (q *queries) ready(ctx context.Context, queue string) error {
	if q.inTx {
		if !slices.Contains(q.notify, queue) {
			q.notify = append(q.notify, queue)
		}
		return nil
	}
	_, err := q.c.Exec(ctx, `SELECT pg_notify($2, $1)`, queue, q.db.listen.channel)
	return err
}

// execLater runs a write whose result is only its error. Inside a transaction it goes out with
// the transaction's next statement, or its COMMIT, in one round trip (see txConn.execLater), and
// its error, naming what, is that statement's; outside one it runs at once.
func (q *queries) execLater(ctx context.Context, what, sql string, args ...any) error {
	if tc, ok := q.c.(*txConn); ok {
		tc.execLater(what, sql, args...)
		return nil
	}
	if _, err := q.c.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return nil
}

type scanner interface{ Scan(...any) error }

// where builds a WHERE clause with numbered parameters.
type where struct {
	conds []string
	args  []any
}

// add appends cond with its "?" replaced by the next parameter number.
func (w *where) add(cond string, arg any) {
	w.args = append(w.args, arg)
	w.conds = append(w.conds, strings.Replace(cond, "?", "$"+strconv.Itoa(len(w.args)), 1))
}

func (w *where) next(arg any) string {
	w.args = append(w.args, arg)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) String() string { return strings.Join(w.conds, " AND ") }

// likeEscaper escapes LIKE's wildcards (backslash is Postgres's default escape).
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func jsonOr(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

// later is a byte argument of an execLater write: a copy, since the write goes out after its
// caller returns and may reuse the slice.
func later(b []byte) []byte { return append([]byte{}, b...) }

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func collect[T any](rows pgx.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, mapErr(rows.Err())
}

// --- workflows

const (
	workflowCols       = `name, version, digest, definition, source, created_at`
	qWorkflowLock      = `SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '.sluice.workflow.' || $1, 0))`
	qWorkflowByDigest  = `SELECT version FROM workflows WHERE name = $1 AND digest = $2`
	qWorkflowInsert    = `INSERT INTO workflows (name, version, digest, definition, source, created_at) SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3, $4, $5 FROM workflows WHERE name = $1 RETURNING ` + workflowCols
	qWorkflowGet       = `SELECT ` + workflowCols + ` FROM workflows WHERE name = $1 AND version = $2`
	qWorkflowGetLatest = `SELECT ` + workflowCols + ` FROM workflows WHERE name = $1 ORDER BY version DESC LIMIT 1`
	qWorkflowList      = `SELECT ` + workflowCols + ` FROM workflows ORDER BY name, version`
)

func scanWorkflow(sc scanner) (*record.Workflow, error) {
	var wf record.Workflow
	var def, src string
	var created int64
	if err := sc.Scan(&wf.Name, &wf.Version, &wf.Digest, &def, &src, &created); err != nil {
		return nil, mapErr(err)
	}
	wf.Definition, wf.Source, wf.CreatedAt = []byte(def), []byte(src), fromMicros(created)
	return &wf, nil
}

// WorkflowInsert serialises inserts of one name with a transaction-scoped advisory lock, so
// concurrent applies of the same definition agree on one version.
func (q *queries) WorkflowInsert(ctx context.Context, p store.WorkflowInsertParams) (*record.Workflow, error) {
	var wf *record.Workflow
	insert := func(e store.Executor) error {
		qq := e.(*queries)
		if _, err := qq.c.Exec(ctx, qWorkflowLock, p.Name); err != nil {
			return err
		}
		var version int
		err := qq.c.QueryRow(ctx, qWorkflowByDigest, p.Name, p.Digest).Scan(&version)
		if err == nil {
			wf, err = qq.WorkflowGet(ctx, p.Name, version)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return mapErr(err)
		}
		wf, err = scanWorkflow(qq.c.QueryRow(ctx, qWorkflowInsert, p.Name, p.Digest, string(p.Definition), string(p.Source), micros(p.Now)))
		return err
	}
	var err error
	if q.inTx {
		err = insert(q)
	} else {
		err = q.db.InTx(ctx, insert)
	}
	if err != nil {
		return nil, fmt.Errorf("insert workflow %q: %w", p.Name, err)
	}
	return wf, nil
}

func (q *queries) WorkflowGet(ctx context.Context, name string, version int) (*record.Workflow, error) {
	var row pgx.Row
	if version == 0 {
		row = q.c.QueryRow(ctx, qWorkflowGetLatest, name)
	} else {
		row = q.c.QueryRow(ctx, qWorkflowGet, name, version)
	}
	wf, err := scanWorkflow(row)
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get workflow %q v%d: %w", name, version, err), "workflow", store.WorkflowRef(name, version))
	}
	return wf, nil
}

func (q *queries) WorkflowList(ctx context.Context) ([]*record.Workflow, error) {
	rows, err := q.c.Query(ctx, qWorkflowList)
	out, err := collect(rows, err, scanWorkflow)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// --- jobs

const (
	jobCols = `id, COALESCE(key, ''), workflow_name, workflow_version, state, error, metadata, options, total_bytes, sealed, created_at, finished_at`
	// ON CONFLICT DO NOTHING rather than a raised unique violation, which would abort the
	// caller's transaction (SQLite's statement-level rollback keeps it usable).
	qJobInsert = `INSERT INTO jobs (key, workflow_name, workflow_version, state, metadata, options, created_at, sealed)
		VALUES ($1, $2, $3, 'running', $4, $5, $6, $7) ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING RETURNING ` + jobCols
	qJobGet         = `SELECT ` + jobCols + ` FROM jobs WHERE id = $1`
	qJobLock        = `SELECT ` + jobCols + ` FROM jobs WHERE id = $1 FOR UPDATE`
	qJobGetByKey    = `SELECT ` + jobCols + ` FROM jobs WHERE key = $1`
	qJobListRunning = `SELECT ` + jobCols + ` FROM jobs WHERE state = 'running' ORDER BY id`
	qJobSetState    = `UPDATE jobs SET state = $1, error = $2, finished_at = $3 WHERE id = $4 AND state = 'running'`
	qJobReopen      = `UPDATE jobs SET state = 'running', error = '', finished_at = 0 WHERE id = $1 AND state IN ('failed', 'canceled', 'complete')`
	qJobSeal        = `UPDATE jobs SET sealed = true WHERE id = $1 AND NOT sealed`
	// The job's ingest lock: an advisory lock on (the schema's key, the job's id's low 32 bits).
	// Two jobs sharing a key only wait for each other more than they need to.
	qJobIngestLock = `SELECT pg_advisory_xact_lock_shared($1::int4, $2::int4)`
	qJobSealLock   = `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`
	qJobAddTotal   = `UPDATE jobs SET total_bytes = total_bytes + $1 WHERE id = $2`
	// qJobFirstOpen is an open item of the job, or 0 (see open_floors.go).
	qJobFirstOpen  = `SELECT COALESCE((SELECT id FROM open_items WHERE job_id = $1 LIMIT 1), 0)`
	qJobTotal      = `SELECT total_bytes FROM jobs WHERE id = $1`
	qJobItemStates = `SELECT state, count(*), COALESCE(SUM(colored), 0) FROM items WHERE job_id = $1 GROUP BY state`
)

func scanJob(sc scanner) (*record.Job, error) {
	var j record.Job
	var md, opts []byte
	var created, finished int64
	if err := sc.Scan(&j.ID, &j.Key, &j.WorkflowName, &j.WorkflowVersion, &j.State, &j.Error, &md, &opts, &j.TotalBytes, &j.Sealed, &created, &finished); err != nil {
		return nil, mapErr(err)
	}
	j.Metadata, j.Options, j.CreatedAt, j.FinishedAt = md, opts, fromMicros(created), fromMicros(finished)
	return &j, nil
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// JobSeal marks that no more roots will be added.
// The row's update comes before the ingest lock: an insert that ingests a root (an inline step)
// updates the row before it takes the lock shared, and must not wait for it behind a seal that
// waits for the row.
func (q *queries) JobSeal(ctx context.Context, id int64) (bool, error) {
	tag, err := q.c.Exec(ctx, qJobSeal, id)
	if err != nil {
		return false, fmt.Errorf("seal job %d: %w", id, mapErr(err))
	}
	// Sent with the transaction's next statement: nothing it reads before is a decision.
	if err := q.execLater(ctx, fmt.Sprintf("lock job %d for sealing", id), qJobSealLock, q.db.jobLockKey, int32(id)); err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// JobInsert returns an error wrapping [store.ErrConflict] when the key is taken.
func (q *queries) JobInsert(ctx context.Context, p store.JobInsertParams) (*record.Job, error) {
	j, err := scanJob(q.c.QueryRow(ctx, qJobInsert, nullIfEmpty(p.Key), p.WorkflowName, p.WorkflowVersion, jsonOr(p.Metadata), jsonOr(p.Options), micros(p.Now), !p.Open))
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w: job key %q exists", store.ErrConflict, p.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("insert job: %w", err)
	}
	return j, nil
}

func (q *queries) JobGet(ctx context.Context, id int64) (*record.Job, error) {
	if j := q.prefetched; j != nil {
		q.prefetched = nil
		if tc, ok := q.c.(*txConn); ok && j.ID == id && tc.sends == q.prefetchedAt && len(tc.later) == 0 {
			return j, nil
		}
	}
	j, err := scanJob(q.c.QueryRow(ctx, qJobGet, id))
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get job %d: %w", id, err), "job", id)
	}
	return j, nil
}

// JobLock locks the job's row until the transaction ends (SELECT … FOR UPDATE). Under READ
// COMMITTED each later statement sees what the previous holder committed.
func (q *queries) JobLock(ctx context.Context, id int64) (*record.Job, error) {
	j, err := scanJob(q.c.QueryRow(ctx, qJobLock, id))
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("lock job %d: %w", id, err), "job", id)
	}
	return j, nil
}

// JobIngestLock takes the lock in the same round trip as the read, which comes after it: under
// READ COMMITTED the read's snapshot is taken once the lock is granted.
func (q *queries) JobIngestLock(ctx context.Context, id int64) (*record.Job, error) {
	if err := q.execLater(ctx, fmt.Sprintf("lock job %d for ingesting", id), qJobIngestLock, q.db.jobLockKey, int32(id)); err != nil {
		return nil, err
	}
	return q.JobGet(ctx, id)
}

func (q *queries) JobGetByKey(ctx context.Context, key string) (*record.Job, error) {
	j, err := scanJob(q.c.QueryRow(ctx, qJobGetByKey, key))
	if err != nil {
		return nil, fmt.Errorf("get job by key: %w", err)
	}
	return j, nil
}

func (q *queries) JobList(ctx context.Context, p store.JobListParams) ([]*record.Job, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	var w where
	if p.State != "" {
		w.add("state = ?", p.State)
	}
	if p.AfterID > 0 {
		w.add("id < ?", p.AfterID)
	}
	if p.Workflow != "" {
		w.add("workflow_name = ?", p.Workflow)
	}
	if !p.CreatedFrom.IsZero() {
		w.add("created_at >= ?", micros(p.CreatedFrom))
	}
	if !p.CreatedUntil.IsZero() {
		w.add("created_at < ?", micros(p.CreatedUntil))
	}
	for _, kv := range p.Meta {
		k := w.next(kv.Key)
		w.add("metadata ->> "+k+" = ?", kv.Value)
	}
	if p.Text != "" {
		t := w.next(p.Text)
		like := w.next("%" + likeEscaper.Replace(p.Text) + "%")
		w.conds = append(w.conds, "(id::text = "+t+" OR workflow_name ILIKE "+like+" OR COALESCE(key, '') ILIKE "+like+
			" OR error ILIKE "+like+" OR metadata::text ILIKE "+like+")")
	}
	query := `SELECT ` + jobCols + ` FROM jobs`
	if len(w.conds) > 0 {
		query += " WHERE " + w.String()
	}
	query += " ORDER BY id DESC LIMIT " + w.next(p.Limit)
	rows, err := q.c.Query(ctx, query, w.args...)
	out, err := collect(rows, err, scanJob)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

func (q *queries) JobListRunning(ctx context.Context) ([]*record.Job, error) {
	rows, err := q.c.Query(ctx, qJobListRunning)
	out, err := collect(rows, err, scanJob)
	if err != nil {
		return nil, fmt.Errorf("list running jobs: %w", err)
	}
	return out, nil
}

func (q *queries) JobSetState(ctx context.Context, p store.JobSetStateParams) (bool, error) {
	tag, err := q.c.Exec(ctx, qJobSetState, p.State, p.Error, micros(p.Now), p.ID)
	if err != nil {
		return false, fmt.Errorf("set job %d state: %w", p.ID, mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

func (q *queries) JobReopen(ctx context.Context, id int64) (bool, error) {
	tag, err := q.c.Exec(ctx, qJobReopen, id)
	if err != nil {
		return false, fmt.Errorf("reopen job %d: %w", id, mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

func (q *queries) JobAddTotal(ctx context.Context, id int64, bytes float64) error {
	return q.execLater(ctx, fmt.Sprintf("add to job %d total", id), qJobAddTotal, bytes, id)
}

func (q *queries) JobProgress(ctx context.Context, id int64) (*store.JobProgress, error) {
	p := &store.JobProgress{Items: map[record.ItemState]int{}}
	if err := q.c.QueryRow(ctx, qJobTotal, id).Scan(&p.Total); err != nil {
		return nil, fmt.Errorf("job %d progress: %w", id, mapErr(err))
	}
	rows, err := q.c.Query(ctx, qJobItemStates, id)
	if err != nil {
		return nil, fmt.Errorf("job %d progress: %w", id, mapErr(err))
	}
	var state record.ItemState
	var n int
	var colored float64
	if _, err := pgx.ForEachRow(rows, []any{&state, &n, &colored}, func() error {
		p.Items[state] = n
		p.Colored += colored
		return nil
	}); err != nil {
		return nil, fmt.Errorf("job %d progress: %w", id, mapErr(err))
	}
	return p, nil
}

// --- events

const (
	qEventInsert = `INSERT INTO events (item_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	qEventList   = `SELECT name FROM events WHERE item_id = $1 ORDER BY created_at, name`
	// qEventListMany reads the array through ARRAY(…), so that the rows are found through the
	// primary key whatever the count (see qItemGetMany).
	qEventListMany = `SELECT item_id, name FROM events WHERE item_id = ANY (ARRAY(SELECT unnest($1::bigint[]))) ORDER BY item_id, created_at, name`
	// qEventListNamed looks up each (item, name) pair by the primary key.
	qEventListNamed = `SELECT e.item_id, e.name FROM unnest($1::bigint[], $2::text[]) AS u(item_id, name) JOIN events e ON e.item_id = u.item_id AND e.name = u.name`
)

func (q *queries) EventInsert(ctx context.Context, p store.EventInsertParams) (bool, error) {
	itemID, name, now := p.ItemID, p.Name, p.Now
	tag, err := q.c.Exec(ctx, qEventInsert, itemID, name, micros(now))
	if err != nil {
		return false, fmt.Errorf("insert event %q on item %d: %w", name, itemID, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	q.wrote(itemID, name, true)
	return true, nil
}

func (q *queries) EventListByItem(ctx context.Context, itemID int64) ([]string, error) {
	rows, err := q.c.Query(ctx, qEventList, itemID)
	out, err := collect(rows, err, func(sc scanner) (string, error) {
		var s string
		return s, sc.Scan(&s)
	})
	if err != nil {
		return nil, fmt.Errorf("list events of item %d: %w", itemID, err)
	}
	return out, nil
}

func (q *queries) EventListByItems(ctx context.Context, itemIDs []int64) (map[int64][]string, error) {
	return q.eventsOf(ctx, fmt.Sprintf("list events of %d items", len(itemIDs)), len(itemIDs), qEventListMany, itemIDs)
}

func (q *queries) EventListNamed(ctx context.Context, itemIDs []int64, names []string) (map[int64][]string, error) {
	return q.eventsOf(ctx, fmt.Sprintf("list %d named events", len(itemIDs)), len(itemIDs), qEventListNamed, itemIDs, names)
}

// eventsOf runs a query answering (item id, event name) rows, grouped by item; n is how many
// items (or pairs) it asks for, and none asks nothing.
func (q *queries) eventsOf(ctx context.Context, what string, n int, query string, args ...any) (map[int64][]string, error) {
	out := map[int64][]string{}
	if n == 0 {
		return out, nil
	}
	rows, err := q.c.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	var id int64
	var name string
	if _, err := pgx.ForEachRow(rows, []any{&id, &name}, func() error {
		out[id] = append(out[id], name)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return out, nil
}

// --- waits

func (q *queries) WaitInsert(ctx context.Context, p store.Wait) error {
	if _, err := q.c.Exec(ctx, `INSERT INTO waits (item_id, step, job_id, due_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		p.ItemID, p.Step, p.JobID, micros(p.Due)); err != nil {
		return fmt.Errorf("insert wait of step %q of item %d: %w", p.Step, p.ItemID, mapErr(err))
	}
	return nil
}

func (q *queries) WaitDelete(ctx context.Context, itemID int64, step string) error {
	if _, err := q.c.Exec(ctx, `DELETE FROM waits WHERE item_id = $1 AND step = $2`, itemID, step); err != nil {
		return fmt.Errorf("delete wait of step %q of item %d: %w", step, itemID, mapErr(err))
	}
	return nil
}

func (q *queries) WaitListDue(ctx context.Context, now time.Time, limit int) ([]store.Wait, error) {
	return q.waits(ctx, `SELECT job_id, item_id, step, due_at FROM waits WHERE due_at <= $1 ORDER BY due_at, item_id, step LIMIT $2`, micros(now), limit)
}

func (q *queries) WaitListByJob(ctx context.Context, jobID int64) ([]store.Wait, error) {
	return q.waits(ctx, `SELECT job_id, item_id, step, due_at FROM waits WHERE job_id = $1 ORDER BY item_id, step`, jobID)
}

func (q *queries) waits(ctx context.Context, query string, args ...any) ([]store.Wait, error) {
	rows, err := q.c.Query(ctx, query, args...)
	out, err := collect(rows, err, func(sc scanner) (store.Wait, error) {
		var w store.Wait
		var due int64
		err := sc.Scan(&w.JobID, &w.ItemID, &w.Step, &due)
		w.Due = fromMicros(due)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list waits: %w", err)
	}
	return out, nil
}

// --- outputs

const qOutputPut = `INSERT INTO outputs (item_id, job_id, kind, value, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`

// qOutputSupersede moves an output to the history in one statement.
const qOutputSupersede = `WITH gone AS (DELETE FROM outputs WHERE item_id = $1 AND kind = $2 RETURNING item_id, job_id, kind, value, created_at)
	INSERT INTO output_history (item_id, job_id, kind, value, created_at, superseded_at) SELECT item_id, job_id, kind, value, created_at, $3 FROM gone`

func (q *queries) OutputSupersede(ctx context.Context, p store.OutputSupersedeParams) (bool, error) {
	tag, err := q.c.Exec(ctx, qOutputSupersede, p.ItemID, p.Kind, micros(p.Now))
	if err != nil {
		return false, fmt.Errorf("supersede output %q of item %d: %w", p.Kind, p.ItemID, mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

func (q *queries) OutputHistoryList(ctx context.Context, itemID int64) ([]*record.SupersededOutput, error) {
	rows, err := q.c.Query(ctx, `SELECT item_id, job_id, kind, value, created_at, superseded_at FROM output_history
		WHERE item_id = $1 ORDER BY superseded_at, ctid`, itemID)
	out, err := collect(rows, err, func(sc scanner) (*record.SupersededOutput, error) {
		var o record.SupersededOutput
		var c, s int64
		if err := sc.Scan(&o.ItemID, &o.JobID, &o.Kind, &o.Value, &c, &s); err != nil {
			return nil, err
		}
		o.CreatedAt, o.SupersededAt = fromMicros(c), fromMicros(s)
		return &o, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list superseded outputs of item %d: %w", itemID, mapErr(err))
	}
	return out, nil
}

func (q *queries) OutputPut(ctx context.Context, p store.OutputPutParams) error {
	return q.execLater(ctx, fmt.Sprintf("put output %q of item %d", p.Kind, p.ItemID), qOutputPut, p.ItemID, p.JobID, p.Kind, later(p.Value), micros(p.Now))
}

func (q *queries) OutputList(ctx context.Context, p store.OutputListParams) ([]*record.Output, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	var w where
	w.add("item_id > ?", p.AfterItem)
	if p.JobID != 0 {
		w.add("job_id = ?", p.JobID)
	}
	if p.Kind != "" {
		w.add("kind = ?", p.Kind)
	}
	rows, err := q.c.Query(ctx, `SELECT item_id, job_id, kind, value, created_at FROM outputs WHERE `+w.String()+` ORDER BY item_id, kind LIMIT `+w.next(p.Limit), w.args...)
	out, err := collect(rows, err, func(sc scanner) (*record.Output, error) {
		var o record.Output
		var c int64
		if err := sc.Scan(&o.ItemID, &o.JobID, &o.Kind, &o.Value, &c); err != nil {
			return nil, err
		}
		o.CreatedAt = fromMicros(c)
		return &o, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list outputs: %w", err)
	}
	return out, nil
}

// --- cache

const (
	qCacheGet    = `SELECT value FROM cache WHERE key = $1`
	qCachePut    = `INSERT INTO cache (key, value, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	qCacheDelete = `DELETE FROM cache WHERE key = $1`
	// The cache scan mirrors SQLite's instr(value, sha): blob GC is rare and offline-ish.
	// The <> '' conditions repeat the partial indexes' predicates (002_partial_item_indexes.up.sql).
	qBlobIsReferenced = `SELECT EXISTS (SELECT 1 FROM items WHERE blob_sha256 = $1 AND blob_sha256 <> '')
		OR EXISTS (SELECT 1 FROM items WHERE thumbnail_sha256 = $1 AND thumbnail_sha256 <> '')
		OR EXISTS (SELECT 1 FROM cache WHERE position(convert_to($1, 'UTF8') IN value) > 0)`
)

func (q *queries) CacheGet(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	if err := q.c.QueryRow(ctx, qCacheGet, key).Scan(&v); err != nil {
		return nil, fmt.Errorf("get cache entry: %w", mapErr(err))
	}
	return nonNil(v), nil
}

func (q *queries) CachePut(ctx context.Context, p store.CachePutParams) error {
	key, value, now := p.Key, p.Value, p.Now
	return q.execLater(ctx, "put cache entry", qCachePut, key, later(value), micros(now))
}

func (q *queries) CacheDelete(ctx context.Context, key string) error {
	if _, err := q.c.Exec(ctx, qCacheDelete, key); err != nil {
		return fmt.Errorf("delete cache entry: %w", mapErr(err))
	}
	return nil
}

func (q *queries) BlobIsReferenced(ctx context.Context, sha string) (bool, error) {
	var ref bool
	if err := q.c.QueryRow(ctx, qBlobIsReferenced, sha).Scan(&ref); err != nil {
		return false, fmt.Errorf("blob %s references: %w", sha, mapErr(err))
	}
	return ref, nil
}
