// Package audit keeps the log of who changed what: each change of state made through the API
// (and so the web UI) or the CLI — a job canceled or retried, an external event sent, a sheet
// approved, a workflow saved — with the name of the token (or the local user) that made it and
// when, written in the change's own transaction ([Note]). Rows are only ever added.
// The log is a domain's table ([Register]) read and written through the store's DomainSQL.
package audit

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// DomainName is the audit log's domain: its migrations are applied under it.
const DomainName = "audit"

//go:embed migrations
var migrations embed.FS

// Entry is one change of state.
type Entry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	// JobID is the job changed; 0 for a change not of a job (a workflow saved).
	JobID  int64  `json:"job_id,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// maxDetail bounds an entry's detail (an event's name and its item or key, a workflow's name).
const maxDetail = 1000

// DB is what the log runs its statements on: a [store.Store], or a transaction's executor.
type DB interface {
	DomainSQL() store.DomainSQL
}

// Register creates the log's table (a domain's migrations).
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, DomainName, domain{})
}

type domain struct{}

func (domain) Migrations(d store.Dialect) []store.DomainMigration { return Migrations(d) }

// Migrations returns the log's migrations in the dialect.
func Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

func (domain) Apply(context.Context, store.DomainSQL, []engine.DomainWrite) error {
	return errors.New("the audit log takes no domain writes")
}

// Record adds e to the log; its ID is the log's, and a zero At is now.
func Record(ctx context.Context, db DB, e Entry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if len(e.Detail) > maxDetail {
		e.Detail = strings.ToValidUTF8(e.Detail[:maxDetail], "") + "…"
	}
	x := db.DomainSQL()
	_, err := x.Exec(ctx, store.Rebind(x.Dialect(), `INSERT INTO audit_events (at, who, action, job_id, detail) VALUES (?, ?, ?, ?, ?)`),
		e.At.UnixMicro(), e.Who, e.Action, e.JobID, e.Detail)
	if err != nil {
		return fmt.Errorf("record %s by %s in the audit log: %w", e.Action, e.Who, err)
	}
	return nil
}

// Note returns ctx carrying the entry of the change about to be made with it: the engine writes
// the entry in the change's own transaction ([engine.WithChangeNote]), so a change is never made
// without its entry, nor an entry written for a change that rolled back. What the engine knows
// of the change and the caller did not (a workflow's new version) ends the entry's detail.
func Note(ctx context.Context, e Entry) context.Context {
	return engine.WithChangeNote(ctx, func(ctx context.Context, x store.Executor, what string) error {
		if what != "" {
			e.Detail = strings.TrimSpace(e.Detail + " " + what)
		}
		return Record(ctx, x, e)
	})
}

// LocalUser names the person at this machine's terminal, for the changes made by the CLI on a
// local database: "local user NAME" (the login name, or the user id when it has none).
func LocalUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "local user " + u.Username
	}
	return fmt.Sprintf("local user %d", os.Getuid())
}

// ListParams selects entries, newest first.
type ListParams struct {
	// JobID keeps the entries of one job; 0: all.
	JobID int64
	// Before keeps the entries with ids below it, for paging; 0: from the newest.
	Before int64
	// Limit bounds the entries. Defaults to 100.
	Limit int
}

// List returns the entries p selects, newest first.
func List(ctx context.Context, db DB, p ListParams) ([]Entry, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	where, args := []string{"1 = 1"}, []any{}
	if p.JobID != 0 {
		where, args = append(where, "job_id = ?"), append(args, p.JobID)
	}
	if p.Before != 0 {
		where, args = append(where, "id < ?"), append(args, p.Before)
	}
	x := db.DomainSQL()
	rows, err := x.Query(ctx, store.Rebind(x.Dialect(), `SELECT id, at, who, action, job_id, detail FROM audit_events WHERE `+
		strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`), append(args, p.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Who, &e.Action, &e.JobID, &e.Detail); err != nil {
			return nil, fmt.Errorf("read the audit log: %w", err)
		}
		e.At = time.UnixMicro(at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	return out, nil
}
