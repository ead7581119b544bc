package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/store"
)

// documentItemCols are itemCols of the items joined to their outputs as i.
var documentItemCols = "i." + strings.ReplaceAll(itemCols, ", ", ", i.")

// documentWhere is the filters of p over outputs o joined to items i, with their arguments.
func documentWhere(p store.DocumentListParams) ([]string, []any) {
	where := []string{"o.kind = ?"}
	args := []any{store.OutputDocument}
	if p.JobID != 0 {
		where = append(where, "o.job_id = ?")
		args = append(args, p.JobID)
	}
	if p.ContentType != "" {
		where = append(where, "i.content_type = ?")
		args = append(args, p.ContentType)
	}
	for _, kv := range p.Meta {
		// As JobList compares a job's metadata: the key a parameter, never spliced into SQL.
		where = append(where, "(CASE json_type(i.metadata, ?) WHEN 'text' THEN json_extract(i.metadata, ?) ELSE i.metadata -> ? END) = ?")
		path := jsonMember(kv.Key)
		args = append(args, path, path, path, kv.Value)
	}
	return where, args
}

func (q *queries) DocumentList(ctx context.Context, p store.DocumentListParams) ([]*store.Document, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	if p.Order == store.DocumentsInTree && p.JobID == 0 {
		return nil, fmt.Errorf("list documents: the tree order is a job's")
	}
	where, args := documentWhere(p)
	var order string
	switch p.Order {
	case store.DocumentsInTree:
		order = "i.sort_key, i.id"
		if p.AfterItem != 0 {
			where = append(where, "(i.sort_key, i.id) > (?, ?)")
			args = append(args, p.AfterKey, p.AfterItem)
		}
	case store.DocumentsByTitle:
		order = "i.name, i.id"
		if p.AfterItem != 0 {
			where = append(where, "(i.name, i.id) > (?, ?)")
			args = append(args, p.AfterKey, p.AfterItem)
		}
	case store.DocumentsBySize:
		order = "i.size DESC, i.id DESC"
		if p.AfterItem != 0 {
			where = append(where, "(i.size, i.id) < (?, ?)")
			args = append(args, p.AfterSize, p.AfterItem)
		}
	case store.DocumentsNewest, "":
		order = "o.item_id DESC"
		if p.AfterItem != 0 {
			where = append(where, "o.item_id < ?")
			args = append(args, p.AfterItem)
		}
	default:
		return nil, fmt.Errorf("list documents: no order %q", p.Order)
	}
	args = append(args, p.Limit)
	rows, err := q.r.QueryContext(ctx, `SELECT o.value, o.created_at, `+documentItemCols+` FROM outputs o JOIN items i ON i.id = o.item_id WHERE `+
		strings.Join(where, " AND ")+` ORDER BY `+order+` LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	defer rows.Close()
	var out []*store.Document
	for rows.Next() {
		var d store.Document
		var created int64
		var value string
		it, err := scanItem(prefixScanner{rows, []any{&value, &created}}, false)
		if err != nil {
			return nil, fmt.Errorf("list documents: %w", err)
		}
		d.Item, d.Value, d.CreatedAt = it, []byte(value), fromMicros(created)
		out = append(out, &d)
	}
	return out, rows.Err()
}

func (q *queries) DocumentCounts(ctx context.Context, p store.DocumentListParams) ([]store.TypeCount, error) {
	where, args := documentWhere(p)
	rows, err := q.r.QueryContext(ctx, `SELECT i.content_type, count(*) FROM outputs o JOIN items i ON i.id = o.item_id WHERE `+
		strings.Join(where, " AND ")+` GROUP BY i.content_type ORDER BY 2 DESC, 1`, args...)
	if err != nil {
		return nil, fmt.Errorf("count documents: %w", err)
	}
	defer rows.Close()
	var out []store.TypeCount
	for rows.Next() {
		var c store.TypeCount
		if err := rows.Scan(&c.ContentType, &c.N); err != nil {
			return nil, fmt.Errorf("count documents: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// prefixScanner scans its first columns into prefix, the rest into what Scan is given.
type prefixScanner struct {
	sc     interface{ Scan(...any) error }
	prefix []any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.sc.Scan(append(p.prefix[:len(p.prefix):len(p.prefix)], dest...)...)
}
