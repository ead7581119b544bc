package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-project/sluice/internal/store"
)

// The queries of items (queries.go holds the rest).

const (
	itemCols = `id, job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text IS NOT NULL, thumbnail_sha256, thumbnail_type, state, error, n_children, range_lo, range_len, share, colored, created_at`
	// The id is drawn first so a root can be its own root_id in the same statement. A replay
	// burns a sequence value, as any identity insert that conflicts does. The sequence is named
	// once per statement (an InitPlan), not per row: pg_get_serial_sequence looks it up by name,
	// which cost a fan-out's multi-row insert (qItemInsertMany) a quarter of its CPU per row.
	// A new item is open:
	// it gets its open_items row (003_open_items.up.sql) in the same statement, as every write
	// below that moves an item's state keeps that row in step.
	qItemInsert = `WITH nid AS (SELECT nextval((SELECT pg_get_serial_sequence('items', 'id')::regclass)) AS id),
		ins AS (INSERT INTO items (id, job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text, thumbnail_sha256, thumbnail_type, state, range_lo, range_len, share, created_at)
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
	if inserted {
		q.addFresh(it.ID)
	}
	return it, inserted, nil
}

func (q *queries) ItemGet(ctx context.Context, id int64) (*store.Item, error) {
	it, err := scanItem(q.c.QueryRow(ctx, qItemGet, id), true)
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get item %d: %w", id, err), "item", id)
	}
	return it, nil
}

// ItemLock locks the item's row until the transaction ends (SELECT … FOR UPDATE), so concurrent
// engines deciding the same item's state take turns.
func (q *queries) ItemLock(ctx context.Context, id int64) (*store.Item, error) {
	it, err := scanItem(q.c.QueryRow(ctx, qItemLock, id), false)
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("lock item %d: %w", id, err), "item", id)
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
	if _, err := q.c.Exec(ctx, qItemUpdate, p.ID, p.Text, p.ThumbnailSHA, p.ThumbnailType, md, p.ContentType, p.Error, p.AddColored, p.ReplaceError); err != nil {
		return fmt.Errorf("update item %d: %w", p.ID, mapErr(err))
	}
	return nil
}

func (q *queries) ItemAddChild(ctx context.Context, p store.ItemAddChildParams) error {
	parentID, n, length := p.ParentID, p.N, p.Length
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

func (q *queries) ItemListChildrenFrom(ctx context.Context, parentID int64, step string, from, limit int) ([]*store.Item, error) {
	rows, err := q.c.Query(ctx, qItemListChildrenFrom, parentID, step, from, limit)
	out, err := collect(rows, err, scanItemNoText)
	if err != nil {
		return nil, fmt.Errorf("list children of %d: %w", parentID, err)
	}
	return out, nil
}

func (q *queries) ItemListChildren(ctx context.Context, parentID int64, step string) ([]*store.Item, error) {
	rows, err := q.c.Query(ctx, qItemListChildren, parentID, step)
	out, err := collect(rows, err, scanItemNoText)
	if err != nil {
		return nil, fmt.Errorf("list children of %d: %w", parentID, err)
	}
	return out, nil
}
