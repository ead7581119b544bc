package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/store"
)

// documentItemCols are itemCols of the items joined to their outputs as i.
var documentItemCols = "i." + strings.ReplaceAll(itemCols, ", ", ", i.")

// documentWhere is the filters of p over outputs o joined to items i.
func documentWhere(p store.DocumentListParams) *where {
	var w where
	w.add("o.kind = ?", store.OutputDocument)
	if p.JobID != 0 {
		w.add("o.job_id = ?", p.JobID)
	}
	if p.ContentType != "" {
		w.add("i.content_type = ?", p.ContentType)
	}
	for _, kv := range p.Meta {
		// As JobList compares a job's metadata: the key a parameter, never spliced into SQL.
		k := w.next(kv.Key)
		w.add("i.metadata ->> "+k+" = ?", kv.Value)
	}
	return &w
}

func (q *queries) DocumentList(ctx context.Context, p store.DocumentListParams) ([]*store.Document, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	if p.Order == store.DocumentsInTree && p.JobID == 0 {
		return nil, fmt.Errorf("list documents: the tree order is a job's")
	}
	w := documentWhere(p)
	var order string
	switch p.Order {
	case store.DocumentsInTree:
		order = "i.sort_key, i.id"
		if p.AfterItem != 0 {
			k := w.next(p.AfterKey)
			w.add("(i.sort_key, i.id) > ("+k+", ?)", p.AfterItem)
		}
	case store.DocumentsByTitle:
		order = "i.name, i.id"
		if p.AfterItem != 0 {
			k := w.next(p.AfterKey)
			w.add("(i.name, i.id) > ("+k+", ?)", p.AfterItem)
		}
	case store.DocumentsBySize:
		order = "i.size DESC, i.id DESC"
		if p.AfterItem != 0 {
			k := w.next(p.AfterSize)
			w.add("(i.size, i.id) < ("+k+", ?)", p.AfterItem)
		}
	case store.DocumentsNewest, "":
		order = "o.item_id DESC"
		if p.AfterItem != 0 {
			w.add("o.item_id < ?", p.AfterItem)
		}
	default:
		return nil, fmt.Errorf("list documents: no order %q", p.Order)
	}
	rows, err := q.c.Query(ctx, `SELECT o.value, o.created_at, `+documentItemCols+` FROM outputs o JOIN items i ON i.id = o.item_id WHERE `+
		w.String()+` ORDER BY `+order+` LIMIT `+w.next(p.Limit), w.args...)
	out, err := collect(rows, err, func(sc scanner) (*store.Document, error) {
		var d store.Document
		var created int64
		it, err := scanItem(prefixScanner{sc, []any{&d.Value, &created}}, false)
		if err != nil {
			return nil, err
		}
		d.Item, d.CreatedAt = it, fromMicros(created)
		return &d, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	return out, nil
}

func (q *queries) DocumentCounts(ctx context.Context, p store.DocumentListParams) ([]store.TypeCount, error) {
	w := documentWhere(p)
	rows, err := q.c.Query(ctx, `SELECT i.content_type, count(*) FROM outputs o JOIN items i ON i.id = o.item_id WHERE `+
		w.String()+` GROUP BY i.content_type ORDER BY 2 DESC, 1`, w.args...)
	out, err := collect(rows, err, func(sc scanner) (store.TypeCount, error) {
		var c store.TypeCount
		err := sc.Scan(&c.ContentType, &c.N)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count documents: %w", err)
	}
	return out, nil
}

// prefixScanner scans its first columns into prefix, the rest into what Scan is given.
type prefixScanner struct {
	sc     scanner
	prefix []any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.sc.Scan(append(p.prefix[:len(p.prefix):len(p.prefix)], dest...)...)
}
