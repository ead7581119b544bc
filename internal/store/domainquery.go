package store

import (
	"context"
	"strings"
)

// DomainQuery is one statement of a domain's typed store, in each dialect. A domain keeps its
// statements as DomainQuery values next to its store type, the SQLite and PostgreSQL forms side
// by side, so that no dialect switch lives in its code (as a driver keeps its own SQL).
type DomainQuery struct {
	SQLite   string
	Postgres string
}

// SharedQuery returns the [DomainQuery] of a statement both dialects speak, written with ?
// placeholders (rebound for PostgreSQL with [Rebind]): keep ? out of its string literals.
func SharedQuery(q string) DomainQuery {
	return DomainQuery{SQLite: q, Postgres: Rebind(DialectPostgres, q)}
}

// In returns the statement in dialect d.
func (q DomainQuery) In(d Dialect) string {
	if d == DialectPostgres {
		return q.Postgres
	}
	return q.SQLite
}

// Exec runs the statement on x in x's dialect and returns how many rows it changed.
func (q DomainQuery) Exec(ctx context.Context, x DomainSQL, args ...any) (int64, error) {
	return x.Exec(ctx, q.In(x.Dialect()), args...)
}

// Each runs the read on x in x's dialect and calls scan once per row, in order; the first
// error scan returns ends the read.
func (q DomainQuery) Each(ctx context.Context, x DomainSQL, scan func(r DomainRows) error, args ...any) error {
	rows, err := x.Query(ctx, q.In(x.Dialect()), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Placeholders returns n ? placeholders separated by commas, for an IN list of a statement
// made with [SharedQuery].
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
