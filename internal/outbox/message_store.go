package outbox

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/sluice-project/sluice/internal/sink"
	"github.com/sluice-project/sluice/internal/store"
)

// domainDB is what the outbox's typed store runs its statements on: a [store.Store], in
// autocommit, or a transaction's [store.Executor].
type domainDB interface {
	DomainSQL() store.DomainSQL
}

// messageStore is the outbox's typed store: the statements of outbox_installation,
// outbox_messages and outbox_relays in the dialect of x, run on x.
type messageStore struct {
	x store.DomainSQL
	q *outboxQueries
}

func messagesIn(db domainDB) messageStore { return messagesOn(db.DomainSQL()) }

func messagesOn(x store.DomainSQL) messageStore {
	return messageStore{x: x, q: outboxSQL[x.Dialect()]}
}

// outboxQueries are the outbox's statements in one dialect. A statement on a list of ids or
// messages is built per call from its parts (of the dialect) and rebound.
type outboxQueries struct {
	installation, claim, release, pending, counts, relays, failed, settled string
}

// outboxSQL holds the outbox's statements per dialect. They differ in their placeholders (? on
// SQLite, $n on PostgreSQL), and in how pending messages are read in commit order.
//
// SQLite commits one transaction at a time, so ids follow commit order. PostgreSQL takes
// identity values in one order and commits them in another: its rows are read only once no
// transaction that could still commit an earlier one is open (their txid is below the
// snapshot's xmin), ordered by transaction, so a row that commits late is never overtaken by
// one sent before it (migration 002).
var outboxSQL = map[store.Dialect]*outboxQueries{
	store.DialectSQLite: outboxStatements(store.DialectSQLite, `SELECT id, subject, msg_id, attributes, body FROM outbox_messages
		WHERE sink = ? ORDER BY id LIMIT ?`),
	store.DialectPostgres: outboxStatements(store.DialectPostgres, `SELECT id, subject, msg_id, attributes, body FROM outbox_messages
		WHERE sink = $1 AND txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint ORDER BY txid, id LIMIT $2`),
}

func outboxStatements(d store.Dialect, pending string) *outboxQueries {
	return &outboxQueries{
		installation: `SELECT id FROM outbox_installation`,
		claim: store.Rebind(d, `INSERT INTO outbox_relays (sink, owner, lease_until) VALUES (?, ?, ?)
		ON CONFLICT (sink) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
		WHERE outbox_relays.owner = excluded.owner OR outbox_relays.lease_until < ?`),
		release: store.Rebind(d, `UPDATE outbox_relays SET lease_until = 0 WHERE sink = ? AND owner = ?`),
		pending: pending,
		counts:  `SELECT sink, count(*), min(created_at) FROM outbox_messages GROUP BY sink`,
		relays:  `SELECT sink, lease_until, delivered, failures, dropped, last_error, last_error_at FROM outbox_relays`,
		failed: store.Rebind(d, `UPDATE outbox_relays SET failures = failures + ?, last_error = ?, last_error_at = ?
				WHERE sink = ?`),
		settled: store.Rebind(d, `UPDATE outbox_relays SET delivered = delivered + ?, dropped = dropped + ? WHERE sink = ?`),
	}
}

// installation returns the installation id, "" when there is none.
func (s messageStore) installation(ctx context.Context) (string, error) {
	rows, err := s.x.Query(ctx, s.q.installation)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var id string
	if rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return "", err
		}
	}
	return id, rows.Err()
}

// newMessage is a row of outbox_messages to insert.
type newMessage struct {
	sink      string
	msg       sink.Message
	createdAt int64
}

// insert inserts the messages, in one statement; a message whose id is already there is not
// inserted again.
func (s messageStore) insert(ctx context.Context, ms []newMessage) error {
	var q strings.Builder
	q.WriteString(`INSERT INTO outbox_messages (sink, subject, msg_id, attributes, body, created_at) VALUES `)
	args := make([]any, 0, 6*len(ms))
	for i, m := range ms {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?)")
		attrs, _ := json.Marshal(m.msg.Attributes)
		args = append(args, m.sink, m.msg.Subject, m.msg.ID, string(attrs), string(m.msg.Body), m.createdAt)
	}
	q.WriteString(` ON CONFLICT (msg_id) DO NOTHING`)
	_, err := s.x.Exec(ctx, store.Rebind(s.x.Dialect(), q.String()), args...)
	return err
}

// claim takes or renews the sink's lease for owner until until, from an owner whose lease ended
// before cutoff; it reports whether owner holds it.
func (s messageStore) claim(ctx context.Context, name, owner string, until, cutoff int64) (bool, error) {
	n, err := s.x.Exec(ctx, s.q.claim, name, owner, until, cutoff)
	return n > 0, err
}

// release ends owner's lease on the sink.
func (s messageStore) release(ctx context.Context, name, owner string) error {
	_, err := s.x.Exec(ctx, s.q.release, name, owner)
	return err
}

// pending reads at most limit of the sink's undelivered messages, oldest first (see outboxSQL).
func (s messageStore) pending(ctx context.Context, name string, limit int) ([]row, error) {
	rs, err := s.x.Query(ctx, s.q.pending, name, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		var attrs, body string
		if err := rs.Scan(&r.id, &r.msg.Subject, &r.msg.ID, &attrs, &body); err != nil {
			return nil, err
		}
		_ = json.Unmarshal([]byte(attrs), &r.msg.Attributes)
		r.msg.Body = []byte(body)
		out = append(out, r)
	}
	return out, rs.Err()
}

// delete deletes the messages of the ids.
func (s messageStore) delete(ctx context.Context, ids []int64) error {
	_, err := s.x.Exec(ctx, store.Rebind(s.x.Dialect(), `DELETE FROM outbox_messages WHERE id IN (`+marks(len(ids))+`)`), anys(ids)...)
	return err
}

// failed counts a failed delivery of the messages of the ids, on them and on the sink's relay
// row.
func (s messageStore) failed(ctx context.Context, name string, ids []int64, msg string, at int64) error {
	args := append([]any{msg}, anys(ids)...)
	if _, err := s.x.Exec(ctx, store.Rebind(s.x.Dialect(), `UPDATE outbox_messages SET attempts = attempts + 1, last_error = ?
				WHERE id IN (`+marks(len(ids))+`)`), args...); err != nil {
		return err
	}
	_, err := s.x.Exec(ctx, s.q.failed, len(ids), msg, at, name)
	return err
}

// settled adds to the sink's counts of delivered and dropped messages.
func (s messageStore) settled(ctx context.Context, name string, delivered, dropped int64) error {
	_, err := s.x.Exec(ctx, s.q.settled, delivered, dropped, name)
	return err
}

// pendingCount is a sink's number of undelivered messages and the oldest one's creation time.
type pendingCount struct {
	sink      string
	n, oldest int64
}

// counts returns the pending counts of the sinks that have messages.
func (s messageStore) counts(ctx context.Context) ([]pendingCount, error) {
	rs, err := s.x.Query(ctx, s.q.counts)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []pendingCount
	for rs.Next() {
		var c pendingCount
		if err := rs.Scan(&c.sink, &c.n, &c.oldest); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rs.Err()
}

// relayRow is a row of outbox_relays.
type relayRow struct {
	sink, lastErr                                  string
	until, delivered, failures, dropped, lastErrAt int64
}

// relays returns the sinks' relay rows.
func (s messageStore) relays(ctx context.Context) ([]relayRow, error) {
	rs, err := s.x.Query(ctx, s.q.relays)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []relayRow
	for rs.Next() {
		var r relayRow
		if err := rs.Scan(&r.sink, &r.until, &r.delivered, &r.failures, &r.dropped, &r.lastErr, &r.lastErrAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

func marks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func anys(v []int64) []any {
	out := make([]any, len(v))
	for i, id := range v {
		out[i] = id
	}
	return out
}
