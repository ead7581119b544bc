package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
)

// indexDocument adds the document of an item to search_index, from the item's name, text,
// job, content type and metadata.
func (q *queries) indexDocument(ctx context.Context, itemID int64) error {
	var name, ctype, meta string
	var jobID int64
	var text sql.NullString
	if err := q.wrow(ctx, `SELECT name, text, job_id, content_type, metadata FROM items WHERE id = ?`, itemID).Scan(&name, &text, &jobID, &ctype, &meta); err != nil {
		return fmt.Errorf("index document %d: %w", itemID, mapErr(err))
	}
	d := search.Analyze(name, text.String)
	if _, err := q.exec(ctx, `INSERT INTO search_index (rowid, title, body, facets) VALUES (?, ?, ?, ?)`,
		itemID, search.Joined(d.Title), search.Joined(d.Body), search.Joined(search.Facets(jobID, ctype, []byte(meta)))); err != nil {
		return fmt.Errorf("index document %d: %w", itemID, err)
	}
	return nil
}

// matchExpr renders a query tree as an FTS5 MATCH expression. Tokens are letters and digits
// only (search.Analyze), so quoting them needs no escapes.
func matchExpr(n *search.Node) string {
	switch n.Op {
	case search.OpTerm, search.OpPhrase:
		s := `"` + strings.Join(n.Tokens, " ") + `"`
		if n.Prefix {
			s += " *"
		}
		return s
	case search.OpOr:
		parts := make([]string, len(n.Kids))
		for i, k := range n.Kids {
			parts[i] = matchExpr(k)
		}
		return "(" + strings.Join(parts, " OR ") + ")"
	case search.OpAnd:
		var pos, neg []string
		for _, k := range n.Kids {
			if k.Op == search.OpNot {
				neg = append(neg, matchExpr(k.Kids[0]))
			} else {
				pos = append(pos, matchExpr(k))
			}
		}
		// FTS5's NOT is binary: (a AND b) NOT c NOT d, grouped from the left.
		s := "(" + strings.Join(pos, " AND ") + ")"
		for _, x := range neg {
			s = "(" + s + " NOT " + x + ")"
		}
		return s
	}
	panic(fmt.Sprintf("search: a bare exclusion reached the driver: %s", n))
}

// Weights of bm25 per column: a word in the title (the path) counts as ten in the text.
const qSearchRank = `bm25(search_index, 10.0, 1.0, 0.0)`

func (q *queries) DocumentSearch(ctx context.Context, p store.DocumentSearchParams) ([]*store.DocumentHit, error) {
	if p.Query == nil {
		return nil, fmt.Errorf("search documents: no query")
	}
	if p.Limit <= 0 {
		p.Limit = 20
	}
	// Filters are facet tokens that must match too.
	match := matchExpr(p.Tree())
	window := p.RankWindow
	if window <= 0 {
		window = store.SearchRankWindow
	}
	// The window: the item id of the RankWindow-th most recent match, found without ranking
	// (FTS5 walks its doclists by rowid); only the matches from there on are ranked.
	args := []any{match, window, match}
	var b strings.Builder
	b.WriteString(`WITH w AS (SELECT rowid AS id FROM search_index WHERE search_index MATCH ? ORDER BY rowid DESC LIMIT ?)
		SELECT s.id, s.rank FROM (SELECT rowid AS id, ` + qSearchRank + ` AS rank FROM search_index
			WHERE search_index MATCH ? AND rowid >= (SELECT COALESCE(min(id), 0) FROM w)) s WHERE 1`)
	if p.After != nil {
		b.WriteString(` AND (s.rank > ? OR s.rank = ? AND s.id > ?)`)
		args = append(args, p.After.Rank, p.After.Rank, p.After.ItemID)
	}
	b.WriteString(` ORDER BY s.rank, s.id LIMIT ?`)
	args = append(args, p.Limit)
	rows, err := q.r.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("search documents: %w", mapErr(err))
	}
	var hits []*store.DocumentHit
	byID := map[int64]*store.DocumentHit{}
	for rows.Next() {
		h := &store.DocumentHit{}
		if err := rows.Scan(&h.ItemID, &h.Rank); err != nil {
			rows.Close()
			return nil, fmt.Errorf("search documents: %w", err)
		}
		hits = append(hits, h)
		byID[h.ItemID] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search documents: %w", mapErr(err))
	}
	if len(hits) == 0 {
		return nil, nil
	}
	// The page's details in a second query: read with the ranking, every match's text would be
	// carried through the sort.
	args = []any{p.TextChars}
	marks := make([]string, len(hits))
	for i, h := range hits {
		marks[i] = "?"
		args = append(args, h.ItemID)
	}
	rows, err = q.r.QueryContext(ctx, `SELECT i.id, i.job_id, i.name, i.content_type, i.metadata, o.value, COALESCE(substr(i.text, 1, ?), '')
		FROM items i JOIN outputs o ON o.item_id = i.id AND o.kind = 'document' WHERE i.id IN (`+strings.Join(marks, ",")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("search documents: %w", mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var meta, value string
		var d store.DocumentHit
		if err := rows.Scan(&id, &d.JobID, &d.Name, &d.ContentType, &meta, &value, &d.Text); err != nil {
			return nil, fmt.Errorf("search documents: %w", err)
		}
		h := byID[id]
		h.JobID, h.Name, h.ContentType, h.Metadata, h.Value, h.Text = d.JobID, d.Name, d.ContentType, []byte(meta), []byte(value), d.Text
	}
	if p.TextChars == 0 {
		for _, h := range hits {
			h.Text = ""
		}
	}
	return hits, rows.Err()
}

func (q *queries) DocumentIndexMissing(ctx context.Context, p store.DocumentIndexMissingParams) (int, int64, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	var indexed int
	var last int64
	run := func(e store.Executor) error {
		qq := e.(*queries)
		rows, err := qq.wquery(ctx, `SELECT o.item_id, NOT EXISTS (SELECT 1 FROM search_index WHERE rowid = o.item_id)
			FROM outputs o WHERE o.kind = 'document' AND o.item_id > ? ORDER BY o.item_id LIMIT ?`, p.AfterItem, p.Limit)
		if err != nil {
			return err
		}
		var missing []int64
		for rows.Next() {
			var id int64
			var miss bool
			if err := rows.Scan(&id, &miss); err != nil {
				rows.Close()
				return err
			}
			last = id
			if miss {
				missing = append(missing, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range missing {
			if err := qq.indexDocument(ctx, id); err != nil {
				return err
			}
		}
		indexed = len(missing)
		return nil
	}
	var err error
	if q.tx != nil {
		err = run(q)
	} else {
		err = q.db.InTx(ctx, run)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("index missing documents: %w", mapErr(err))
	}
	return indexed, last, nil
}

func (q *queries) DocumentIndexCount(ctx context.Context) (documents, indexed int64, err error) {
	err = q.r.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM outputs WHERE kind = 'document'), (SELECT count(*) FROM search_index)`).Scan(&documents, &indexed)
	if err != nil {
		return 0, 0, fmt.Errorf("count indexed documents: %w", mapErr(err))
	}
	return documents, indexed, nil
}
