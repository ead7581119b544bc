package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// The queries of items (queries.go holds the rest).

const (
	// itemInsertCols are the columns an insert writes: those of itemCols the database does not
	// fill itself (error, n_children and colored start at their defaults), text whole.
	itemInsertCols = `id, job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text, thumbnail_sha256, thumbnail_type, state, range_lo, range_len, share, created_at`
	itemCols       = `id, job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text IS NOT NULL, thumbnail_sha256, thumbnail_type, state, error, n_children, range_lo, range_len, share, colored, created_at`
	// The id is drawn first so a root can be its own root_id in the same statement. A replay
	// burns a sequence value, as any identity insert that conflicts does. The sequence is named
	// once per statement (an InitPlan), not per row: pg_get_serial_sequence looks it up by name,
	// which cost a fan-out's multi-row insert (qItemInsertMany) a quarter of its CPU per row.
	// A new item is open:
	// it gets its open_items row (003_open_items.up.sql) in the same statement, as every write
	// below that moves an item's state keeps that row in step.
	qItemInsert = `WITH nid AS (SELECT nextval((SELECT pg_get_serial_sequence('items', 'id')::regclass)) AS id),
		ins AS (INSERT INTO items (` + itemInsertCols + `)
			SELECT nid.id, $1, $2, CASE WHEN $3::bigint = 0 AND $2::bigint = 0 THEN nid.id ELSE $3::bigint END, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 'written', $17, $18, $18, $19 FROM nid
			ON CONFLICT (job_id, parent_id, step, ordinal) DO NOTHING RETURNING ` + itemCols + `),
		open AS (INSERT INTO open_items (id, job_id, parent_id, state) SELECT id, job_id, parent_id, state FROM ins)
		SELECT * FROM ins`
	qItemByKey    = `SELECT ` + itemCols + ` FROM items WHERE job_id = $1 AND parent_id = $2 AND step = $3 AND ordinal = $4`
	qItemGet      = `SELECT ` + itemCols + `, text FROM items WHERE id = $1`
	qItemLock     = `SELECT ` + itemCols + ` FROM items WHERE id = $1 FOR UPDATE`
	qItemAddChild = `UPDATE items SET n_children = n_children + $3, share = GREATEST(0, share - $1) WHERE id = $2`
	// qItemHasOpenChild repeats open_items_parent's predicate (003_open_items.up.sql) so that
	// the planner can use it with any parameters; qItemHasChildState, for a set of states that
	// includes ingested, and qItemListChildren find the children through items_key, with the
	// parent's job.
	qItemHasOpenChild     = `SELECT EXISTS (SELECT 1 FROM open_items WHERE parent_id = $1 AND parent_id <> 0 AND state = ANY($2))`
	qItemHasChildState    = `SELECT EXISTS (SELECT 1 FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = $1) AND parent_id = $1 AND state = ANY($2))`
	qItemListChildren     = `SELECT ` + itemCols + ` FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = $1) AND parent_id = $1 AND step = $2 ORDER BY ordinal`
	qItemListChildrenFrom = `SELECT ` + itemCols + ` FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = $1) AND parent_id = $1 AND step = $2 AND ordinal >= $3 ORDER BY ordinal LIMIT $4`
	// qItemUpdate applies every effect in one statement. The right-hand sides see the row as it
	// was, so the thumbnail type is set exactly when its sha is. Set-once: text (NULL means no
	// change), thumbnail, error (unless replaced); metadata merges with metadata_merge (001_init.up.sql).
	qItemUpdate = `UPDATE items SET
		text = COALESCE(text, $2::text),
		thumbnail_sha256 = CASE WHEN thumbnail_sha256 = '' AND $3::text <> '' THEN $3::text ELSE thumbnail_sha256 END,
		thumbnail_type = CASE WHEN thumbnail_sha256 = '' AND $3::text <> '' THEN $4::text ELSE thumbnail_type END,
		metadata = CASE WHEN $5::jsonb IS NULL THEN metadata ELSE metadata_merge(metadata, $5::jsonb) END,
		content_type = CASE WHEN $6::text <> '' THEN $6::text ELSE content_type END,
		error = CASE WHEN error = '' OR $9::boolean THEN $7::text ELSE error END,
		colored = CASE WHEN $8::float8 <> 0 THEN LEAST(share, colored + $8::float8 * range_len) ELSE colored END
		WHERE id = $1`
)

func scanItem(sc scanner, withText bool) (*record.Item, error) {
	var it record.Item
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

func scanItemNoText(sc scanner) (*record.Item, error) { return scanItem(sc, false) }

func (q *queries) ItemInsert(ctx context.Context, p store.ItemInsertParams) (*record.Item, bool, error) {
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
	if inserted {
		q.addFresh(it.ID)
	}
	return it, inserted, nil
}

func (q *queries) ItemGet(ctx context.Context, id int64) (*record.Item, error) {
	it, err := scanItem(q.c.QueryRow(ctx, qItemGet, id), true)
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get item %d: %w", id, err), "item", id)
	}
	return it, nil
}

// ItemLock locks the item's row until the transaction ends (SELECT … FOR UPDATE), so concurrent
// engines deciding the same item's state take turns.
func (q *queries) ItemLock(ctx context.Context, id int64) (*record.Item, error) {
	it, err := scanItem(q.c.QueryRow(ctx, qItemLock, id), false)
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("lock item %d: %w", id, err), "item", id)
	}
	return it, nil
}

func (q *queries) ItemList(ctx context.Context, p store.ItemListParams) ([]*record.Item, error) {
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
	out, err := collect(rows, err, func(sc scanner) (*record.Item, error) { return scanItem(sc, p.WithText) })
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
	var from []record.ItemState
	switch p.To {
	case record.ItemWritten:
		from = []record.ItemState{record.ItemWritten, record.ItemProcessed, record.ItemIngested}
	case record.ItemProcessed:
		from = []record.ItemState{record.ItemProcessed, record.ItemIngested}
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
	var text *string // a copy: the write goes out after this returns
	if p.Text != nil {
		t := *p.Text
		text = &t
	}
	return q.execLater(ctx, fmt.Sprintf("update item %d", p.ID), qItemUpdate, p.ID, text, p.ThumbnailSHA, p.ThumbnailType, md, p.ContentType, p.Error, p.AddColored, p.ReplaceError)
}

func (q *queries) ItemAddChild(ctx context.Context, p store.ItemAddChildParams) error {
	parentID, n, length := p.ParentID, p.N, p.Length
	return q.execLater(ctx, fmt.Sprintf("count child of %d", parentID), qItemAddChild, length, parentID, n)
}

// qItemCountBacklog counts through open_items_job (003_open_items.up.sql), which holds only
// items not yet ingested, reading each one's depth from items by its key; the LIMIT inside stops
// the count at the bound.
const qItemCountBacklog = `SELECT count(*) FROM (SELECT 1 FROM open_items o JOIN items i ON i.id = o.id
	WHERE o.job_id = $1 AND o.state IN ('created', 'written') AND i.depth > $2 LIMIT $3) b`

func (q *queries) ItemCountBacklog(ctx context.Context, p store.ItemCountBacklogParams) (int, error) {
	var n int
	if err := q.c.QueryRow(ctx, qItemCountBacklog, p.JobID, p.Depth, p.Limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("backlog of job %d: %w", p.JobID, mapErr(err))
	}
	return n, nil
}

func (q *queries) ItemHasChildInState(ctx context.Context, parentID int64, states []record.ItemState) (bool, error) {
	query := qItemHasOpenChild
	if slices.Contains(states, record.ItemIngested) {
		query = qItemHasChildState
	}
	var has bool
	if err := q.c.QueryRow(ctx, query, parentID, states).Scan(&has); err != nil {
		return false, fmt.Errorf("children of %d: %w", parentID, mapErr(err))
	}
	return has, nil
}

func (q *queries) ItemListChildrenFrom(ctx context.Context, parentID int64, step string, from, limit int) ([]*record.Item, error) {
	rows, err := q.c.Query(ctx, qItemListChildrenFrom, parentID, step, from, limit)
	out, err := collect(rows, err, scanItemNoText)
	if err != nil {
		return nil, fmt.Errorf("list children of %d: %w", parentID, err)
	}
	return out, nil
}

func (q *queries) ItemListChildren(ctx context.Context, parentID int64, step string) ([]*record.Item, error) {
	rows, err := q.c.Query(ctx, qItemListChildren, parentID, step)
	out, err := collect(rows, err, scanItemNoText)
	if err != nil {
		return nil, fmt.Errorf("list children of %d: %w", parentID, err)
	}
	return out, nil
}

// qItemInsertMany is qItemInsert (above) for many rows: each draws its id first so that a
// root is its own root_id (from the sequence named once, see qItemInsert), and every new item
// gets its open_items row in the same statement. It returns the key and id of each row it
// inserted, not the row: the rest is the parameters, as written (itemFromParams). Returning the
// whole row (25 columns, jsonb included) cost the server its output and the driver its scan,
// for values it had sent.
const qItemInsertMany = `WITH r AS (SELECT nextval((SELECT pg_get_serial_sequence('items', 'id')::regclass)) AS id, r.*
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::int[], $6::int[], $7::text[], $8::text[], $9::text[], $10::text[],
			$11::bigint[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::float8[], $18::float8[], $19::bigint[])
			AS r(j, p, rt, s, o, d, k, n, ct, b, sz, md, op, tx, ts, tt, lo, len, c)),
	` + qItemInsertRows + `
	SELECT id, job_id, parent_id, step, ordinal FROM ins ORDER BY id`

// qItemInsertRows inserts the rows of r (id first, then the columns qItemInsertMany unnests) that
// are not there yet, with their open_items rows, as ins.
const qItemInsertRows = `ins AS (INSERT INTO items (` + itemInsertCols + `)
		SELECT id, j, p, CASE WHEN rt = 0 AND p = 0 THEN id ELSE rt END, s, o, d, k, n, ct, b, sz, md::jsonb, op::jsonb, tx, ts, tt, 'written', lo, len, len, c FROM r
		ON CONFLICT (job_id, parent_id, step, ordinal) DO NOTHING RETURNING id, job_id, parent_id, step, ordinal, state),
	open AS (INSERT INTO open_items (id, job_id, parent_id, state) SELECT id, job_id, parent_id, state FROM ins)`

// itemKey is an item's unique key (items_key).
type itemKey struct {
	job, parent int64
	step        string
	ordinal     int
}

// insertedItems reads qItemInsertMany's rows (the items it inserted, in id order) and returns
// them built from their parameters.
func insertedItems(rows pgx.Rows, err error, ps []store.ItemInsertParams) ([]*record.Item, error) {
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	at := make(map[itemKey]int, len(ps))
	for i, p := range ps {
		k := itemKey{p.JobID, p.ParentID, p.Step, p.Ordinal}
		if _, dup := at[k]; !dup { // a key twice: the first row goes in
			at[k] = i
		}
	}
	var out []*record.Item
	var id int64
	var k itemKey
	var ord int32
	for rows.Next() {
		if err := rows.Scan(&id, &k.job, &k.parent, &k.step, &ord); err != nil {
			return nil, mapErr(err)
		}
		k.ordinal = int(ord)
		i, ok := at[k]
		if !ok {
			return nil, fmt.Errorf("inserted item %d is not one of the %d asked for", id, len(ps))
		}
		out = append(out, itemFromParams(id, ps[i]))
	}
	return out, mapErr(rows.Err())
}

// itemFromParams is the row qItemInsertMany writes for p with the id drawn for it.
func itemFromParams(id int64, p store.ItemInsertParams) *record.Item {
	root := p.RootID
	if root == 0 && p.ParentID == 0 {
		root = id
	}
	return &record.Item{ID: id, JobID: p.JobID, ParentID: p.ParentID, RootID: root, Step: p.Step, Ordinal: p.Ordinal, Depth: p.Depth,
		SortKey: p.SortKey, Name: p.Name, ContentType: p.ContentType, BlobSHA256: p.BlobSHA256, Size: p.Size,
		Metadata: []byte(jsonOr(p.Metadata)), Options: []byte(jsonOr(p.Options)), HasText: p.Text != nil,
		ThumbnailSHA: p.ThumbnailSHA, ThumbnailType: p.ThumbnailType, State: record.ItemWritten,
		RangeLo: p.RangeLo, RangeLen: p.RangeLen, Share: p.RangeLen, CreatedAt: fromMicros(micros(p.Now))}
}

// itemInsertArgs are qItemInsertMany's parameters for ps: a column each.
func itemInsertArgs(ps []store.ItemInsertParams) []any {
	n := len(ps)
	jobs, parents, roots, steps, ords, depths := make([]int64, n), make([]int64, n), make([]int64, n), make([]string, n), make([]int32, n), make([]int32, n)
	keys, names, types, blobs, sizes, mds, opts := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n), make([]string, n), make([]string, n)
	texts, thumbs, thumbTypes, los, lens, created := make([]*string, n), make([]string, n), make([]string, n), make([]float64, n), make([]float64, n), make([]int64, n)
	for i, p := range ps {
		jobs[i], parents[i], roots[i], steps[i], ords[i], depths[i] = p.JobID, p.ParentID, p.RootID, p.Step, int32(p.Ordinal), int32(p.Depth)
		keys[i], names[i], types[i], blobs[i], sizes[i], mds[i], opts[i] = p.SortKey, p.Name, p.ContentType, p.BlobSHA256, p.Size, jsonOr(p.Metadata), jsonOr(p.Options)
		texts[i], thumbs[i], thumbTypes[i], los[i], lens[i], created[i] = p.Text, p.ThumbnailSHA, p.ThumbnailType, p.RangeLo, p.RangeLen, micros(p.Now)
	}
	return []any{jobs, parents, roots, steps, ords, depths, keys, names, types, blobs, sizes, mds, opts, texts, thumbs, thumbTypes, los, lens, created}
}

func (q *queries) ItemInsertMany(ctx context.Context, ps []store.ItemInsertParams) ([]*record.Item, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	args := itemInsertArgs(ps)
	jobs := args[0].([]int64)
	if tc, ok := q.c.(*txConn); ok && !slices.ContainsFunc(jobs, func(j int64) bool { return j != jobs[0] }) {
		return q.itemInsertManyWithJob(ctx, tc, ps, args)
	}
	rows, err := q.c.Query(ctx, qItemInsertMany, args...)
	items, err := insertedItems(rows, err, ps)
	if err != nil {
		return nil, fmt.Errorf("insert %d items: %w", len(ps), err)
	}
	q.addFreshItems(items)
	return items, nil
}

// itemInsertManyWithJob inserts items of one job in a transaction and reads that job in the same
// batch, before them, for the engine's next statement (see queries.prefetched).
func (q *queries) itemInsertManyWithJob(ctx context.Context, tc *txConn, ps []store.ItemInsertParams, args []any) ([]*record.Item, error) {
	n := len(ps)
	b := &pgx.Batch{}
	b.Queue(qJobGet, args[0].([]int64)[0])
	b.Queue(qItemInsertMany, args...)
	br := tc.SendBatch(ctx, b)
	job, jerr := scanJob(br.QueryRow())
	if jerr != nil && !errors.Is(jerr, store.ErrNotFound) {
		br.Close()
		return nil, fmt.Errorf("insert %d items: read their job: %w", n, jerr)
	}
	rows, err := br.Query()
	items, err := insertedItems(rows, err, ps)
	if cerr := br.Close(); err == nil {
		err = mapErr(cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("insert %d items: %w", n, err)
	}
	if jerr == nil {
		q.prefetched, q.prefetchedAt = job, tc.sends
	}
	q.addFreshItems(items)
	return items, nil
}
