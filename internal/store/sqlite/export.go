package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-project/sluice/internal/deflate"
)

// ExportTable is one table being read by [DB.Export]: its name, its column names as the schema
// declares them, and a cursor over its rows. Its Next, Values and Err methods have the shape of
// pgx's CopyFromSource, so another driver can stream it without this package knowing it.
//
// Values are SQLite's storage classes as the driver returns them, untranslated: int64 (INTEGER
// columns, which also hold booleans and microsecond times), float64 (REAL), string (TEXT, which
// also holds JSON and the output and cache values), []byte (a BLOB) and nil (NULL). The one
// exception is the text of items, which the database may keep deflated (see
// [deflate.PackText]): it is exported as the text, a string, as every other driver keeps it.
type ExportTable struct {
	Name    string
	Columns []string

	rows    *sql.Rows
	textCol int // the index of items' text column, or -1
	vals    []any
	ptrs    []any
	err     error
	n       int64
}

// Next advances to the next row; it returns false at the end or on an error (see Err).
func (t *ExportTable) Next() bool {
	if t.err != nil || !t.rows.Next() {
		return false
	}
	for i := range t.vals {
		t.vals[i] = nil
	}
	if err := t.rows.Scan(t.ptrs...); err != nil {
		t.err = fmt.Errorf("read %s: %w", t.Name, err)
		return false
	}
	if t.textCol >= 0 {
		if b, ok := t.vals[t.textCol].([]byte); ok {
			s, err := deflate.UnpackText(b)
			if err != nil {
				t.err = fmt.Errorf("read %s: row %d: %w", t.Name, t.n+1, err)
				return false
			}
			t.vals[t.textCol] = s
		}
	}
	t.n++
	return true
}

// Values returns the current row, one value per column. The slice is reused by the next call
// of Next.
func (t *ExportTable) Values() ([]any, error) { return t.vals, t.err }

// Err returns the error that ended the rows, if any.
func (t *ExportTable) Err() error {
	if t.err != nil {
		return t.err
	}
	if err := t.rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", t.Name, err)
	}
	return nil
}

// Rows returns how many rows Next has returned so far.
func (t *ExportTable) Rows() int64 { return t.n }

// Export calls fn once per table of the database (every table but schema_migrations, the records
// of held leases (held_leases: an imported installation has none, as on Postgres) and the
// full-text index search_index with its shadow tables, which the target builds itself; in name
// order) to read its rows, for copying an installation to another store. It reads them all in
// one IMMEDIATE transaction, so they form one consistent snapshot and no other process (say, a
// `sluice event fire`) can write until Export returns. Export stops at fn's first error and
// returns it. The table is valid only during fn.
func (db *DB) Export(ctx context.Context, fn func(t *ExportTable) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(fmt.Errorf("export: begin: %w", err))
	}
	// Nothing is written: rolling back just ends the snapshot and frees the write lock.
	defer tx.Rollback() //nolint:errcheck
	names, err := exportTables(ctx, tx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := exportTable(ctx, tx, name, fn); err != nil {
			return err
		}
	}
	return nil
}

func exportTables(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name NOT IN ('schema_migrations', 'held_leases') AND name NOT LIKE 'search\_index%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("export: list tables: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("export: list tables: %w", err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export: list tables: %w", err)
	}
	return names, nil
}

func exportTable(ctx context.Context, tx *sql.Tx, name string, fn func(t *ExportTable) error) error {
	// Rows come in rowid order, or primary-key order for WITHOUT ROWID tables: the order they
	// are stored in, which is also the cheapest to read.
	rows, err := tx.QueryContext(ctx, `SELECT * FROM "`+strings.ReplaceAll(name, `"`, `""`)+`"`)
	if err != nil {
		return fmt.Errorf("export %s: %w", name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return fmt.Errorf("export %s: %w", name, err)
	}
	t := &ExportTable{Name: name, Columns: cols, rows: rows, textCol: -1, vals: make([]any, len(cols)), ptrs: make([]any, len(cols))}
	if name == "items" {
		t.textCol = slices.Index(cols, "text")
	}
	for i := range t.vals {
		t.ptrs[i] = &t.vals[i]
	}
	if err := fn(t); err != nil {
		return err
	}
	return t.Err()
}
