package fleet

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// DomainDB is what the register's typed store runs its statements on: a [store.Store], in
// autocommit, or a transaction's [store.Executor].
type DomainDB interface {
	DomainSQL() store.DomainSQL
}

// memberStore is the register's typed store: the statements of fleet_members in the dialect of
// x, run on x.
type memberStore struct {
	x store.DomainSQL
	q *memberQueries
}

func membersIn(db DomainDB) memberStore {
	x := db.DomainSQL()
	return memberStore{x: x, q: memberSQL[x.Dialect()]}
}

// memberQueries are fleet_members' statements in one dialect.
type memberQueries struct {
	put, deleteVia, deleteOwn, deleteStale, list string
}

// memberSQL holds fleet_members' statements per dialect; they differ only in their placeholders
// (? on SQLite, $n on PostgreSQL).
var memberSQL = map[store.Dialect]*memberQueries{
	store.DialectSQLite:   memberStatements(store.DialectSQLite),
	store.DialectPostgres: memberStatements(store.DialectPostgres),
}

func memberStatements(d store.Dialect) *memberQueries {
	return &memberQueries{
		put: store.Rebind(d, `INSERT INTO fleet_members (id, kind, name, via, actions, in_flight, polling, started_at, seen_at, stale_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, name = excluded.name, via = excluded.via,
		actions = excluded.actions, in_flight = excluded.in_flight, polling = excluded.polling,
		seen_at = excluded.seen_at, stale_at = excluded.stale_at`),
		deleteVia:   store.Rebind(d, `DELETE FROM fleet_members WHERE via = ?`),
		deleteOwn:   store.Rebind(d, `DELETE FROM fleet_members WHERE id = ? OR via = ?`),
		deleteStale: store.Rebind(d, `DELETE FROM fleet_members WHERE stale_at < ?`),
		list:        `SELECT id, kind, name, via, actions, in_flight, polling, started_at, seen_at, stale_at FROM fleet_members`,
	}
}

// memberRow is a row of fleet_members.
type memberRow struct {
	id, kind, name, via    string
	actions                []string
	inFlight, polling      int
	started, seen, staleAt time.Time
}

// put writes a member's row; a row of the same id is replaced, but for its start time.
func (s memberStore) put(ctx context.Context, m memberRow) error {
	actions := m.actions
	if actions == nil {
		actions = []string{}
	}
	b, _ := json.Marshal(actions)
	var started int64
	if !m.started.IsZero() {
		started = m.started.UnixNano()
	}
	_, err := s.x.Exec(ctx, s.q.put, m.id, m.kind, m.name, m.via, string(b), m.inFlight, m.polling,
		started, m.seen.UnixNano(), m.staleAt.UnixNano())
	return err
}

// deleteVia deletes the rows of the remote workers of process id.
func (s memberStore) deleteVia(ctx context.Context, id string) error {
	_, err := s.x.Exec(ctx, s.q.deleteVia, id)
	return err
}

// deleteOwn deletes the row of process id and those of its remote workers.
func (s memberStore) deleteOwn(ctx context.Context, id string) error {
	_, err := s.x.Exec(ctx, s.q.deleteOwn, id, id)
	return err
}

// deleteStale deletes the rows stale since before t.
func (s memberStore) deleteStale(ctx context.Context, t time.Time) error {
	_, err := s.x.Exec(ctx, s.q.deleteStale, t.UnixNano())
	return err
}

// list returns every row, in no order.
func (s memberStore) list(ctx context.Context) ([]memberRow, error) {
	rs, err := s.x.Query(ctx, s.q.list)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []memberRow
	for rs.Next() {
		var m memberRow
		var actions string
		var started, seen, staleAt int64
		if err := rs.Scan(&m.id, &m.kind, &m.name, &m.via, &actions, &m.inFlight, &m.polling, &started, &seen, &staleAt); err != nil {
			return nil, err
		}
		_ = json.Unmarshal([]byte(actions), &m.actions)
		if started > 0 {
			m.started = time.Unix(0, started).UTC()
		}
		m.seen, m.staleAt = time.Unix(0, seen).UTC(), time.Unix(0, staleAt).UTC()
		out = append(out, m)
	}
	return out, rs.Err()
}
