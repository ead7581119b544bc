package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/deflate"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// The queries of items (queries.go holds the rest).

const itemCols = `id, job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text IS NOT NULL, thumbnail_sha256, thumbnail_type, state, error, n_children, range_lo, range_len, share, colored, created_at`

func scanItem(sc interface{ Scan(...any) error }, withText bool) (*record.Item, error) {
	var it record.Item
	var md, opts string
	var created int64
	var text deflate.Text
	dest := []any{&it.ID, &it.JobID, &it.ParentID, &it.RootID, &it.Step, &it.Ordinal, &it.Depth, &it.SortKey, &it.Name, &it.ContentType, &it.BlobSHA256, &it.Size, &md, &opts, &it.HasText, &it.ThumbnailSHA, &it.ThumbnailType, &it.State, &it.Error, &it.NChildren, &it.RangeLo, &it.RangeLen, &it.Share, &it.Colored, &created}
	if withText {
		dest = append(dest, &text)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, mapErr(err)
	}
	it.Metadata, it.Options, it.CreatedAt, it.Text = []byte(md), []byte(opts), fromMicros(created), text.String
	return &it, nil
}

func (q *queries) ItemInsert(ctx context.Context, p store.ItemInsertParams) (*record.Item, bool, error) {
	var text any
	if p.Text != nil {
		text = deflate.PackText(*p.Text)
	}
	var id int64
	err := q.wrow(ctx, `INSERT INTO items (job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, content_type, blob_sha256, size, metadata, options, text, thumbnail_sha256, thumbnail_type, state, range_lo, range_len, share, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'written', ?, ?, ?, ?)
		ON CONFLICT (job_id, parent_id, step, ordinal) DO NOTHING RETURNING id`,
		p.JobID, p.ParentID, p.RootID, p.Step, p.Ordinal, p.Depth, p.SortKey, p.Name, p.ContentType, p.BlobSHA256, p.Size,
		jsonOr(p.Metadata), jsonOr(p.Options), text, p.ThumbnailSHA, p.ThumbnailType, p.RangeLo, p.RangeLen, p.RangeLen, micros(p.Now)).Scan(&id)
	inserted := true
	if errors.Is(err, sql.ErrNoRows) {
		inserted = false
		err = q.wrow(ctx, `SELECT id FROM items WHERE job_id = ? AND parent_id = ? AND step = ? AND ordinal = ?`, p.JobID, p.ParentID, p.Step, p.Ordinal).Scan(&id)
	}
	if err != nil {
		return nil, false, fmt.Errorf("insert item %q: %w", p.Name, mapErr(err))
	}
	if !inserted {
		it, err := q.itemGetW(ctx, id)
		return it, false, err
	}
	root := p.RootID
	if root == 0 && p.ParentID == 0 {
		root = id
		if _, err := q.exec(ctx, `UPDATE items SET root_id = id WHERE id = ?`, id); err != nil {
			return nil, false, err
		}
	}
	// Built from the params rather than read back: this is the hot path of fan-out.
	md, opts := p.Metadata, p.Options
	if len(md) == 0 {
		md = []byte("{}")
	}
	if len(opts) == 0 {
		opts = []byte("{}")
	}
	return &record.Item{ID: id, JobID: p.JobID, ParentID: p.ParentID, RootID: root, Step: p.Step, Ordinal: p.Ordinal, Depth: p.Depth,
		SortKey: p.SortKey, Name: p.Name, ContentType: p.ContentType, BlobSHA256: p.BlobSHA256, Size: p.Size, Metadata: md, Options: opts,
		HasText: p.Text != nil, ThumbnailSHA: p.ThumbnailSHA, ThumbnailType: p.ThumbnailType, State: record.ItemWritten,
		RangeLo: p.RangeLo, RangeLen: p.RangeLen, Share: p.RangeLen, CreatedAt: p.Now.UTC().Truncate(time.Microsecond)}, true, nil
}

func (q *queries) itemGetW(ctx context.Context, id int64) (*record.Item, error) {
	it, err := scanItem(q.wrow(ctx, `SELECT `+itemCols+` FROM items WHERE id = ?`, id), false)
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get item %d: %w", id, err), "item", id)
	}
	return it, nil
}

func (q *queries) ItemGet(ctx context.Context, id int64) (*record.Item, error) {
	it, err := scanItem(q.rrow(ctx, `SELECT `+itemCols+`, text FROM items WHERE id = ?`, id), true)
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get item %d: %w", id, err), "item", id)
	}
	return it, nil
}

// ItemLock reads the item on the writer: SQLite's single writer already serialises transactions.
func (q *queries) ItemLock(ctx context.Context, id int64) (*record.Item, error) {
	return q.itemGetW(ctx, id)
}

func (q *queries) ItemList(ctx context.Context, p store.ItemListParams) ([]*record.Item, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	where := []string{"job_id = ?"}
	args := []any{p.JobID}
	if p.ParentID != nil {
		where = append(where, "parent_id = ?")
		args = append(args, *p.ParentID)
	}
	if len(p.States) > 0 {
		where = append(where, "state IN ("+placeholders(len(p.States))+")")
		for _, s := range p.States {
			args = append(args, s)
		}
	}
	if p.OnlyErrored {
		where = append(where, "error <> ''")
	}
	if p.AfterSort != "" {
		where = append(where, "sort_key > ?")
		args = append(args, p.AfterSort)
	}
	cols := itemCols
	if p.WithText {
		cols += ", text"
	}
	args = append(args, p.Limit)
	rows, err := q.r.QueryContext(ctx, `SELECT `+cols+` FROM items WHERE `+strings.Join(where, " AND ")+` ORDER BY sort_key LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	defer rows.Close()
	var out []*record.Item
	for rows.Next() {
		it, err := scanItem(rows, p.WithText)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func (q *queries) ItemReopen(ctx context.Context, p store.ItemReopenParams) (bool, error) {
	from, err := reopenFrom(p.To)
	if err != nil {
		return false, err
	}
	res, err := q.w.ExecContext(ctx, `UPDATE items SET state = ?1,
		error = CASE WHEN ?2 THEN '' ELSE error END,
		processed_at = CASE WHEN ?1 = 'written' THEN 0 ELSE processed_at END,
		colored = CASE WHEN ?1 = 'written' THEN 0 ELSE colored END,
		ingested_at = 0
		WHERE id = ?3 AND state IN (`+from+`)`, p.To, p.ClearError, p.ID)
	if err != nil {
		return false, fmt.Errorf("reopen item %d to %s: %w", p.ID, p.To, mapErr(err))
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// reopenFrom returns the states (as SQL literals) an item may be reopened to state from.
func reopenFrom(to record.ItemState) (string, error) {
	switch to {
	case record.ItemWritten:
		return `'written', 'processed', 'ingested'`, nil
	case record.ItemProcessed:
		return `'processed', 'ingested'`, nil
	}
	return "", fmt.Errorf("reopen item to %q: only written or processed", to)
}

func (q *queries) ItemUpdate(ctx context.Context, p store.ItemUpdateParams) error {
	if p.Text != nil {
		if _, err := q.exec(ctx, `UPDATE items SET text = ? WHERE id = ? AND text IS NULL`, deflate.PackText(*p.Text), p.ID); err != nil {
			return fmt.Errorf("set item %d text: %w", p.ID, err)
		}
	}
	if p.ThumbnailSHA != "" {
		if _, err := q.exec(ctx, `UPDATE items SET thumbnail_sha256 = ?, thumbnail_type = ? WHERE id = ? AND thumbnail_sha256 = ''`, p.ThumbnailSHA, p.ThumbnailType, p.ID); err != nil {
			return fmt.Errorf("set item %d thumbnail: %w", p.ID, err)
		}
	}
	if len(p.Metadata) > 0 {
		// Keys already on the item (the user's) win over the action's, at every depth. Merged in Go:
		// json_patch(new, old) also deleted every key the item held with a null value.
		if err := q.mergeMetadata(ctx, p.ID, p.Metadata); err != nil {
			return fmt.Errorf("set item %d metadata: %w", p.ID, err)
		}
	}
	if p.ContentType != "" {
		if _, err := q.exec(ctx, `UPDATE items SET content_type = ? WHERE id = ?`, p.ContentType, p.ID); err != nil {
			return fmt.Errorf("set item %d content type: %w", p.ID, err)
		}
	}
	if p.Error != "" || p.ReplaceError {
		if _, err := q.exec(ctx, `UPDATE items SET error = ? WHERE id = ? AND (error = '' OR ?)`, p.Error, p.ID, p.ReplaceError); err != nil {
			return fmt.Errorf("set item %d error: %w", p.ID, err)
		}
	}
	if p.AddColored != 0 {
		if _, err := q.exec(ctx, `UPDATE items SET colored = MIN(share, colored + ? * range_len) WHERE id = ?`, p.AddColored, p.ID); err != nil {
			return fmt.Errorf("color item %d: %w", p.ID, err)
		}
	}
	return nil
}

func (q *queries) ItemAddChild(ctx context.Context, p store.ItemAddChildParams) error {
	parentID, n, length := p.ParentID, p.N, p.Length
	_, err := q.exec(ctx, `UPDATE items SET n_children = n_children + ?, share = MAX(0, share - ?) WHERE id = ?`, n, length, parentID)
	if err != nil {
		return fmt.Errorf("count child of %d: %w", parentID, err)
	}
	return nil
}

// qItemHasOpenChild asks whether the parent ?1 has a child in one of n states, none of them
// ingested; qItemHasChildState, in any n states.
func qItemHasOpenChild(n int) string {
	return `SELECT EXISTS (SELECT 1 FROM items WHERE parent_id = ?1 AND state IN (` + placeholders(n) + `) AND state <> 'ingested' AND parent_id <> 0)`
}

func qItemHasChildState(n int) string {
	return `SELECT EXISTS (SELECT 1 FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = ?1) AND parent_id = ?1 AND state IN (` + placeholders(n) + `))`
}

// qItemCountBacklog counts through items_job_open (migration 012), whose predicate it repeats
// so that SQLite may use the partial index; the LIMIT inside stops the count at the bound.
const qItemCountBacklog = `SELECT count(*) FROM (SELECT 1 FROM items WHERE job_id = ?1 AND state IN ('created', 'written')
	AND state <> 'ingested' AND depth > ?2 LIMIT ?3)`

func (q *queries) ItemCountBacklog(ctx context.Context, p store.ItemCountBacklogParams) (int, error) {
	var n int
	if err := q.rrow(ctx, qItemCountBacklog, p.JobID, p.Depth, p.Limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("backlog of job %d: %w", p.JobID, mapErr(err))
	}
	return n, nil
}

// ItemHasChildInState looks in items_parent_open, which has no ingested item (migration 012),
// unless ingested is one of the states: then through items_key, with the parent's job.
func (q *queries) ItemHasChildInState(ctx context.Context, parentID int64, states []record.ItemState) (bool, error) {
	args := []any{parentID}
	for _, s := range states {
		args = append(args, string(s))
	}
	query := qItemHasOpenChild(len(states))
	if slices.Contains(states, record.ItemIngested) {
		query = qItemHasChildState(len(states))
	}
	var n int
	err := q.wrow(ctx, query, args...).Scan(&n)
	return n > 0, mapErr(err)
}

const qItemListChildren = `SELECT ` + itemCols + ` FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = ?1)
	AND parent_id = ?1 AND step = ?2 ORDER BY ordinal`

// ItemListChildren lists through items_key, with the parent's job: items_parent_open has no
// ingested child.
func (q *queries) ItemListChildren(ctx context.Context, parentID int64, step string) ([]*record.Item, error) {
	return q.listChildren(ctx, qItemListChildren, parentID, step)
}

func (q *queries) ItemListChildrenFrom(ctx context.Context, parentID int64, step string, from, limit int) ([]*record.Item, error) {
	// Through items_key (job_id leads it), so that each page starts at its ordinal instead of
	// sorting every child of the parent.
	return q.listChildren(ctx, `SELECT `+itemCols+` FROM items WHERE job_id = (SELECT p.job_id FROM items p WHERE p.id = ?1)
		AND parent_id = ?1 AND step = ?2 AND ordinal >= ?3 ORDER BY ordinal LIMIT ?4`, parentID, step, from, limit)
}

func (q *queries) listChildren(ctx context.Context, query string, parentID int64, args ...any) ([]*record.Item, error) {
	rows, err := q.wquery(ctx, query, append([]any{parentID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("list children of %d: %w", parentID, err)
	}
	defer rows.Close()
	var out []*record.Item
	for rows.Next() {
		it, err := scanItem(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}
