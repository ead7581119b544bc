package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-project/sluice/internal/store"
)

// RowSource is a stream of rows to import, shaped like pgx.CopyFromSource: Next advances, Values
// returns the current row (one value per column), Err reports what ended the stream.
type RowSource interface {
	Next() bool
	Values() ([]any, error)
	Err() error
}

// NotEmptyError is returned by [DB.Import] and [DB.ImportCheck] when the schema already holds
// rows: an import only fills an empty schema, so it never mixes two installations' ids.
type NotEmptyError struct {
	Schema string
	// Has says what the schema holds, biggest concern first: "3 jobs, 12 items, 1 workflows".
	Has string
}

func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("schema %q already has %s", e.Schema, e.Has)
}

// Importer fills the tables of an empty schema inside the transaction of [DB.Import].
type Importer struct {
	tx     pgx.Tx
	schema string
	tables map[string][]column // table → its columns, in schema order
	done   map[string]bool
}

type column struct {
	name     string
	typ      string // information_schema data_type: bigint, integer, boolean, text, jsonb, …
	identity bool
	// defaulted says the column has a default: a source without it (a column only the
	// PostgreSQL dialect has, such as the outbox's txid) leaves it to the default.
	defaulted bool
}

// readColumns returns the columns of the schema's tables, by table.
func readColumns(ctx context.Context, tx pgx.Tx, schema string) (map[string][]column, error) {
	rows, err := tx.Query(ctx, `SELECT c.table_name, c.column_name, c.data_type, c.is_identity = 'YES',
		c.column_default IS NOT NULL
		FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = $1 AND t.table_type = 'BASE TABLE' AND c.table_name <> 'schema_migrations'
		ORDER BY c.table_name, c.ordinal_position`, schema)
	if err != nil {
		return nil, fmt.Errorf("import: read the schema: %w", err)
	}
	tables := map[string][]column{}
	var table string
	var c column
	if _, err := pgx.ForEachRow(rows, []any{&table, &c.name, &c.typ, &c.identity, &c.defaulted}, func() error {
		tables[table] = append(tables[table], c)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("import: read the schema: %w", err)
	}
	return tables, nil
}

// ImportCheck returns a [*NotEmptyError] when any of the schema's tables holds a row, and nil
// when all are empty. [DB.Import] checks again under its locks; this is for callers that have
// slow work to do (copying blobs) before they import and want to fail early.
func (db *DB) ImportCheck(ctx context.Context) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("import: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	imp, err := db.importer(ctx, tx)
	if err != nil {
		return err
	}
	return imp.checkEmpty(ctx)
}

// Import runs fn in one transaction to fill the migrated, empty schema from another store, then
// commits. It locks every table against writers (readers go on), refuses a schema holding any
// row with a [*NotEmptyError], and after fn returns checks that fn imported every table, sets
// each identity column's sequence past the largest imported id (so new rows get fresh ids) and
// analyzes the tables for the planner. Any error rolls everything back.
func (db *DB) Import(ctx context.Context, fn func(imp *Importer) error) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return mapErr(fmt.Errorf("import: begin: %w", err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	imp, err := db.importer(ctx, tx)
	if err != nil {
		return err
	}
	names := imp.names()
	var quoted []string
	for _, t := range names {
		quoted = append(quoted, imp.ident(t))
	}
	// EXCLUSIVE blocks every write (and another import) until commit but lets plain reads
	// through, so a scaled-out node started too early waits instead of writing ids that clash.
	if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(quoted, ", ")+" IN EXCLUSIVE MODE"); err != nil {
		return fmt.Errorf("import: lock tables: %w", err)
	}
	if err := imp.checkEmpty(ctx); err != nil {
		return err
	}
	if err := fn(imp); err != nil {
		return err
	}
	names = imp.names() // with the tables of domains fn created (CreateDomain)
	for _, t := range names {
		if !imp.done[t] {
			return fmt.Errorf("import: the source has no table %s", t)
		}
	}
	for t, fill := range derived {
		if fill == "" {
			continue
		}
		if _, err := tx.Exec(ctx, fill); err != nil {
			return fmt.Errorf("import: fill %s: %w", t, err)
		}
		names = append(names, t) // analyzed below
	}
	for _, t := range []string{"search_index", "search_chunks"} {
		if _, ok := imp.tables[t]; ok {
			names = append(names, t) // filled by fn (see derived), analyzed below
		}
	}
	for _, t := range names {
		for _, c := range imp.tables[t] {
			if !c.identity {
				continue
			}
			// setval(seq, max, true) makes the next id max+1; on an empty table,
			// setval(seq, 1, false) makes it 1, as on a fresh schema.
			q := fmt.Sprintf(`SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(max(%[1]s), 1), max(%[1]s) IS NOT NULL) FROM %[2]s`,
				pgx.Identifier{c.name}.Sanitize(), imp.ident(t))
			if _, err := tx.Exec(ctx, q, imp.ident(t), c.name); err != nil {
				return fmt.Errorf("import: set the id sequence of %s: %w", t, err)
			}
		}
		if _, err := tx.Exec(ctx, "ANALYZE "+imp.ident(t)); err != nil {
			return fmt.Errorf("import: analyze %s: %w", t, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return mapErr(fmt.Errorf("import: commit: %w", err))
	}
	return nil
}

func (db *DB) importer(ctx context.Context, tx pgx.Tx) (*Importer, error) {
	tables, err := readColumns(ctx, tx, db.schema)
	if err != nil {
		return nil, err
	}
	imp := &Importer{tx: tx, schema: db.schema, tables: tables, done: map[string]bool{}}
	if len(imp.tables) == 0 {
		return nil, fmt.Errorf("import: schema %q has no tables: migrate it first", db.schema)
	}
	return imp, nil
}

// derived are the tables an import does not copy but fills from the others, with the
// statements that fill them (none: the table starts empty).
var derived = map[string]string{
	"open_items": `INSERT INTO open_items (id, job_id, parent_id, state) SELECT id, job_id, parent_id, state FROM items WHERE state <> 'ingested'`,
	// Records of leases held by this cluster's processes: an imported installation has none.
	"held_leases": "",
	// The full-text index is not copied (SQLite's is an FTS5 table): fn rebuilds it from the
	// documents through [Importer.DomainSQL] (see docsearch.AddAllMissing).
	"search_index":  "",
	"search_chunks": "",
}

// names lists the tables to copy, jobs first (what a not-empty error leads with), then by name.
func (imp *Importer) names() []string {
	var out []string
	for t := range imp.tables {
		if _, ok := derived[t]; !ok {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if (a == "jobs") != (b == "jobs") {
			if a == "jobs" {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

func (imp *Importer) ident(table string) string {
	return pgx.Identifier{imp.schema, table}.Sanitize()
}

func (imp *Importer) checkEmpty(ctx context.Context) error {
	var has []string
	for _, t := range imp.names() {
		var n int64
		if err := imp.tx.QueryRow(ctx, "SELECT count(*) FROM "+imp.ident(t)).Scan(&n); err != nil {
			return fmt.Errorf("import: count %s: %w", t, err)
		}
		if n > 0 {
			noun := t // tables are named in the plural
			switch {
			case t == "cache" && n == 1:
				noun = "cache entry"
			case t == "cache":
				noun = "cache entries"
			case n == 1:
				noun = strings.TrimSuffix(t, "s")
			}
			has = append(has, fmt.Sprintf("%d %s", n, noun))
		}
	}
	if len(has) > 0 {
		return &NotEmptyError{Schema: imp.schema, Has: strings.Join(has, ", ")}
	}
	return nil
}

// Table copies every row of src into the table with COPY and returns how many it wrote. columns
// names src's values; they must be exactly the table's columns, in any order, so a column one
// store has and the other lacks fails the import instead of losing data. Each value is
// converted to its column's type from what an embedded (SQLite) store holds: integers to
// booleans (0 is false), integers to floats, strings to bytea and jsonb, bytes to text. A value
// that cannot be converted, or that Postgres rejects (invalid UTF-8, a NUL byte in text),
// fails the import with the table, the row number and the column.
func (imp *Importer) Table(ctx context.Context, table string, columns []string, src RowSource) (int64, error) {
	cols, ok := imp.tables[table]
	if !ok {
		return 0, fmt.Errorf("import %s: the target has no such table", table)
	}
	if imp.done[table] {
		return 0, fmt.Errorf("import %s: imported twice", table)
	}
	imp.done[table] = true
	byName := map[string]column{}
	for _, c := range cols {
		byName[c.name] = c
	}
	conv := make([]func(any) (any, error), len(columns))
	for i, name := range columns {
		c, ok := byName[name]
		if !ok {
			return 0, fmt.Errorf("import %s: the source has a column %s the target lacks", table, name)
		}
		delete(byName, name)
		f, err := converter(c.typ)
		if err != nil {
			return 0, fmt.Errorf("import %s.%s: %w", table, name, err)
		}
		conv[i] = f
	}
	for name, c := range byName {
		if c.defaulted {
			continue
		}
		return 0, fmt.Errorf("import %s: the target has a column %s the source lacks", table, name)
	}
	cs := &convertSource{src: src, conv: conv, columns: columns, out: make([]any, len(columns))}
	n, err := imp.tx.CopyFrom(ctx, pgx.Identifier{imp.schema, table}, columns, cs)
	if err != nil {
		if cs.err != nil {
			err = cs.err
		}
		// Where says which row and column Postgres rejected: "COPY items, line 7, column text".
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Where != "" {
			return n, fmt.Errorf("import %s (%s): %w", table, pe.Where, err)
		}
		return n, fmt.Errorf("import %s: %w", table, err)
	}
	return n, nil
}

// convertSource converts each row of src for COPY.
type convertSource struct {
	src     RowSource
	conv    []func(any) (any, error)
	columns []string
	out     []any
	row     int64
	err     error
}

func (s *convertSource) Next() bool { s.row++; return s.src.Next() }

func (s *convertSource) Values() ([]any, error) {
	in, err := s.src.Values()
	if err != nil {
		return nil, err
	}
	if len(in) != len(s.conv) {
		s.err = fmt.Errorf("row %d has %d values for %d columns", s.row, len(in), len(s.conv))
		return nil, s.err
	}
	for i, v := range in {
		if v == nil {
			s.out[i] = nil
			continue
		}
		if s.out[i], err = s.conv[i](v); err != nil {
			s.err = fmt.Errorf("row %d, column %s: %w", s.row, s.columns[i], err)
			return nil, s.err
		}
	}
	return s.out, nil
}

func (s *convertSource) Err() error { return s.src.Err() }

// converter returns the conversion of an embedded store's value to a column of type typ.
func converter(typ string) (func(any) (any, error), error) {
	switch typ {
	case "bigint", "integer", "smallint":
		return func(v any) (any, error) {
			switch v := v.(type) {
			case int64:
				return v, nil
			case float64:
				if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
					return int64(v), nil
				}
			}
			return nil, fmt.Errorf("want an integer, got %T %v", v, v)
		}, nil
	case "boolean":
		return func(v any) (any, error) {
			switch v := v.(type) {
			case int64:
				return v != 0, nil
			case bool:
				return v, nil
			}
			return nil, fmt.Errorf("want a boolean (0 or 1), got %T %v", v, v)
		}, nil
	case "double precision", "real":
		return func(v any) (any, error) {
			switch v := v.(type) {
			case float64:
				return v, nil
			case int64:
				return float64(v), nil
			}
			return nil, fmt.Errorf("want a number, got %T %v", v, v)
		}, nil
	case "text", "jsonb":
		// pgx sends a string to a jsonb column as JSON text, not as a JSON string literal.
		return func(v any) (any, error) {
			switch v := v.(type) {
			case string:
				return v, nil
			case []byte:
				return string(v), nil
			}
			return nil, fmt.Errorf("want text, got %T %v", v, v)
		}, nil
	case "timestamp with time zone":
		// An embedded store keeps a time as RFC 3339 text (in UTC).
		return func(v any) (any, error) {
			var s string
			switch v := v.(type) {
			case string:
				s = v
			case []byte:
				s = string(v)
			default:
				return nil, fmt.Errorf("want an RFC 3339 time, got %T %v", v, v)
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, fmt.Errorf("want an RFC 3339 time: %w", err)
			}
			return t, nil
		}, nil
	case "bytea":
		return func(v any) (any, error) {
			switch v := v.(type) {
			case []byte:
				return v, nil
			case string:
				return []byte(v), nil
			}
			return nil, fmt.Errorf("want bytes, got %T %v", v, v)
		}, nil
	}
	return nil, fmt.Errorf("no conversion to column type %s", typ)
}

// DomainSQL returns the import's transaction as a domain's statements run in it: for a domain
// to fill its tables from the rows imported before (the full-text index from the documents).
func (imp *Importer) DomainSQL() store.DomainSQL {
	return domainSQL{&queries{c: imp.tx, inTx: true}}
}

// HasTable reports whether the target has the table.
func (imp *Importer) HasTable(name string) bool {
	_, ok := imp.tables[name]
	return ok
}

// CreateDomain creates a domain's tables in the import's transaction by running its
// migrations, then empties them, so that the source's rows — the domain's and its
// domain_migrations records — are imported like any other table. A domain whose tables exist
// already must not be created again: see [Importer.HasTable].
func (imp *Importer) CreateDomain(ctx context.Context, ms []store.DomainMigration) error {
	for _, m := range ms {
		if _, err := imp.tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("import: create domain tables (%s): %w", m.Name, err)
		}
	}
	tables, err := readColumns(ctx, imp.tx, imp.schema)
	if err != nil {
		return err
	}
	for t := range tables {
		if _, old := imp.tables[t]; old {
			continue
		}
		if _, err := imp.tx.Exec(ctx, "TRUNCATE "+imp.ident(t)); err != nil {
			return fmt.Errorf("import: empty %s: %w", t, err)
		}
	}
	imp.tables = tables
	return nil
}
