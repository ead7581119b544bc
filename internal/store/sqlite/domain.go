package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// DomainSQL implements store.Executor: a domain's statements on the writer (in the
// transaction, if any) and its queries there too inside a transaction, else on the read pool.
func (q *queries) DomainSQL() store.DomainSQL { return domainSQL{q} }

type domainSQL struct{ q *queries }

func (d domainSQL) Dialect() store.Dialect { return store.DialectSQLite }

// maxDomainStmts bounds the domains' statements kept prepared. A domain's SQL is a few constant
// texts, run once or more per item (the search index's insert per document: parsing it each time
// was a fifth of its cost); one that builds its text per call (an IN list of any length) must
// not grow the cache without end: past the bound, new texts run unprepared.
const maxDomainStmts = 256

// cached reports whether query may run through the store's prepared statements.
func (d domainSQL) cached(query string) bool {
	db := d.q.db
	if _, ok := db.domainSeen.Load(query); ok {
		return true
	}
	if db.domainN.Load() >= maxDomainStmts {
		return false
	}
	if _, loaded := db.domainSeen.LoadOrStore(query, true); !loaded {
		db.domainN.Add(1)
	}
	return true
}

func (d domainSQL) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if d.cached(query) {
		res, err = d.q.exec(ctx, query, args...)
	} else {
		res, err = d.q.w.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, mapErr(err)
	}
	return res.RowsAffected()
}

// ExecLater is Exec: SQLite's statements cost no round trip.
func (d domainSQL) ExecLater(ctx context.Context, what, query string, args ...any) error {
	if _, err := d.Exec(ctx, query, args...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (d domainSQL) Query(ctx context.Context, query string, args ...any) (store.DomainRows, error) {
	var rows *sql.Rows
	var err error
	switch {
	case !d.cached(query):
		db := d.q.r
		if d.q.tx != nil {
			db = d.q.w
		}
		rows, err = db.QueryContext(ctx, query, args...)
	case d.q.tx != nil:
		rows, err = d.q.wquery(ctx, query, args...)
	default:
		var st *sql.Stmt
		if st, err = d.q.rprepared(ctx, query); err == nil {
			rows, err = st.QueryContext(ctx, args...)
		}
	}
	if err != nil {
		return nil, mapErr(err)
	}
	return domainRows{rows}, nil
}

type domainRows struct{ *sql.Rows }

func (r domainRows) Close() { _ = r.Rows.Close() }

// MigrateDomain implements store.Store. The one writer serialises it with everything else.
func (db *DB) MigrateDomain(ctx context.Context, domain string, ms []store.DomainMigration) ([]int, error) {
	var done []int
	for _, m := range ms {
		applied := false
		err := db.InTx(ctx, func(x store.Executor) error {
			q := x.(*queries)
			var n int
			if err := q.w.QueryRowContext(ctx, `SELECT count(*) FROM domain_migrations WHERE domain = ? AND version = ?`, domain, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := q.w.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := q.w.ExecContext(ctx, `INSERT INTO domain_migrations (domain, version, name, applied_at) VALUES (?, ?, ?, ?)`,
				domain, m.Version, m.Name, time.Now().UTC().UnixMicro())
			applied = err == nil
			return err
		})
		if err != nil {
			return done, fmt.Errorf("domain %s migration %d %s: %w", domain, m.Version, m.Name, err)
		}
		if applied {
			done = append(done, m.Version)
		}
	}
	return done, nil
}
