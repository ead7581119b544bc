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

func jsonOr(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

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

func scanWorkflow(sc scanner) (*store.Workflow, error) {
	var wf store.Workflow
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
func (q *queries) WorkflowInsert(ctx context.Context, p store.WorkflowInsertParams) (*store.Workflow, error) {
	var wf *store.Workflow
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

func (q *queries) WorkflowGet(ctx context.Context, name string, version int) (*store.Workflow, error) {
	var row pgx.Row
	if version == 0 {
		row = q.c.QueryRow(ctx, qWorkflowGetLatest, name)
	} else {
		row = q.c.QueryRow(ctx, qWorkflowGet, name, version)
	}
	wf, err := scanWorkflow(row)
	if err != nil {
		return nil, fmt.Errorf("get workflow %q v%d: %w", name, version, err)
	}
	return wf, nil
}

func (q *queries) WorkflowList(ctx context.Context) ([]*store.Workflow, error) {
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
	qJobGet          = `SELECT ` + jobCols + ` FROM jobs WHERE id = $1`
	qJobLock         = `SELECT ` + jobCols + ` FROM jobs WHERE id = $1 FOR UPDATE`
	qJobGetByKey     = `SELECT ` + jobCols + ` FROM jobs WHERE key = $1`
	qJobListRunning  = `SELECT ` + jobCols + ` FROM jobs WHERE state = 'running' ORDER BY id`
	qJobSetState     = `UPDATE jobs SET state = $1, error = $2, finished_at = $3 WHERE id = $4 AND state = 'running'`
	qJobReopen       = `UPDATE jobs SET state = 'running', error = '', finished_at = 0 WHERE id = $1 AND state IN ('failed', 'complete')`
	qJobSeal         = `UPDATE jobs SET sealed = true WHERE id = $1 AND NOT sealed`
	qJobAddTotal     = `UPDATE jobs SET total_bytes = total_bytes + $1 WHERE id = $2`
	qJobHasOpenItems = `SELECT EXISTS (SELECT 1 FROM open_items WHERE job_id = $1)`
	qJobTotal        = `SELECT total_bytes FROM jobs WHERE id = $1`
	qJobItemStates   = `SELECT state, count(*), COALESCE(SUM(colored), 0) FROM items WHERE job_id = $1 GROUP BY state`
)

func scanJob(sc scanner) (*store.Job, error) {
	var j store.Job
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
func (q *queries) JobSeal(ctx context.Context, id int64) (bool, error) {
	tag, err := q.c.Exec(ctx, qJobSeal, id)
	if err != nil {
		return false, fmt.Errorf("seal job %d: %w", id, mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

// JobInsert returns an error wrapping [store.ErrConflict] when the key is taken.
func (q *queries) JobInsert(ctx context.Context, p store.JobInsertParams) (*store.Job, error) {
	j, err := scanJob(q.c.QueryRow(ctx, qJobInsert, nullIfEmpty(p.Key), p.WorkflowName, p.WorkflowVersion, jsonOr(p.Metadata), jsonOr(p.Options), micros(p.Now), !p.Open))
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w: job key %q exists", store.ErrConflict, p.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("insert job: %w", err)
	}
	return j, nil
}

func (q *queries) JobGet(ctx context.Context, id int64) (*store.Job, error) {
	j, err := scanJob(q.c.QueryRow(ctx, qJobGet, id))
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// JobLock locks the job's row until the transaction ends (SELECT … FOR UPDATE). Under READ
// COMMITTED each later statement sees what the previous holder committed.
func (q *queries) JobLock(ctx context.Context, id int64) (*store.Job, error) {
	j, err := scanJob(q.c.QueryRow(ctx, qJobLock, id))
	if err != nil {
		return nil, fmt.Errorf("lock job %d: %w", id, err)
	}
	return j, nil
}

func (q *queries) JobGetByKey(ctx context.Context, key string) (*store.Job, error) {
	j, err := scanJob(q.c.QueryRow(ctx, qJobGetByKey, key))
	if err != nil {
		return nil, fmt.Errorf("get job by key: %w", err)
	}
	return j, nil
}

func (q *queries) JobList(ctx context.Context, p store.JobListParams) ([]*store.Job, error) {
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

func (q *queries) JobListRunning(ctx context.Context) ([]*store.Job, error) {
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
	if _, err := q.c.Exec(ctx, qJobAddTotal, bytes, id); err != nil {
		return fmt.Errorf("add to job %d total: %w", id, mapErr(err))
	}
	return nil
}

func (q *queries) JobHasOpenItems(ctx context.Context, id int64) (bool, error) {
	var open bool
	if err := q.c.QueryRow(ctx, qJobHasOpenItems, id).Scan(&open); err != nil {
		return false, fmt.Errorf("job %d open items: %w", id, mapErr(err))
	}
	return open, nil
}

func (q *queries) JobProgress(ctx context.Context, id int64) (*store.JobProgress, error) {
	p := &store.JobProgress{Items: map[string]int{}}
	if err := q.c.QueryRow(ctx, qJobTotal, id).Scan(&p.Total); err != nil {
		return nil, fmt.Errorf("job %d progress: %w", id, mapErr(err))
	}
	rows, err := q.c.Query(ctx, qJobItemStates, id)
	if err != nil {
		return nil, fmt.Errorf("job %d progress: %w", id, mapErr(err))
	}
	var state string
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

// --- items

const (
	itemCols = `id, job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text IS NOT NULL, thumbnail_sha256, thumbnail_type, state, error, n_children, range_lo, range_len, share, colored, created_at`
	// The id is drawn first so a root can be its own root_id in the same statement. A replay
	// burns a sequence value, as any identity insert that conflicts does. A new item is open:
	// it gets its open_items row (003_open_items.up.sql) in the same statement, as every write
	// below that moves an item's state keeps that row in step.
	qItemInsert = `WITH nid AS (SELECT nextval(pg_get_serial_sequence('items', 'id')) AS id),
		ins AS (INSERT INTO items (id, job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text, thumbnail_sha256, thumbnail_type, state, range_lo, range_len, share, created_at)
			SELECT nid.id, $1, $2, CASE WHEN $3::bigint = 0 AND $2::bigint = 0 THEN nid.id ELSE $3::bigint END, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 'written', $17, $18, $18, $19 FROM nid
			ON CONFLICT (job_id, parent_id, step, ordinal) DO NOTHING RETURNING ` + itemCols + `),
		open AS (INSERT INTO open_items (id, job_id, parent_id, state) SELECT id, job_id, parent_id, state FROM ins)
		SELECT * FROM ins`
	qItemByKey        = `SELECT ` + itemCols + ` FROM items WHERE job_id = $1 AND parent_id = $2 AND step = $3 AND ordinal = $4`
	qItemGet          = `SELECT ` + itemCols + `, text FROM items WHERE id = $1`
	qItemLock         = `SELECT ` + itemCols + ` FROM items WHERE id = $1 FOR UPDATE`
	qItemSetProcessed = `WITH u AS (UPDATE items SET state = $1, processed_at = $2, colored = COALESCE($5::float8, colored) WHERE id = $3 AND state = $4 RETURNING id),
		` + openMoved + ` SELECT count(*) FROM u`
	qItemSetIngested = `WITH u AS (UPDATE items SET state = $1, processed_at = CASE WHEN processed_at = 0 THEN $2 ELSE processed_at END, ingested_at = $2, colored = COALESCE($5::float8, colored) WHERE id = $3 AND state = $4 RETURNING id),
		` + openIngested + ` SELECT count(*) FROM u`
	qItemSetColored = `UPDATE items SET colored = COALESCE($5::float8, colored) WHERE id = $3 AND state = $4 AND $1::text IS NOT NULL AND $2::bigint IS NOT NULL`
	qItemAddChild   = `UPDATE items SET n_children = n_children + $3, share = GREATEST(0, share - $1) WHERE id = $2`
	// qItemHasOpenChild repeats open_items_parent's predicate (003_open_items.up.sql) so that
	// the planner can use it with any parameters; qItemHasChildState, for a set of states that
	// includes ingested, and qItemListChildren find the children through items_key, with the
	// parent's job.
	qItemHasOpenChild  = `SELECT EXISTS (SELECT 1 FROM open_items WHERE parent_id = $1 AND parent_id <> 0 AND state = ANY($2))`
	qItemHasChildState = `SELECT EXISTS (SELECT 1 FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = $1) AND parent_id = $1 AND state = ANY($2))`
	qItemListChildren  = `SELECT ` + itemCols + ` FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = $1) AND parent_id = $1 AND step = $2 ORDER BY ordinal`
	// qItemUpdate applies every effect in one statement. The right-hand sides see the row as it
	// was, so the thumbnail type is set exactly when its sha is. Set-once: text (NULL means no
	// change), thumbnail, error; metadata merges with metadata_merge (001_init.up.sql).
	qItemUpdate = `UPDATE items SET
		text = COALESCE(text, $2::text),
		thumbnail_sha256 = CASE WHEN thumbnail_sha256 = '' AND $3::text <> '' THEN $3::text ELSE thumbnail_sha256 END,
		thumbnail_type = CASE WHEN thumbnail_sha256 = '' AND $3::text <> '' THEN $4::text ELSE thumbnail_type END,
		metadata = CASE WHEN $5::jsonb IS NULL THEN metadata ELSE metadata_merge(metadata, $5::jsonb) END,
		content_type = CASE WHEN $6::text <> '' THEN $6::text ELSE content_type END,
		error = CASE WHEN error = '' THEN $7::text ELSE error END,
		colored = CASE WHEN $8::float8 <> 0 THEN LEAST(share, colored + $8::float8 * range_len) ELSE colored END
		WHERE id = $1`
)

func scanItem(sc scanner, withText bool) (*store.Item, error) {
	var it store.Item
	var md, opts []byte
	var created int64
	var text *string
	dest := []any{&it.ID, &it.JobID, &it.ParentID, &it.RootID, &it.Step, &it.Ordinal, &it.Depth, &it.SortKey, &it.Name, &it.ContentType, &it.BlobSHA256, &it.Size, &md, &opts, &it.HasText, &it.ThumbnailSHA, &it.ThumbnailType, &it.State, &it.Error, &it.NChildren, &it.RangeLo, &it.RangeLen, &it.Share, &it.Colored, &created}
	if withText {
		dest = append(dest, &text)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, mapErr(err)
	}
	it.Metadata, it.Options, it.CreatedAt = md, opts, fromMicros(created)
	if text != nil {
		it.Text = *text
	}
	return &it, nil
}

func scanItemNoText(sc scanner) (*store.Item, error) { return scanItem(sc, false) }

func (q *queries) ItemInsert(ctx context.Context, p store.ItemInsertParams) (*store.Item, bool, error) {
	it, err := scanItem(q.c.QueryRow(ctx, qItemInsert, p.JobID, p.ParentID, p.RootID, p.Step, p.Ordinal, p.Depth, p.SortKey, p.Name,
		p.ContentType, p.BlobSHA256, p.Size, jsonOr(p.Metadata), jsonOr(p.Options), p.Text, p.ThumbnailSHA, p.ThumbnailType,
		p.RangeLo, p.RangeLen, micros(p.Now)), false)
	inserted := err == nil
	if errors.Is(err, store.ErrNotFound) {
		it, err = scanItem(q.c.QueryRow(ctx, qItemByKey, p.JobID, p.ParentID, p.Step, p.Ordinal), false)
	}
	if err != nil {
		return nil, false, fmt.Errorf("insert item %q: %w", p.Name, err)
	}
	return it, inserted, nil
}

func (q *queries) ItemGet(ctx context.Context, id int64) (*store.Item, error) {
	it, err := scanItem(q.c.QueryRow(ctx, qItemGet, id), true)
	if err != nil {
		return nil, fmt.Errorf("get item %d: %w", id, err)
	}
	return it, nil
}

// ItemLock locks the item's row until the transaction ends (SELECT … FOR UPDATE), so concurrent
// engines deciding the same item's state take turns.
func (q *queries) ItemLock(ctx context.Context, id int64) (*store.Item, error) {
	it, err := scanItem(q.c.QueryRow(ctx, qItemLock, id), false)
	if err != nil {
		return nil, fmt.Errorf("lock item %d: %w", id, err)
	}
	return it, nil
}

func (q *queries) ItemList(ctx context.Context, p store.ItemListParams) ([]*store.Item, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	var w where
	w.add("job_id = ?", p.JobID)
	if p.ParentID != nil {
		w.add("parent_id = ?", *p.ParentID)
	}
	if len(p.States) > 0 {
		w.add("state = ANY(?)", p.States)
	}
	if p.OnlyErrored {
		w.conds = append(w.conds, "error <> ''")
	}
	if p.AfterSort != "" {
		w.add("sort_key > ?", p.AfterSort)
	}
	cols := itemCols
	if p.WithText {
		cols += ", text"
	}
	rows, err := q.c.Query(ctx, `SELECT `+cols+` FROM items WHERE `+w.String()+` ORDER BY sort_key LIMIT `+w.next(p.Limit), w.args...)
	out, err := collect(rows, err, func(sc scanner) (*store.Item, error) { return scanItem(sc, p.WithText) })
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	return out, nil
}

// openMoved and openIngested keep open_items (003_open_items.up.sql) in step with a statement
// that moves items to the state $1: a CTE u of the moved item ids comes first. The ids are
// read through ARRAY(…) so that the rows are found through the primary key (see qItemGetMany).
const (
	openMoved    = `open AS (UPDATE open_items SET state = $1 WHERE id = ANY (ARRAY(SELECT id FROM u)))`
	openIngested = `open AS (DELETE FROM open_items WHERE id = ANY (ARRAY(SELECT id FROM u)))`
)

func itemSetStateQuery(p store.ItemSetStateParams) string {
	switch {
	case p.To == p.From:
		return qItemSetColored
	case p.To == store.ItemIngested:
		return qItemSetIngested
	}
	return qItemSetProcessed
}

func (q *queries) ItemSetState(ctx context.Context, p store.ItemSetStateParams) (bool, error) {
	query := itemSetStateQuery(p)
	if query == qItemSetColored { // the state stays: open_items too
		tag, err := q.c.Exec(ctx, query, p.To, micros(p.Now), p.ID, p.From, p.Colored)
		if err != nil {
			return false, fmt.Errorf("set item %d state %s: %w", p.ID, p.To, mapErr(err))
		}
		return tag.RowsAffected() > 0, nil
	}
	var n int64
	if err := q.c.QueryRow(ctx, query, p.To, micros(p.Now), p.ID, p.From, p.Colored).Scan(&n); err != nil {
		return false, fmt.Errorf("set item %d state %s: %w", p.ID, p.To, mapErr(err))
	}
	return n > 0, nil
}

// qItemReopen gives a reopened item its open_items row back, or moves it.
const qItemReopen = `WITH u AS (UPDATE items SET state = $1,
		error = CASE WHEN $2 THEN '' ELSE error END,
		processed_at = CASE WHEN $1 = 'written' THEN 0 ELSE processed_at END,
		colored = CASE WHEN $1 = 'written' THEN 0 ELSE colored END,
		ingested_at = 0
	WHERE id = $3 AND state = ANY($4) RETURNING id, job_id, parent_id),
	open AS (INSERT INTO open_items (id, job_id, parent_id, state) SELECT id, job_id, parent_id, $1 FROM u
		ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state)
	SELECT count(*) FROM u`

func (q *queries) ItemReopen(ctx context.Context, p store.ItemReopenParams) (bool, error) {
	var from []string
	switch p.To {
	case store.ItemWritten:
		from = []string{store.ItemWritten, store.ItemProcessed, store.ItemIngested}
	case store.ItemProcessed:
		from = []string{store.ItemProcessed, store.ItemIngested}
	default:
		return false, fmt.Errorf("reopen item %d to %q: only written or processed", p.ID, p.To)
	}
	var n int64
	if err := q.c.QueryRow(ctx, qItemReopen, p.To, p.ClearError, p.ID, from).Scan(&n); err != nil {
		return false, fmt.Errorf("reopen item %d to %s: %w", p.ID, p.To, mapErr(err))
	}
	return n > 0, nil
}

func (q *queries) ItemUpdate(ctx context.Context, p store.ItemUpdateParams) error {
	var md any
	if len(p.Metadata) > 0 {
		md = string(p.Metadata)
	}
	if _, err := q.c.Exec(ctx, qItemUpdate, p.ID, p.Text, p.ThumbnailSHA, p.ThumbnailType, md, p.ContentType, p.Error, p.AddColored); err != nil {
		return fmt.Errorf("update item %d: %w", p.ID, mapErr(err))
	}
	return nil
}

func (q *queries) ItemAddChild(ctx context.Context, parentID int64, n int, length float64) error {
	if _, err := q.c.Exec(ctx, qItemAddChild, length, parentID, n); err != nil {
		return fmt.Errorf("count child of %d: %w", parentID, mapErr(err))
	}
	return nil
}

func (q *queries) ItemHasChildInState(ctx context.Context, parentID int64, states []string) (bool, error) {
	query := qItemHasOpenChild
	if slices.Contains(states, store.ItemIngested) {
		query = qItemHasChildState
	}
	var has bool
	if err := q.c.QueryRow(ctx, query, parentID, states).Scan(&has); err != nil {
		return false, fmt.Errorf("children of %d: %w", parentID, mapErr(err))
	}
	return has, nil
}

func (q *queries) ItemListChildren(ctx context.Context, parentID int64, step string) ([]*store.Item, error) {
	rows, err := q.c.Query(ctx, qItemListChildren, parentID, step)
	out, err := collect(rows, err, scanItemNoText)
	if err != nil {
		return nil, fmt.Errorf("list children of %d: %w", parentID, err)
	}
	return out, nil
}

// --- events

const (
	qEventInsert = `INSERT INTO events (item_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	qEventList   = `SELECT name FROM events WHERE item_id = $1 ORDER BY created_at, name`
)

func (q *queries) EventInsert(ctx context.Context, itemID int64, name string, now time.Time) (bool, error) {
	tag, err := q.c.Exec(ctx, qEventInsert, itemID, name, micros(now))
	if err != nil {
		return false, fmt.Errorf("insert event %q on item %d: %w", name, itemID, mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
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

// --- tasks

const (
	taskCols    = `id, job_id, item_id, step, action, queue, state, attempt, max_attempts, run_after, lease_owner, lease_expires, error, sort_key, progress_weight, created_at, started_at, finished_at`
	qTaskInsert = `INSERT INTO tasks (job_id, item_id, step, action, queue, state, attempt, error, max_attempts, sort_key, progress_weight, created_at, run_after, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 0, $13, $13) ON CONFLICT (item_id, step) DO NOTHING`
	qTaskGet = `SELECT ` + taskCols + ` FROM tasks WHERE id = $1`
	// qTaskLease picks in a materialised CTE so the locked set is computed exactly once (an IN
	// (subquery) may be planned as a join that rescans it); SKIP LOCKED lets racing leasers take
	// disjoint sets without waiting on each other.
	qTaskLease = `WITH picked AS MATERIALIZED (
			SELECT id AS picked_id FROM tasks WHERE state = 'ready' AND queue = $1 AND run_after <= $2
			ORDER BY job_id, sort_key LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE tasks SET state = 'running', attempt = attempt + 1, lease_owner = $4, lease_expires = $5, started_at = $2
		FROM picked WHERE id = picked_id RETURNING ` + taskCols
	// qTaskLeaseMany is qTaskLease for several queues in one statement: a lateral pick per
	// (queue, limit) pair, so a worker serving many queues leases in one round trip. The update
	// takes the picked ids as an array: joining the CTE instead lets the generic plan (after five
	// executions of the prepared statement) hash-join against a sequential scan of tasks.
	qTaskLeaseMany = `WITH picked AS MATERIALIZED (
			SELECT p.id AS picked_id FROM unnest($1::text[], $3::int[]) AS w(queue, lim)
			CROSS JOIN LATERAL (SELECT id FROM tasks WHERE state = 'ready' AND queue = w.queue AND run_after <= $2
				ORDER BY job_id, sort_key LIMIT w.lim FOR UPDATE SKIP LOCKED) p)
		UPDATE tasks SET state = 'running', attempt = attempt + 1, lease_owner = $4, lease_expires = $5, started_at = $2
		WHERE id = ANY (ARRAY(SELECT picked_id FROM picked)) RETURNING ` + taskCols
	// qTaskHoldMany picks as qTaskLeaseMany does and only locks the rows: a held lease.
	qTaskHoldMany = `SELECT p.* FROM unnest($1::text[], $3::int[]) AS w(wq, lim)
		CROSS JOIN LATERAL (SELECT ` + taskCols + ` FROM tasks WHERE state = 'ready' AND queue = w.wq AND run_after <= $2
			ORDER BY job_id, sort_key LIMIT w.lim FOR UPDATE SKIP LOCKED) p`
	// qHeldLeaseRecord commits asynchronously (synchronous_commit off for its own transaction):
	// it is visible at once, and on disk within Postgres's WAL writer delay or with the next
	// commit. It is there for a process that dies; if the database dies before flushing it, the
	// holding transaction died too, and an attempt lost to a database crash says nothing about
	// the input. The batch does not wait for a disk flush before it runs.
	qHeldLeaseRecord = `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		INSERT INTO held_leases (owner, started, expires, task_ids, attempts) SELECT $1, $2, $3, $4, $5 FROM async RETURNING id`
	qHeldLeaseDelete = `DELETE FROM held_leases WHERE id = $1`
	qHeldLeaseRenew  = `UPDATE held_leases SET expires = $1 WHERE id = ANY($3) AND owner = $2`
	// qHeldLeaseExpire turns an expired record's tasks that are still ready at the attempt
	// before into running tasks with an expired lease (lease_expires 0).
	qHeldLeaseExpire = `WITH gone AS (DELETE FROM held_leases WHERE expires < $1 RETURNING owner, started, task_ids, attempts),
		u AS (SELECT g.owner, g.started, x.id, x.attempt FROM gone g CROSS JOIN LATERAL unnest(g.task_ids, g.attempts) AS x(id, attempt))
		UPDATE tasks SET state = 'running', attempt = tasks.attempt + 1, lease_owner = u.owner, lease_expires = 0, started_at = u.started
		FROM u WHERE tasks.id = u.id AND tasks.attempt = u.attempt - 1 AND tasks.state || '' = 'ready'`
	qTaskFinish = `UPDATE tasks SET state = $1, error = $2, run_after = $3, attempt = attempt - $4, finished_at = $5, lease_owner = '', lease_expires = 0
		WHERE id = $6 AND state = 'running' AND attempt = $7 RETURNING queue`
	// qTaskRenew skips the rows another transaction holds: those are this process's tasks being
	// finished or released by its committer, whose locks it would otherwise wait for (and, with
	// a batch that finishes tasks in two statements, could deadlock with). A row skipped because
	// its transaction rolled back is renewed on the next round, a third of a lease later.
	qTaskRenew = `UPDATE tasks SET lease_expires = $1 WHERE id IN (
		SELECT id FROM tasks WHERE id = ANY($3) AND state = 'running' AND lease_owner = $2 FOR UPDATE SKIP LOCKED)`
	qTaskListExpired = `SELECT ` + taskCols + ` FROM tasks WHERE state = 'running' AND lease_expires < $1 ORDER BY lease_expires LIMIT $2`
	qTaskListByItem  = `SELECT ` + taskCols + ` FROM tasks WHERE item_id = $1 ORDER BY id`
	// qTaskCancelReady checks the state again as it updates (a task may have been leased since
	// the subquery read it), written state || '' so that the planner does not read a partial
	// index of every ready task to intersect it with the ids (see qTaskFinishMany).
	qTaskCancelReady = `UPDATE tasks SET state = 'canceled', error = $1, finished_at = $2
		WHERE id = ANY (ARRAY(SELECT id FROM ` + jobTasks3 + ` WHERE jt.state IN ('ready', 'parked'))) AND state || '' IN ('ready', 'parked')`
	qTaskListRunning = `SELECT id FROM tasks WHERE job_id = $1 AND state = 'running' ORDER BY id`
	qTaskRetry       = `UPDATE tasks SET state = 'ready', max_attempts = $1, error = '', run_after = $2, finished_at = 0, lease_owner = '', lease_expires = 0
		WHERE id = $3 AND state IN ('failed', 'canceled') RETURNING queue`
	qTaskNextRunAfter = `SELECT COALESCE(MIN(run_after), 0) FROM tasks WHERE state = 'ready'`
	qTaskCounts       = `SELECT state, action, queue, count(*), COALESCE(sum(GREATEST(attempt - 1, 0)), 0) FROM ` + jobTasks1 + ` GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`
)

// jobTasks1 and jobTasks3 are the tasks of the job $1 or $3 as a subquery jt, found through the
// job's items (items_key) and each item's tasks (tasks_item_step): there is no index of tasks by
// job (004_drop_tasks_job.up.sql). OFFSET 0 keeps conditions on jt out of the per-item lookup,
// where a condition on the state could lead the planner to a partial index of ready or running
// tasks, read whole for every item.
const (
	jobTasks1 = `(SELECT t.* FROM items i CROSS JOIN LATERAL (SELECT * FROM tasks WHERE tasks.item_id = i.id OFFSET 0) t WHERE i.job_id = $1) jt`
	jobTasks3 = `(SELECT t.* FROM items i CROSS JOIN LATERAL (SELECT * FROM tasks WHERE tasks.item_id = i.id OFFSET 0) t WHERE i.job_id = $3) jt`
)

func scanTask(sc scanner) (*store.Task, error) {
	var t store.Task
	var runAfter, lease, created, started, finished int64
	if err := sc.Scan(&t.ID, &t.JobID, &t.ItemID, &t.Step, &t.Action, &t.Queue, &t.State, &t.Attempt, &t.MaxAttempts, &runAfter, &t.LeaseOwner, &lease, &t.Error, &t.SortKey, &t.ProgressWeight, &created, &started, &finished); err != nil {
		return nil, mapErr(err)
	}
	t.RunAfter, t.LeaseExpires, t.CreatedAt, t.StartedAt, t.FinishedAt = fromMicros(runAfter), fromMicros(lease), fromMicros(created), fromMicros(started), fromMicros(finished)
	return &t, nil
}

// TaskInsert announces the new task on the schema's channel (at commit inside a transaction).
func (q *queries) TaskInsert(ctx context.Context, p store.TaskInsertParams) (bool, error) {
	state, attempt, errMsg, ended := store.TaskReady, 0, "", int64(0)
	if p.Done != nil {
		state, attempt, errMsg, ended = p.Done.State, p.Done.Attempt(), p.Done.Error, micros(p.Now)
	}
	tag, err := q.c.Exec(ctx, qTaskInsert, p.JobID, p.ItemID, p.Step, p.Action, p.Queue, state, attempt, errMsg, p.MaxAttempts, p.SortKey, p.ProgressWeight, micros(p.Now), ended)
	if err != nil {
		return false, fmt.Errorf("insert task %q of item %d: %w", p.Step, p.ItemID, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if p.Done != nil {
		return true, nil // nothing to wake
	}
	if err := q.ready(ctx, p.Queue); err != nil {
		return false, fmt.Errorf("insert task %q of item %d: notify: %w", p.Step, p.ItemID, mapErr(err))
	}
	return true, nil
}

func (q *queries) TaskGet(ctx context.Context, id int64) (*store.Task, error) {
	t, err := scanTask(q.c.QueryRow(ctx, qTaskGet, id))
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	return t, nil
}

func (q *queries) TaskLease(ctx context.Context, p store.TaskLeaseParams) ([]*store.Task, error) {
	now := micros(p.Now)
	rows, err := q.c.Query(ctx, qTaskLease, p.Queue, now, p.Limit, p.Owner, micros(p.LeaseUntil))
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("lease %q: %w", p.Queue, err)
	}
	// RETURNING has no order.
	slices.SortFunc(out, func(a, b *store.Task) int {
		if a.JobID != b.JobID {
			return cmpInt(a.JobID, b.JobID)
		}
		return strings.Compare(a.SortKey, b.SortKey)
	})
	return out, nil
}

func (q *queries) TaskLeaseMany(ctx context.Context, p store.TaskLeaseManyParams) ([]*store.Task, error) {
	if len(p.Queues) == 0 {
		return nil, nil
	}
	if len(p.Queues) == 1 {
		return q.TaskLease(ctx, store.TaskLeaseParams{Queue: p.Queues[0], Limit: p.Limits[0], Owner: p.Owner, Now: p.Now, LeaseUntil: p.LeaseUntil})
	}
	limits := make([]int32, len(p.Limits))
	for i, l := range p.Limits {
		limits[i] = int32(max(l, 0))
	}
	now := micros(p.Now)
	rows, err := q.c.Query(ctx, qTaskLeaseMany, p.Queues, now, limits, p.Owner, micros(p.LeaseUntil))
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("lease %d queues: %w", len(p.Queues), err)
	}
	// RETURNING has no order: the queues in the order given, each in lease order.
	rank := make(map[string]int, len(p.Queues))
	for i, queue := range p.Queues {
		if _, ok := rank[queue]; !ok {
			rank[queue] = i
		}
	}
	slices.SortFunc(out, func(a, b *store.Task) int {
		if a.Queue != b.Queue {
			return rank[a.Queue] - rank[b.Queue]
		}
		if a.JobID != b.JobID {
			return cmpInt(a.JobID, b.JobID)
		}
		return strings.Compare(a.SortKey, b.SortKey)
	})
	return out, nil
}

// TaskHoldMany locks ready tasks for a held lease and returns them as leased, in pick order.
func (q *queries) TaskHoldMany(ctx context.Context, p store.TaskLeaseManyParams) ([]*store.Task, error) {
	if len(p.Queues) == 0 {
		return nil, nil
	}
	limits := make([]int32, len(p.Limits))
	for i, l := range p.Limits {
		limits[i] = int32(max(l, 0))
	}
	rows, err := q.c.Query(ctx, qTaskHoldMany, p.Queues, micros(p.Now), limits)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("hold tasks of %d queues: %w", len(p.Queues), err)
	}
	for _, t := range out {
		t.State, t.Attempt, t.LeaseOwner, t.LeaseExpires, t.StartedAt, t.Held = store.TaskRunning, t.Attempt+1, p.Owner, p.LeaseUntil, p.Now, true
	}
	return out, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// taskFinishArgs are qTaskFinish's arguments; taskFinishSet builds qTaskFinishMany's alike.
func taskFinishArgs(p store.TaskFinishParams) []any {
	refund := 0
	if p.Refund {
		refund = 1
	}
	finished := micros(p.Now)
	if p.State == store.TaskReady {
		finished = 0
	}
	return []any{p.State, p.Error, micros(p.RunAfter), refund, finished, p.ID, p.Attempt}
}

// TaskFinish announces a task put back to ready on the schema's channel.
func (q *queries) TaskFinish(ctx context.Context, p store.TaskFinishParams) (bool, error) {
	if p.Held {
		oks, err := q.taskFinishSet(ctx, []store.TaskFinishParams{p}, map[int64]int{p.ID: 0})
		if err != nil {
			return false, err
		}
		return oks[0], nil
	}
	var queue string
	err := q.c.QueryRow(ctx, qTaskFinish, taskFinishArgs(p)...).Scan(&queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", p.ID, mapErr(err))
	}
	if p.State == store.TaskReady {
		if err := q.ready(ctx, queue); err != nil {
			return false, fmt.Errorf("finish task %d: notify: %w", p.ID, mapErr(err))
		}
	}
	return true, nil
}

func (q *queries) TaskRenewLeases(ctx context.Context, p store.TaskRenewLeasesParams) (int64, error) {
	var n int64
	if len(p.TaskIDs) > 0 {
		tag, err := q.c.Exec(ctx, qTaskRenew, micros(p.Until), p.Owner, p.TaskIDs)
		if err != nil {
			return 0, fmt.Errorf("renew leases of %s: %w", p.Owner, mapErr(err))
		}
		n = tag.RowsAffected()
	}
	if len(p.HeldLeaseIDs) > 0 {
		if _, err := q.c.Exec(ctx, qHeldLeaseRenew, micros(p.Until), p.Owner, p.HeldLeaseIDs); err != nil {
			return 0, fmt.Errorf("renew held leases of %s: %w", p.Owner, mapErr(err))
		}
	}
	return n, nil
}

func (q *queries) HeldLeaseRecord(ctx context.Context, p store.HeldLeaseParams) (int64, error) {
	attempts := make([]int32, len(p.Attempts))
	for i, a := range p.Attempts {
		attempts[i] = int32(a)
	}
	var id int64
	err := q.c.QueryRow(ctx, qHeldLeaseRecord, p.Owner, micros(p.Started), micros(p.Until), p.TaskIDs, attempts).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record held lease of %d tasks: %w", len(p.TaskIDs), mapErr(err))
	}
	return id, nil
}

func (q *queries) HeldLeaseDelete(ctx context.Context, id int64) error {
	if _, err := q.c.Exec(ctx, qHeldLeaseDelete, id); err != nil {
		return fmt.Errorf("delete held lease %d: %w", id, mapErr(err))
	}
	return nil
}

func (q *queries) HeldLeaseExpire(ctx context.Context, now time.Time) (int64, error) {
	tag, err := q.c.Exec(ctx, qHeldLeaseExpire, micros(now))
	if err != nil {
		return 0, fmt.Errorf("expire held leases: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}

func (q *queries) TaskListExpired(ctx context.Context, now time.Time, limit int) ([]*store.Task, error) {
	rows, err := q.c.Query(ctx, qTaskListExpired, micros(now), limit)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list expired tasks: %w", err)
	}
	return out, nil
}

func (q *queries) TaskListByItem(ctx context.Context, itemID int64) ([]*store.Task, error) {
	rows, err := q.c.Query(ctx, qTaskListByItem, itemID)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks of item %d: %w", itemID, err)
	}
	return out, nil
}

func (q *queries) TaskListByJob(ctx context.Context, p store.TaskListParams) ([]*store.Task, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	var w where
	w.args = []any{p.JobID} // $1 of jobTasks1
	w.add("id > ?", p.AfterID)
	if p.State != "" {
		w.add("state = ?", p.State)
	}
	rows, err := q.c.Query(ctx, `SELECT `+taskCols+` FROM `+jobTasks1+` WHERE `+w.String()+` ORDER BY id LIMIT `+w.next(p.Limit), w.args...)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks of job %d: %w", p.JobID, err)
	}
	return out, nil
}

func (q *queries) TaskCancelJob(ctx context.Context, jobID int64, reason string, now time.Time) ([]int64, error) {
	if _, err := q.c.Exec(ctx, qTaskCancelReady, reason, micros(now), jobID); err != nil {
		return nil, fmt.Errorf("cancel tasks of job %d: %w", jobID, mapErr(err))
	}
	rows, err := q.c.Query(ctx, qTaskListRunning, jobID)
	ids, err := collect(rows, err, func(sc scanner) (int64, error) {
		var id int64
		return id, sc.Scan(&id)
	})
	if err != nil {
		return nil, fmt.Errorf("cancel tasks of job %d: %w", jobID, err)
	}
	return ids, nil
}

// TaskRetry announces the task's queue on the schema's channel (at commit inside a transaction).
func (q *queries) TaskRetry(ctx context.Context, p store.TaskRetryParams) (bool, error) {
	var queue string
	err := q.c.QueryRow(ctx, qTaskRetry, p.MaxAttempts, micros(p.Now), p.ID).Scan(&queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("retry task %d: %w", p.ID, mapErr(err))
	}
	if err := q.ready(ctx, queue); err != nil {
		return false, fmt.Errorf("retry task %d: notify: %w", p.ID, mapErr(err))
	}
	return true, nil
}

func (q *queries) TaskNextRunAfter(ctx context.Context) (time.Time, error) {
	var v int64
	if err := q.c.QueryRow(ctx, qTaskNextRunAfter).Scan(&v); err != nil {
		return time.Time{}, fmt.Errorf("next run_after: %w", mapErr(err))
	}
	return fromMicros(v), nil
}

func (q *queries) TaskCounts(ctx context.Context, jobID int64) ([]store.TaskCount, error) {
	rows, err := q.c.Query(ctx, qTaskCounts, jobID)
	out, err := collect(rows, err, func(sc scanner) (store.TaskCount, error) {
		var c store.TaskCount
		return c, sc.Scan(&c.State, &c.Action, &c.Queue, &c.Tasks, &c.Retries)
	})
	if err != nil {
		return nil, fmt.Errorf("count tasks of job %d: %w", jobID, err)
	}
	return out, nil
}

// --- attempts

const (
	qAttemptInsert = `INSERT INTO attempts (task_id, attempt, owner, started_at, finished_at, error, stack) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`
	qAttemptList   = `SELECT task_id, attempt, owner, started_at, finished_at, error, stack FROM attempts WHERE task_id = $1 ORDER BY attempt`
)

func (q *queries) AttemptInsert(ctx context.Context, p store.AttemptInsertParams) error {
	if _, err := q.c.Exec(ctx, qAttemptInsert, p.TaskID, p.Attempt, p.Owner, micros(p.StartedAt), micros(p.FinishedAt), p.Error, p.Stack); err != nil {
		return fmt.Errorf("insert attempt %d of task %d: %w", p.Attempt, p.TaskID, mapErr(err))
	}
	return nil
}

func (q *queries) AttemptList(ctx context.Context, taskID int64) ([]*store.Attempt, error) {
	rows, err := q.c.Query(ctx, qAttemptList, taskID)
	out, err := collect(rows, err, func(sc scanner) (*store.Attempt, error) {
		var a store.Attempt
		var s, f int64
		if err := sc.Scan(&a.TaskID, &a.Attempt, &a.Owner, &s, &f, &a.Error, &a.Stack); err != nil {
			return nil, err
		}
		a.StartedAt, a.FinishedAt = fromMicros(s), fromMicros(f)
		return &a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list attempts of task %d: %w", taskID, err)
	}
	return out, nil
}

// --- outputs

const qOutputPut = `INSERT INTO outputs (item_id, job_id, kind, value, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`

func (q *queries) OutputDelete(ctx context.Context, p store.OutputDeleteParams) error {
	if _, err := q.c.Exec(ctx, `DELETE FROM outputs WHERE item_id = $1 AND kind = $2`, p.ItemID, p.Kind); err != nil {
		return fmt.Errorf("delete output %q of item %d: %w", p.Kind, p.ItemID, err)
	}
	return nil
}

func (q *queries) OutputPut(ctx context.Context, p store.OutputPutParams) error {
	if p.Kind == store.OutputDocument {
		return q.outputPutDocument(ctx, p)
	}
	if _, err := q.c.Exec(ctx, qOutputPut, p.ItemID, p.JobID, p.Kind, nonNil(p.Value), micros(p.Now)); err != nil {
		return fmt.Errorf("put output %q of item %d: %w", p.Kind, p.ItemID, mapErr(err))
	}
	return nil
}

func (q *queries) OutputList(ctx context.Context, p store.OutputListParams) ([]*store.Output, error) {
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
	out, err := collect(rows, err, func(sc scanner) (*store.Output, error) {
		var o store.Output
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

func (q *queries) CachePut(ctx context.Context, key string, value []byte, now time.Time) error {
	if _, err := q.c.Exec(ctx, qCachePut, key, nonNil(value), micros(now)); err != nil {
		return fmt.Errorf("put cache entry: %w", mapErr(err))
	}
	return nil
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
