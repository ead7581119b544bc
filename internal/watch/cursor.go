package watch

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// DomainName is the name the watchers' table is registered under.
const DomainName = "watch"

//go:embed migrations
var migrations embed.FS

// Register creates the watchers' table (a domain's migrations) through the engine.
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, DomainName, domain{})
}

// domain gives the cursors' table to the engine's domain registry; it takes no writes.
type domain struct{}

func (domain) Migrations(d store.Dialect) []store.DomainMigration { return Migrations(d) }

// Migrations returns the cursors' table's migrations in the dialect (`sluice migrate copy`
// creates it on the target).
func Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

func (domain) Apply(context.Context, store.DomainSQL, []engine.DomainWrite) error {
	return errors.New("the watchers' cursors take no domain writes")
}

// DomainDB is what the cursors are read and written on: a [store.Store].
type DomainDB interface {
	DomainSQL() store.DomainSQL
}

// cursorSQL are the statements of watch_cursors, with ? placeholders.
const (
	cursorGet = `SELECT after_key FROM watch_cursors WHERE location = ?`
	// cursorPut only moves a cursor forward: two watchers of one prefix never move it back.
	cursorPut = `INSERT INTO watch_cursors (location, after_key, updated_at) VALUES (?, ?, ?)
	ON CONFLICT (location) DO UPDATE SET after_key = excluded.after_key, updated_at = excluded.updated_at
	WHERE watch_cursors.after_key < excluded.after_key`
)

// readCursor returns the stored cursor of location, "" when there is none.
func readCursor(ctx context.Context, db DomainDB, location string) (string, error) {
	x := db.DomainSQL()
	rs, err := x.Query(ctx, store.Rebind(x.Dialect(), cursorGet), location)
	if err != nil {
		return "", fmt.Errorf("read the cursor of %s: %w", location, err)
	}
	defer rs.Close()
	var after string
	if rs.Next() {
		if err := rs.Scan(&after); err != nil {
			return "", fmt.Errorf("read the cursor of %s: %w", location, err)
		}
	}
	return after, rs.Err()
}

// writeCursor stores location's cursor unless the stored one is further.
func writeCursor(ctx context.Context, db DomainDB, location, after string, now time.Time) error {
	x := db.DomainSQL()
	if _, err := x.Exec(ctx, store.Rebind(x.Dialect(), cursorPut), location, after, now.UnixNano()); err != nil {
		return fmt.Errorf("write the cursor of %s: %w", location, err)
	}
	return nil
}
