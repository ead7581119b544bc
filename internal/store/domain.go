package store

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Dialect names the SQL a driver speaks. Only a domain's own statements ([DomainSQL]) need it:
// a domain brings its tables and queries per dialect, as a driver does.
type Dialect string

// The dialects of the drivers.
const (
	DialectSQLite   Dialect = "sqlite"
	DialectPostgres Dialect = "postgres"
)

// MustDomainMigrations returns the migrations of dialect d in dir/d of fsys (see
// [DomainMigrationsFS]), for a domain's Migrations method; it panics when there are none, a
// mistake in the build.
func MustDomainMigrations(fsys fs.FS, dir string, d Dialect) []DomainMigration {
	ms, err := DomainMigrationsFS(fsys, path.Join(dir, string(d)))
	if err != nil || len(ms) == 0 {
		panic(fmt.Sprintf("no domain migrations for %s in %s: %v", d, dir, err))
	}
	return ms
}

// Rebind turns the ? placeholders of a domain's statement into the dialect's ($1, $2, … on
// Postgres), so that a statement the two dialects share is written once. A ? inside a string
// literal is replaced too: keep literals out of shared statements.
func Rebind(d Dialect, q string) string {
	if d != DialectPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// DomainMigration is one schema change of a domain's own tables. A domain numbers its
// migrations from 1, the same numbers in every dialect; each is applied once per store, in a
// transaction of its own, after the core migrations (see [Store.MigrateDomain]).
type DomainMigration struct {
	Version int
	Name    string
	SQL     string
}

// DomainSQL runs a domain's own statements in the driver's dialect, in the transaction of the
// Executor that returned it (or in autocommit from the Store). Placeholders are the dialect's:
// ? on SQLite, $1 on Postgres. Errors are mapped as the driver's own (ErrConflict, ErrRetry).
type DomainSQL interface {
	Dialect() Dialect
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// ExecLater runs a write whose result is only its error, which what names. In a transaction
	// on PostgreSQL it goes out with the transaction's next statement or its commit (one round
	// trip for both), and its error is returned there; its arguments must not change after the
	// call.
	ExecLater(ctx context.Context, what, query string, args ...any) error
	// Query runs a query; the rows must be closed.
	Query(ctx context.Context, query string, args ...any) (DomainRows, error)
}

// DomainRows are the rows of [DomainSQL.Query].
type DomainRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// DomainMigrationsFS reads a domain's migrations from the files NNN_name.up.sql in dir of fsys
// (an embed.FS, one directory per dialect), in order of their numbers.
func DomainMigrationsFS(fsys fs.FS, dir string) ([]DomainMigration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.up.sql"))
	if err != nil {
		return nil, err
	}
	var out []DomainMigration
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".up.sql")
		num, name, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("domain migration %s: bad number", n)
		}
		body, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, DomainMigration{Version: v, Name: name, SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b DomainMigration) int { return a.Version - b.Version })
	return out, nil
}
