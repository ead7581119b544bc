// Package testdomain is a domain for tests of domain writes ([engine.Domain]): one table,
// testdomain_rows, made by its own migrations on each dialect, holding a row per (item, step,
// key) written with ON CONFLICT DO NOTHING, with the task and attempt that wrote it so that a
// test can tell which attempt's write was committed.
package testdomain

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// Name is the name the domain registers under.
const Name = "test"

// FailKey is a key whose write the applier refuses, as a domain whose write cannot be applied
// would: the task that makes it fails.
const FailKey = "fail"

//go:embed migrations
var migrations embed.FS

// Domain is the test domain. The zero value is ready to register.
type Domain struct{}

// Register registers the domain with the engine and applies its migrations.
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, Name, Domain{})
}

// Migrations implements [engine.Domain].
func (Domain) Migrations(d store.Dialect) []store.DomainMigration {
	ms, err := store.DomainMigrationsFS(migrations, "migrations/"+string(d))
	if err != nil || len(ms) == 0 {
		panic(fmt.Sprintf("testdomain: no migrations for %s: %v", d, err)) // a build mistake
	}
	return ms
}

var insert = map[store.Dialect]string{
	store.DialectSQLite: `INSERT INTO testdomain_rows (item_id, step, key, job_id, task_id, attempt, payload) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (item_id, step, key) DO NOTHING`,
	store.DialectPostgres: `INSERT INTO testdomain_rows (item_id, step, key, job_id, task_id, attempt, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (item_id, step, key) DO NOTHING`,
}

// Apply implements [engine.Domain]: one keyed insert per write.
func (Domain) Apply(ctx context.Context, x store.DomainSQL, ws []engine.DomainWrite) error {
	q := insert[x.Dialect()]
	for _, w := range ws {
		if w.Key == FailKey {
			return fmt.Errorf("testdomain refuses key %q", w.Key)
		}
		if _, err := x.Exec(ctx, q, w.ItemID, w.Step, w.Key, w.JobID, w.TaskID, w.Attempt, string(w.Payload)); err != nil {
			return fmt.Errorf("insert %q: %w", w.Key, err)
		}
	}
	return nil
}

// Row is one row of the domain.
type Row struct {
	ItemID  int64
	Step    string
	Key     string
	JobID   int64
	TaskID  int64
	Attempt int
	Payload string
}

var (
	cols = `SELECT item_id, step, key, job_id, task_id, attempt, payload FROM testdomain_rows`
	list = map[store.Dialect]string{
		store.DialectSQLite:   cols + ` WHERE job_id = ? ORDER BY item_id, step, key`,
		store.DialectPostgres: strings.Replace(cols, "payload", "payload::text", 1) + ` WHERE job_id = $1 ORDER BY item_id, step, key`,
	}
	all = map[store.Dialect]string{
		store.DialectSQLite:   cols + ` ORDER BY item_id, step, key`,
		store.DialectPostgres: strings.Replace(cols, "payload", "payload::text", 1) + ` ORDER BY item_id, step, key`,
	}
)

// Rows returns the job's rows in (item, step, key) order.
func Rows(ctx context.Context, s store.Store, jobID int64) ([]Row, error) {
	x := s.DomainSQL()
	return scan(x.Query(ctx, list[x.Dialect()], jobID))
}

// AllRows returns every row, in (item, step, key) order, read with x (in its transaction).
func AllRows(ctx context.Context, x store.DomainSQL) ([]Row, error) {
	return scan(x.Query(ctx, all[x.Dialect()]))
}

func scan(rows store.DomainRows, err error) ([]Row, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ItemID, &r.Step, &r.Key, &r.JobID, &r.TaskID, &r.Attempt, &r.Payload); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
