package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries implements store.Executor over the read pool and the writer (outside a transaction) or
// over one transaction.
type queries struct {
	db *DB
	r  dbtx
	w  dbtx
	tx *sql.Tx
	// brief is the brief batch the transaction holds (brief.go), or nil.
	brief *briefBatch
	// txStmts holds the statements bound to the transaction, one per query: the transaction
	// keeps every statement bound to it until it ends, and a domain that writes 100,000 rows in
	// one made as many.
	txMu    sync.Mutex
	txStmts map[string]*sql.Stmt
}

// prepared returns a statement prepared once on the writer connection, bound to the transaction
// when there is one. The engine's hot path runs the same few statements thousands of times a
// second; preparing each once saves most of database/sql's per-call cost.
func (q *queries) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if q.tx != nil {
		q.txMu.Lock()
		defer q.txMu.Unlock()
		if st := q.txStmts[query]; st != nil {
			return st, nil
		}
		if q.txStmts == nil {
			q.txStmts = map[string]*sql.Stmt{}
		}
	}
	v, ok := q.db.stmts.Load(query)
	if !ok && q.tx != nil {
		// The transaction holds the only writer connection: preparing on the pool would wait
		// for it forever. Prepare on the transaction now and cache on the writer after commit.
		q.db.pending.Store(query, true)
		st, err := q.tx.PrepareContext(ctx, query)
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		q.txStmts[query] = st
		return st, nil
	}
	if !ok {
		st, err := q.db.w.PrepareContext(ctx, query)
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		v, _ = q.db.stmts.LoadOrStore(query, st)
	}
	st := v.(*sql.Stmt)
	if q.tx != nil {
		st = q.tx.StmtContext(ctx, st)
		q.txStmts[query] = st
	}
	return st, nil
}

// rprepared returns a statement prepared on the read pool (or the transaction's).
func (q *queries) rprepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if q.tx != nil {
		return q.prepared(ctx, query)
	}
	v, ok := q.db.rstmts.Load(query)
	if !ok {
		st, err := q.db.r.PrepareContext(ctx, query)
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		v, ok = q.db.rstmts.LoadOrStore(query, st)
		if ok {
			st.Close()
		}
	}
	return v.(*sql.Stmt), nil
}

// rrow runs a one-row read through a prepared statement.
func (q *queries) rrow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := q.rprepared(ctx, query)
	if err != nil {
		return q.r.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// wquery runs a read on the writer side (or the transaction) through a prepared statement.
func (q *queries) wquery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := q.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (q *queries) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := q.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := st.ExecContext(ctx, args...)
	return res, mapErr(err)
}

func (q *queries) wrow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := q.prepared(ctx, query)
	if err != nil {
		return q.w.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// --- workflows

func (q *queries) WorkflowInsert(ctx context.Context, p store.WorkflowInsertParams) (*record.Workflow, error) {
	var wf *record.Workflow
	var err error
	insert := func(e store.Executor) error {
		qq := e.(*queries)
		var version int
		err := qq.w.QueryRowContext(ctx, `SELECT version FROM workflows WHERE name = ? AND digest = ?`, p.Name, p.Digest).Scan(&version)
		if err == nil {
			wf, err = qq.WorkflowGet(ctx, p.Name, version)
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := qq.w.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) + 1 FROM workflows WHERE name = ?`, p.Name).Scan(&version); err != nil {
			return err
		}
		if _, err := qq.w.ExecContext(ctx, `INSERT INTO workflows (name, version, digest, definition, source, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			p.Name, version, p.Digest, string(p.Definition), string(p.Source), micros(p.Now)); err != nil {
			return mapErr(err)
		}
		wf = &record.Workflow{Name: p.Name, Version: version, Digest: p.Digest, Definition: p.Definition, Source: p.Source, CreatedAt: p.Now.UTC()}
		return nil
	}
	if q.tx != nil {
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
	query := `SELECT name, version, digest, definition, source, created_at FROM workflows WHERE name = ? AND version = ?`
	args := []any{name, version}
	if version == 0 {
		query = `SELECT name, version, digest, definition, source, created_at FROM workflows WHERE name = ? ORDER BY version DESC LIMIT 1`
		args = args[:1]
	}
	var wf record.Workflow
	var def, src string
	var created int64
	err := q.r.QueryRowContext(ctx, query, args...).Scan(&wf.Name, &wf.Version, &wf.Digest, &def, &src, &created)
	if err != nil {
		return nil, store.NotFound(mapErr(fmt.Errorf("get workflow %q v%d: %w", name, version, err)), "workflow", store.WorkflowRef(name, version))
	}
	wf.Definition, wf.Source, wf.CreatedAt = []byte(def), []byte(src), fromMicros(created)
	return &wf, nil
}

func (q *queries) WorkflowList(ctx context.Context) ([]*record.Workflow, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT name, version, digest, definition, source, created_at FROM workflows ORDER BY name, version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*record.Workflow
	for rows.Next() {
		var wf record.Workflow
		var def, src string
		var created int64
		if err := rows.Scan(&wf.Name, &wf.Version, &wf.Digest, &def, &src, &created); err != nil {
			return nil, err
		}
		wf.Definition, wf.Source, wf.CreatedAt = []byte(def), []byte(src), fromMicros(created)
		out = append(out, &wf)
	}
	return out, rows.Err()
}

// --- jobs

const jobCols = `id, COALESCE(key, ''), workflow_name, workflow_version, state, error, metadata, options, total_bytes, sealed, created_at, finished_at`

func scanJob(sc interface{ Scan(...any) error }) (*record.Job, error) {
	var j record.Job
	var md, opts string
	var created, finished int64
	if err := sc.Scan(&j.ID, &j.Key, &j.WorkflowName, &j.WorkflowVersion, &j.State, &j.Error, &md, &opts, &j.TotalBytes, &j.Sealed, &created, &finished); err != nil {
		return nil, mapErr(err)
	}
	j.Metadata, j.Options, j.CreatedAt, j.FinishedAt = []byte(md), []byte(opts), fromMicros(created), fromMicros(finished)
	return &j, nil
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func jsonOr(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

func (q *queries) JobInsert(ctx context.Context, p store.JobInsertParams) (*record.Job, error) {
	row := q.wrow(ctx, `INSERT INTO jobs (key, workflow_name, workflow_version, state, metadata, options, created_at, sealed) VALUES (?, ?, ?, 'running', ?, ?, ?, ?) RETURNING `+jobCols,
		nullIfEmpty(p.Key), p.WorkflowName, p.WorkflowVersion, jsonOr(p.Metadata), jsonOr(p.Options), micros(p.Now), !p.Open)
	j, err := scanJob(row)
	if err != nil {
		return nil, fmt.Errorf("insert job: %w", err)
	}
	return j, nil
}

func (q *queries) JobGet(ctx context.Context, id int64) (*record.Job, error) {
	j, err := scanJob(q.rrow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get job %d: %w", id, err), "job", id)
	}
	return j, nil
}

// JobLock reads the job on the writer: SQLite's single writer already serialises transactions.
func (q *queries) JobLock(ctx context.Context, id int64) (*record.Job, error) {
	j, err := scanJob(q.wrow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("lock job %d: %w", id, err), "job", id)
	}
	return j, nil
}

// JobIngestLock reads the job on the writer, as JobLock does.
func (q *queries) JobIngestLock(ctx context.Context, id int64) (*record.Job, error) {
	return q.JobLock(ctx, id)
}

func (q *queries) JobGetByKey(ctx context.Context, key string) (*record.Job, error) {
	j, err := scanJob(q.r.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE key = ?`, key))
	if err != nil {
		return nil, fmt.Errorf("get job by key: %w", err)
	}
	return j, nil
}

func (q *queries) JobList(ctx context.Context, p store.JobListParams) ([]*record.Job, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	var where []string
	var args []any
	if p.State != "" {
		where = append(where, "state = ?")
		args = append(args, p.State)
	}
	if p.AfterID > 0 {
		where = append(where, "id < ?")
		args = append(args, p.AfterID)
	}
	if p.Workflow != "" {
		where = append(where, "workflow_name = ?")
		args = append(args, p.Workflow)
	}
	if !p.CreatedFrom.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, micros(p.CreatedFrom))
	}
	if !p.CreatedUntil.IsZero() {
		where = append(where, "created_at < ?")
		args = append(args, micros(p.CreatedUntil))
	}
	for _, kv := range p.Meta {
		// The key is a parameter (a JSON path of one quoted member), never spliced into SQL.
		// A string compares as its characters; anything else as its JSON text, which -> keeps
		// as written (a 20-digit integer whole, true as true), as Postgres's ->> gives it.
		where = append(where, "(CASE json_type(metadata, ?) WHEN 'text' THEN json_extract(metadata, ?) ELSE metadata -> ? END) = ?")
		path := jsonMember(kv.Key)
		args = append(args, path, path, path, kv.Value)
	}
	if p.Text != "" {
		like := "%" + likeEscaper.Replace(p.Text) + "%"
		where = append(where, `(CAST(id AS TEXT) = ? OR workflow_name LIKE ? ESCAPE '\' OR COALESCE(key, '') LIKE ? ESCAPE '\' OR error LIKE ? ESCAPE '\' OR metadata LIKE ? ESCAPE '\')`)
		args = append(args, p.Text, like, like, like, like)
	}
	query := `SELECT ` + jobCols + ` FROM jobs`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id DESC LIMIT ?"
	args = append(args, p.Limit)
	return q.listJobs(ctx, query, args...)
}

// likeEscaper escapes LIKE's wildcards (with the ESCAPE '\' of the pattern).
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// jsonMember is the JSON path of the object member key: $."key", its quotes and backslashes
// escaped.
func jsonMember(key string) string {
	return `$."` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

func (q *queries) listJobs(ctx context.Context, query string, args ...any) ([]*record.Job, error) {
	rows, err := q.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []*record.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func (q *queries) JobListRunning(ctx context.Context) ([]*record.Job, error) {
	return q.listJobs(ctx, `SELECT `+jobCols+` FROM jobs WHERE state = 'running' ORDER BY id`)
}

func (q *queries) JobSetState(ctx context.Context, p store.JobSetStateParams) (bool, error) {
	res, err := q.exec(ctx, `UPDATE jobs SET state = ?, error = ?, finished_at = ? WHERE id = ? AND state = 'running'`, p.State, p.Error, micros(p.Now), p.ID)
	if err != nil {
		return false, fmt.Errorf("set job %d state: %w", p.ID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (q *queries) JobReopen(ctx context.Context, id int64) (bool, error) {
	res, err := q.w.ExecContext(ctx, `UPDATE jobs SET state = 'running', error = '', finished_at = 0 WHERE id = ? AND state IN ('failed', 'canceled', 'complete')`, id)
	if err != nil {
		return false, fmt.Errorf("reopen job %d: %w", id, mapErr(err))
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (q *queries) JobSeal(ctx context.Context, id int64) (bool, error) {
	res, err := q.exec(ctx, `UPDATE jobs SET sealed = 1 WHERE id = ? AND sealed = 0`, id)
	if err != nil {
		return false, fmt.Errorf("seal job %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (q *queries) JobAddTotal(ctx context.Context, id int64, bytes float64) error {
	_, err := q.exec(ctx, `UPDATE jobs SET total_bytes = total_bytes + ? WHERE id = ?`, bytes, id)
	return err
}

// qJobHasOpenItems repeats items_job_open's predicate (migration 012), for SQLite to use it.
const qJobHasOpenItems = `SELECT EXISTS (SELECT 1 FROM items WHERE job_id = ? AND state IN ('created', 'written', 'processed') AND state <> 'ingested')`

func (q *queries) JobHasOpenItems(ctx context.Context, id int64) (bool, error) {
	var n int
	err := q.wrow(ctx, qJobHasOpenItems, id).Scan(&n)
	return n > 0, mapErr(err)
}

func (q *queries) JobProgress(ctx context.Context, id int64) (*store.JobProgress, error) {
	p := &store.JobProgress{Items: map[record.ItemState]int{}}
	if err := q.r.QueryRowContext(ctx, `SELECT total_bytes FROM jobs WHERE id = ?`, id).Scan(&p.Total); err != nil {
		return nil, mapErr(fmt.Errorf("job %d progress: %w", id, err))
	}
	rows, err := q.r.QueryContext(ctx, `SELECT state, count(*), COALESCE(SUM(colored), 0) FROM items WHERE job_id = ? GROUP BY state`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var state record.ItemState
		var n int
		var colored float64
		if err := rows.Scan(&state, &n, &colored); err != nil {
			return nil, err
		}
		p.Items[state] = n
		p.Colored += colored
	}
	return p, rows.Err()
}

// --- events

func (q *queries) EventInsert(ctx context.Context, p store.EventInsertParams) (bool, error) {
	itemID, name, now := p.ItemID, p.Name, p.Now
	res, err := q.exec(ctx, `INSERT INTO events (item_id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, itemID, name, micros(now))
	if err != nil {
		return false, fmt.Errorf("insert event %q on item %d: %w", name, itemID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (q *queries) EventListByItem(ctx context.Context, itemID int64) ([]string, error) {
	st, err := q.prepared(ctx, `SELECT name FROM events WHERE item_id = ? ORDER BY created_at, name`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, itemID)
	if err != nil {
		return nil, fmt.Errorf("list events of item %d: %w", itemID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

func (q *queries) EventListByItems(ctx context.Context, itemIDs []int64) (map[int64][]string, error) {
	out := map[int64][]string{}
	if len(itemIDs) == 0 {
		return out, nil
	}
	rows, err := q.wquery(ctx, `SELECT item_id, name FROM events WHERE item_id IN (SELECT value FROM json_each(?)) ORDER BY item_id, created_at, name`, idArray(itemIDs))
	if err != nil {
		return nil, fmt.Errorf("list events of %d items: %w", len(itemIDs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		out[id] = append(out[id], name)
	}
	return out, rows.Err()
}

// EventListNamed reads the items' whole sets and keeps the named events: on SQLite the read of an
// item's few events costs less than a lookup per pair built from JSON.
func (q *queries) EventListNamed(ctx context.Context, itemIDs []int64, names []string) (map[int64][]string, error) {
	out := map[int64][]string{}
	if len(itemIDs) == 0 {
		return out, nil
	}
	want := make(map[int64][]string, len(itemIDs))
	ids := make([]int64, 0, len(itemIDs))
	for i, id := range itemIDs {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
		want[id] = append(want[id], names[i])
	}
	all, err := q.EventListByItems(ctx, ids)
	if err != nil {
		return nil, err
	}
	for id, ns := range all {
		for _, n := range ns {
			if slices.Contains(want[id], n) {
				out[id] = append(out[id], n)
			}
		}
	}
	return out, nil
}

// --- waits

func (q *queries) WaitInsert(ctx context.Context, p store.Wait) error {
	if _, err := q.exec(ctx, `INSERT INTO waits (item_id, step, job_id, due_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.ItemID, p.Step, p.JobID, micros(p.Due)); err != nil {
		return fmt.Errorf("insert wait of step %q of item %d: %w", p.Step, p.ItemID, err)
	}
	return nil
}

func (q *queries) WaitDelete(ctx context.Context, itemID int64, step string) error {
	if _, err := q.exec(ctx, `DELETE FROM waits WHERE item_id = ? AND step = ?`, itemID, step); err != nil {
		return fmt.Errorf("delete wait of step %q of item %d: %w", step, itemID, err)
	}
	return nil
}

func (q *queries) WaitListDue(ctx context.Context, now time.Time, limit int) ([]store.Wait, error) {
	return q.waits(ctx, `SELECT job_id, item_id, step, due_at FROM waits WHERE due_at <= ? ORDER BY due_at, item_id, step LIMIT ?`, micros(now), limit)
}

func (q *queries) WaitListByJob(ctx context.Context, jobID int64) ([]store.Wait, error) {
	return q.waits(ctx, `SELECT job_id, item_id, step, due_at FROM waits WHERE job_id = ? ORDER BY item_id, step`, jobID)
}

func (q *queries) waits(ctx context.Context, query string, args ...any) ([]store.Wait, error) {
	st, err := q.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("list waits: %w", err)
	}
	defer rows.Close()
	var out []store.Wait
	for rows.Next() {
		var w store.Wait
		var due int64
		if err := rows.Scan(&w.JobID, &w.ItemID, &w.Step, &due); err != nil {
			return nil, err
		}
		w.Due = fromMicros(due)
		out = append(out, w)
	}
	return out, rows.Err()
}

// --- outputs

func (q *queries) OutputPut(ctx context.Context, p store.OutputPutParams) error {
	_, err := q.exec(ctx, `INSERT INTO outputs (item_id, job_id, kind, value, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.ItemID, p.JobID, p.Kind, string(p.Value), micros(p.Now))
	if err != nil {
		return fmt.Errorf("put output %q of item %d: %w", p.Kind, p.ItemID, err)
	}
	return nil
}

func (q *queries) OutputSupersede(ctx context.Context, p store.OutputSupersedeParams) (bool, error) {
	res, err := q.exec(ctx, `INSERT INTO output_history (item_id, job_id, kind, value, created_at, superseded_at)
		SELECT item_id, job_id, kind, value, created_at, ? FROM outputs WHERE item_id = ? AND kind = ?`, micros(p.Now), p.ItemID, p.Kind)
	if err != nil {
		return false, fmt.Errorf("supersede output %q of item %d: %w", p.Kind, p.ItemID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if _, err := q.exec(ctx, `DELETE FROM outputs WHERE item_id = ? AND kind = ?`, p.ItemID, p.Kind); err != nil {
		return false, fmt.Errorf("supersede output %q of item %d: %w", p.Kind, p.ItemID, err)
	}
	return true, nil
}

func (q *queries) OutputHistoryList(ctx context.Context, itemID int64) ([]*record.SupersededOutput, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT item_id, job_id, kind, value, created_at, superseded_at FROM output_history
		WHERE item_id = ? ORDER BY superseded_at, rowid`, itemID)
	if err != nil {
		return nil, fmt.Errorf("list superseded outputs of item %d: %w", itemID, err)
	}
	defer rows.Close()
	var out []*record.SupersededOutput
	for rows.Next() {
		var o record.SupersededOutput
		var v string
		var c, s int64
		if err := rows.Scan(&o.ItemID, &o.JobID, &o.Kind, &v, &c, &s); err != nil {
			return nil, fmt.Errorf("list superseded outputs of item %d: %w", itemID, err)
		}
		o.Value, o.CreatedAt, o.SupersededAt = []byte(v), fromMicros(c), fromMicros(s)
		out = append(out, &o)
	}
	return out, rows.Err()
}

func (q *queries) OutputList(ctx context.Context, p store.OutputListParams) ([]*record.Output, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	where := []string{"item_id > ?"}
	args := []any{p.AfterItem}
	if p.JobID != 0 {
		where = append(where, "job_id = ?")
		args = append(args, p.JobID)
	}
	if p.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, p.Kind)
	}
	args = append(args, p.Limit)
	rows, err := q.r.QueryContext(ctx, `SELECT item_id, job_id, kind, value, created_at FROM outputs WHERE `+strings.Join(where, " AND ")+` ORDER BY item_id, kind LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list outputs: %w", err)
	}
	defer rows.Close()
	var out []*record.Output
	for rows.Next() {
		var o record.Output
		var v string
		var c int64
		if err := rows.Scan(&o.ItemID, &o.JobID, &o.Kind, &v, &c); err != nil {
			return nil, err
		}
		o.Value, o.CreatedAt = []byte(v), fromMicros(c)
		out = append(out, &o)
	}
	return out, rows.Err()
}

// --- cache

func (q *queries) CacheGet(ctx context.Context, key string) ([]byte, error) {
	var v string
	row := q.rrow // outside a transaction, a reader: a lookup need not wait for the writer
	if q.tx != nil {
		row = q.wrow
	}
	err := row(ctx, `SELECT value FROM cache WHERE key = ?`, key).Scan(&v)
	if err != nil {
		return nil, mapErr(fmt.Errorf("get cache entry: %w", err))
	}
	return []byte(v), nil
}

func (q *queries) CachePut(ctx context.Context, p store.CachePutParams) error {
	key, value, now := p.Key, p.Value, p.Now
	_, err := q.exec(ctx, `INSERT INTO cache (key, value, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, key, string(value), micros(now))
	if err != nil {
		return fmt.Errorf("put cache entry: %w", err)
	}
	return nil
}

func (q *queries) CacheDelete(ctx context.Context, key string) error {
	if _, err := q.exec(ctx, `DELETE FROM cache WHERE key = ?`, key); err != nil {
		return fmt.Errorf("delete cache entry: %w", err)
	}
	return nil
}

// qBlobIsReferenced repeats the predicates of items_blob and items_thumbnail (migration 012).
const qBlobIsReferenced = `SELECT EXISTS (SELECT 1 FROM items WHERE blob_sha256 = ?1 AND blob_sha256 <> '')
	OR EXISTS (SELECT 1 FROM items WHERE thumbnail_sha256 = ?1 AND thumbnail_sha256 <> '')
	OR EXISTS (SELECT 1 FROM cache WHERE instr(value, ?1) > 0)`

func (q *queries) BlobIsReferenced(ctx context.Context, sha string) (bool, error) {
	var n int
	err := q.r.QueryRowContext(ctx, qBlobIsReferenced, sha).Scan(&n)
	return n > 0, mapErr(err)
}

// mergeMetadata merges upd into the item's metadata with [mergeKept], in one transaction.
func (q *queries) mergeMetadata(ctx context.Context, id int64, upd []byte) error {
	merge := func(e store.Executor) error {
		qq := e.(*queries)
		var stored string
		err := qq.wrow(ctx, `SELECT metadata FROM items WHERE id = ?`, id).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return mapErr(err)
		}
		merged, err := mergeKept([]byte(stored), upd)
		if err != nil {
			return err
		}
		_, err = qq.exec(ctx, `UPDATE items SET metadata = ? WHERE id = ?`, string(merged), id)
		return err
	}
	if q.tx != nil {
		return merge(q)
	}
	return q.db.InTx(ctx, merge)
}

// mergeKept returns the JSON object upd with stored's keys laid over it: a key stored holds keeps
// its value (null included) unless both hold objects, which merge the same way.
func mergeKept(stored, upd []byte) ([]byte, error) {
	var s, u map[string]json.RawMessage
	if err := json.Unmarshal(upd, &u); err != nil || u == nil {
		return nil, fmt.Errorf("metadata %.40q is not a JSON object", upd)
	}
	if err := json.Unmarshal(stored, &s); err != nil || s == nil {
		return stored, nil // not an object: nothing to merge into
	}
	for k, sv := range s {
		if uv, ok := u[k]; ok && isObject(sv) && isObject(uv) {
			m, err := mergeKept(sv, uv)
			if err != nil {
				return nil, err
			}
			u[k] = m
			continue
		}
		u[k] = sv
	}
	return json.Marshal(u)
}

func isObject(v json.RawMessage) bool {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// --- set-based variants: one statement for a whole batch, the ids passed as one JSON array so
// the statement text (and its prepared statement) is the same whatever the batch size.

func idArray(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// ItemLockMany reads the items on the writer (SQLite's single writer already serialises
// transactions, as for ItemLock).
func (q *queries) ItemLockMany(ctx context.Context, ids []int64) ([]*record.Item, error) {
	return q.itemsByID(ctx, q.w, itemCols, false, ids)
}

func (q *queries) ItemGetMany(ctx context.Context, ids []int64) ([]*record.Item, error) {
	db := q.r
	if q.tx != nil {
		db = q.w // in a transaction (a lease's), read there: no read transaction of its own
	}
	return q.itemsByID(ctx, db, itemCols+", text", true, ids)
}

// itemsByID reads the items with the ids, in id order, on the writer or the read pool.
func (q *queries) itemsByID(ctx context.Context, db dbtx, cols string, withText bool, ids []int64) ([]*record.Item, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	query := `SELECT ` + cols + ` FROM items WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`
	var rows *sql.Rows
	var err error
	if db == q.w {
		rows, err = q.wquery(ctx, query, idArray(ids))
	} else {
		rows, err = db.QueryContext(ctx, query, idArray(ids))
	}
	if err != nil {
		return nil, fmt.Errorf("get items: %w", err)
	}
	defer rows.Close()
	out := make([]*record.Item, 0, len(ids))
	for rows.Next() {
		it, err := scanItem(rows, withText)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func (q *queries) ItemSetStateMany(ctx context.Context, p store.ItemSetStateManyParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	// ?1 state, ?2 now, ?3 ids, ?4 from, ?5 color all.
	set := `processed_at = ?2`
	if p.To == record.ItemIngested {
		set = `processed_at = CASE WHEN processed_at = 0 THEN ?2 ELSE processed_at END, ingested_at = ?2`
	}
	res, err := q.exec(ctx, `UPDATE items SET state = ?1, `+set+`, colored = CASE WHEN ?5 THEN share ELSE colored END
		WHERE id IN (SELECT value FROM json_each(?3)) AND state = ?4`, p.To, micros(p.Now), idArray(p.IDs), p.From, p.ColorAll)
	if err != nil {
		return 0, fmt.Errorf("set %d items %s: %w", len(p.IDs), p.To, err)
	}
	return res.RowsAffected()
}

func (q *queries) TaskListByItems(ctx context.Context, itemIDs []int64) ([]*record.Task, error) {
	if len(itemIDs) == 0 {
		return nil, nil
	}
	return q.listTasks(ctx, q.w, `SELECT `+taskRecordCols+` FROM tasks WHERE item_id IN (SELECT value FROM json_each(?)) ORDER BY item_id, id`, idArray(itemIDs))
}

// TaskSetStateIfRunningMany finishes distinct tasks with one statement per way of ending (usually one: every
// task complete, at the same attempt), the ids passed as one JSON array: SQLite's per-statement
// work (bind, step, reset) and database/sql's per-call cost, paid once per group instead of once
// per task, were a third of a brief batch's CPU. The attempt is the group's, not a member of each
// entry: (id, attempt) pairs read back with `->>` cost 3.4 µs of the 15 µs of a finished task's
// row. A batch that names a task twice, where each finish must see the one before, goes a
// statement per task.
func (q *queries) TaskSetStateIfRunningMany(ctx context.Context, ps []store.TaskFinishParams) ([]bool, error) {
	oks := make([]bool, len(ps))
	at := make(map[int64]int, len(ps))
	for i, p := range ps {
		at[p.ID] = i
	}
	if len(ps) < 2 || len(at) < len(ps) {
		for i, p := range ps {
			ok, err := q.TaskFinish(ctx, p)
			if err != nil {
				return nil, err
			}
			oks[i] = ok
		}
		return oks, nil
	}
	type key struct {
		state                       record.TaskState
		err, worker                 string
		runAfter, finished, started int64
		refund, attempt             int
		held                        bool
	}
	type group struct {
		key
		ids []byte // [id,…]
	}
	var groups []*group
	byKey := map[key]*group{}
	for _, p := range ps {
		held := q.held(p)
		k := key{state: p.State, err: p.Error, worker: p.Worker, runAfter: micros(p.RunAfter), finished: micros(p.Now), attempt: p.Attempt, held: held}
		if p.Refund {
			k.refund = 1
		}
		if p.State == record.TaskReady {
			k.finished = 0
		}
		if held {
			k.started = micros(p.Started)
		}
		g := byKey[k]
		if g == nil {
			g = &group{key: k, ids: []byte{'['}}
			byKey[k] = g
			groups = append(groups, g)
		} else {
			g.ids = append(g.ids, ',')
		}
		g.ids = strconv.AppendInt(g.ids, p.ID, 10)
	}
	for _, g := range groups {
		// ?1 state, ?2 error, ?3 run_after, ?4 refund, ?5 finished_at, ?6 started_at, ?7 ids,
		// ?8 attempt, ?9 worker. A brief batch's attempt's row is still ready at the attempt before: its
		// finish counts the attempt and writes its start.
		query := `UPDATE tasks SET state = ?1, error = ?2, run_after = ?3, attempt = attempt - ?4, finished_at = ?5, lease_owner = '', lease_expires = 0, last_worker = ?9
			WHERE id IN (SELECT value FROM json_each(?7)) AND attempt = ?8 AND state = 'running'
			RETURNING id`
		if g.held {
			query = `UPDATE tasks SET state = ?1, error = ?2, run_after = ?3, attempt = attempt + 1 - ?4, finished_at = ?5, started_at = ?6, lease_owner = '', lease_expires = 0, last_worker = ?9
			WHERE id IN (SELECT value FROM json_each(?7)) AND attempt = ?8 - 1 AND state = 'ready'
			RETURNING id`
		}
		rows, err := q.wquery(ctx, query, g.state, g.err, g.runAfter, g.refund, g.finished, g.started, string(append(g.ids, ']')), g.attempt, g.worker)
		if err != nil {
			return nil, fmt.Errorf("finish %d tasks: %w", len(ps), mapErr(err))
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("finish %d tasks: %w", len(ps), err)
			}
			oks[at[id]] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("finish %d tasks: %w", len(ps), mapErr(err))
		}
	}
	return oks, nil
}
