package docsearch

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/deflate"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
)

// sqliteIndex is the index as an FTS5 table, search_index, whose rowid is the document's item id.
type sqliteIndex struct{ x store.DomainSQL }

// qSQLiteDoc reads what a document's entry is made from, and whether the index has it.
const qSQLiteDoc = `SELECT name, text, job_id, content_type, metadata, EXISTS (SELECT 1 FROM search_index WHERE rowid = items.id)
	FROM items WHERE id = ?`

func (s sqliteIndex) Add(ctx context.Context, itemIDs ...int64) error {
	for _, id := range itemIDs { // SQLite's statements cost no round trip
		if err := s.add(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func (s sqliteIndex) add(ctx context.Context, itemID int64) error {
	rows, err := s.x.Query(ctx, qSQLiteDoc, itemID)
	if err != nil {
		return fmt.Errorf("index document %d: %w", itemID, err)
	}
	var name, ctype, meta string
	var jobID int64
	var text deflate.Text // items' text may be kept deflated on SQLite
	var indexed, found bool
	if rows.Next() {
		found = true
		err = rows.Scan(&name, &text, &jobID, &ctype, &meta, &indexed)
	}
	if err == nil {
		err = rows.Err()
	}
	rows.Close() // before the insert: the transaction's one connection
	if err == nil && !found {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("index document %d: %w", itemID, err)
	}
	if indexed {
		return nil
	}
	d := search.Analyze(name, text.String)
	if _, err := s.x.Exec(ctx, `INSERT INTO search_index (rowid, title, body, facets) VALUES (?, ?, ?, ?)`,
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
	panic(fmt.Sprintf("search: a bare exclusion reached the index: %s", n))
}

// Weights of bm25 per column: a word in the title (the path) counts as ten in the text.
const qSQLiteRank = `bm25(search_index, 10.0, 1.0, 0.0)`

func (s sqliteIndex) Search(ctx context.Context, p SearchParams) ([]*Match, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	// Filters are facet tokens that must match too.
	match := matchExpr(p.tree())
	// The window: the item id of the RankWindow-th most recent match, found without ranking
	// (FTS5 walks its doclists by rowid); only the matches from there on are ranked.
	args := []any{match, p.RankWindow, match}
	var b strings.Builder
	b.WriteString(`WITH w AS (SELECT rowid AS id FROM search_index WHERE search_index MATCH ? ORDER BY rowid DESC LIMIT ?)
		SELECT s.id, s.rank FROM (SELECT rowid AS id, ` + qSQLiteRank + ` AS rank FROM search_index
			WHERE search_index MATCH ? AND rowid >= (SELECT COALESCE(min(id), 0) FROM w)) s WHERE 1`)
	if p.After != nil {
		b.WriteString(` AND (s.rank > ? OR s.rank = ? AND s.id > ?)`)
		args = append(args, p.After.Rank, p.After.Rank, p.After.ItemID)
	}
	b.WriteString(` ORDER BY s.rank, s.id LIMIT ?`)
	args = append(args, p.Limit)
	rows, err := s.x.Query(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("search documents: %w", err)
	}
	var hits []*Match
	byID := map[int64]*Match{}
	for rows.Next() {
		h := &Match{}
		if err := rows.Scan(&h.ItemID, &h.Rank); err != nil {
			rows.Close()
			return nil, fmt.Errorf("search documents: %w", err)
		}
		hits = append(hits, h)
		byID[h.ItemID] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search documents: %w", err)
	}
	if len(hits) == 0 {
		return nil, nil
	}
	// The page's details in a second query: read with the ranking, every match's text would be
	// carried through the sort.
	args = []any{p.TextChars > 0}
	marks := make([]string, len(hits))
	for i, h := range hits {
		marks[i] = "?"
		args = append(args, h.ItemID)
	}
	rows, err = s.x.Query(ctx, `SELECT i.id, i.job_id, i.name, i.content_type, i.metadata, o.value, CASE WHEN ? THEN i.text END
		FROM items i JOIN outputs o ON o.item_id = i.id AND o.kind = 'document' WHERE i.id IN (`+strings.Join(marks, ",")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("search documents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var meta, value string
		var text deflate.Text // kept deflated, perhaps: cut here, not by substr in SQL
		var d Match
		if err := rows.Scan(&id, &d.JobID, &d.Name, &d.ContentType, &meta, &value, &text); err != nil {
			return nil, fmt.Errorf("search documents: %w", err)
		}
		d.Text = firstChars(text.String, p.TextChars)
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

func (s sqliteIndex) AddMissing(ctx context.Context, p AddMissingParams) (int, int64, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.x.Query(ctx, `SELECT o.item_id, NOT EXISTS (SELECT 1 FROM search_index WHERE rowid = o.item_id)
		FROM outputs o WHERE o.kind = 'document' AND o.item_id > ? ORDER BY o.item_id LIMIT ?`, p.AfterItem, p.Limit)
	if err != nil {
		return 0, 0, fmt.Errorf("index missing documents: %w", err)
	}
	var missing []int64
	var last int64
	for rows.Next() {
		var id int64
		var miss bool
		if err := rows.Scan(&id, &miss); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("index missing documents: %w", err)
		}
		last = id
		if miss {
			missing = append(missing, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("index missing documents: %w", err)
	}
	for _, id := range missing {
		if err := s.Add(ctx, id); err != nil {
			return 0, 0, fmt.Errorf("index missing documents: %w", err)
		}
	}
	return len(missing), last, nil
}

func (s sqliteIndex) Count(ctx context.Context) (documents, indexed int64, err error) {
	return count(ctx, s.x)
}

// firstChars returns the first n characters of s, as SQLite's substr(s, 1, n) counts them.
func firstChars(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
