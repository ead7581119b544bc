// Package domaintest is the conformance kit of domains ([engine.Domain]), as storetest is the
// drivers': a domain package runs [Run] from its tests, and the kit checks, on every store
// driver (SQLite, and Postgres when SLUICE_TEST_DATABASE_URL is set), what the engine relies on:
//
//   - Migrations are numbered 1, 2, … without gaps, the same numbers and names in every dialect,
//     and registering the domain again (another process) applies none of them twice.
//   - Writes are committed with their task: a job whose step makes the domain's sample writes
//     leaves rows when the task completes, and none for an attempt that fails.
//   - Apply is keyed: applying a completed task's writes again (a result replayed after a
//     crash) changes no row, and writes applied in a transaction that rolls back leave none.
//
// A domain describes itself with a [Domain]: its writes for one item and a way to read its rows
// back in a comparable form.
package domaintest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Domain is a domain under test.
type Domain struct {
	// Name is the name it registers under.
	Name string
	// Domain is the domain.
	Domain engine.Domain
	// Writes returns the writes a step makes on the item named name: at least one, with distinct
	// keys (they are made once per item of a job of two items).
	Writes func(name string) []action.DomainWrite
	// Rows reads every row of the domain's tables in a form that compares equal when the rows
	// are (one string per row is enough: "key=…, payload=…"), in any order.
	Rows func(ctx context.Context, x store.DomainSQL) ([]string, error)
}

// Run runs the conformance checks of d as subtests of t.
func Run(t *testing.T, d Domain) {
	t.Helper()
	t.Run("Migrations", func(t *testing.T) {
		t.Parallel()
		checkMigrations(t, d)
	})
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		checkWrites(t, d, open)
	})
}

func checkMigrations(t *testing.T, d Domain) {
	byDialect := map[store.Dialect][]store.DomainMigration{}
	for _, dl := range []store.Dialect{store.DialectSQLite, store.DialectPostgres} {
		ms := d.Domain.Migrations(dl)
		if len(ms) == 0 {
			t.Fatalf("%s: no migrations", dl)
		}
		for i, m := range ms {
			if m.Version != i+1 {
				t.Errorf("%s: migration %d (%s) has version %d, want %d: numbered from 1 without gaps", dl, i, m.Name, m.Version, i+1)
			}
			if m.SQL == "" {
				t.Errorf("%s: migration %d (%s) is empty", dl, m.Version, m.Name)
			}
		}
		byDialect[dl] = ms
	}
	names := func(ms []store.DomainMigration) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
		return out
	}
	if a, b := names(byDialect[store.DialectSQLite]), names(byDialect[store.DialectPostgres]); !slices.Equal(a, b) {
		t.Errorf("migrations differ between dialects: sqlite %v, postgres %v", a, b)
	}
}

// workflow runs the step w (the domain's writes) on every root.
const workflow = "name: domaintest\nsteps:\n  w: {action: w, needs: [start]}\n"

func checkWrites(t *testing.T, d Domain, open enginetest.Open) {
	ctx := t.Context()
	fail := errors.New("domaintest: this attempt fails")
	w := enginetest.Func("w", func(_ context.Context, tk *action.Task, out action.Output) error {
		for _, dw := range d.Writes(tk.Item.Name) {
			if err := out.Write(dw); err != nil {
				return err
			}
		}
		if tk.Item.Name == "fails" {
			return action.Permanent(fail)
		}
		return nil
	})
	k := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{d.Name: d.Domain}}, w)
	rows := func() []string {
		t.Helper()
		rs, err := d.Rows(ctx, k.Store.DomainSQL())
		if err != nil {
			t.Fatalf("read the domain's rows: %v", err)
		}
		slices.Sort(rs)
		return rs
	}

	// Registering again, as another process does, applies nothing.
	if again, err := k.Store.MigrateDomain(ctx, d.Name, d.Domain.Migrations(k.Store.DomainSQL().Dialect())); err != nil || len(again) != 0 {
		t.Errorf("registering again applied %v (%v), want nothing", again, err)
	}

	// A failed attempt's writes are not committed.
	job := k.StartJob(t, workflow, engine.Root{Name: "fails"})
	if j := k.WaitJob(t, job.ID, time.Minute); j.State != record.JobComplete {
		t.Fatalf("job of a failing attempt = %s (%s), want complete", j.State, j.Error)
	}
	if rs := rows(); len(rs) != 0 {
		t.Fatalf("rows after a failed attempt: %v, want none", rs)
	}

	// A completed task's writes are.
	job = k.StartJob(t, workflow, engine.Root{Name: "a"}, engine.Root{Name: "b"})
	if j := k.WaitJob(t, job.ID, time.Minute); j.State != record.JobComplete {
		t.Fatalf("job = %s (%s), want complete", j.State, j.Error)
	}
	committed := rows()
	if len(committed) == 0 {
		t.Fatal("no rows after two tasks that wrote to the domain completed")
	}

	// Replayed, the completed tasks' writes change nothing.
	var replay []engine.DomainWrite
	for _, tk := range k.Tasks(t, job.ID) {
		it, err := k.Store.ItemGet(ctx, tk.ItemID)
		if err != nil {
			t.Fatal(err)
		}
		for _, aw := range d.Writes(it.Name) {
			dw, err := k.Engine.EncodeWrite(aw)
			if err != nil {
				t.Fatal(err)
			}
			dw.JobID, dw.ItemID, dw.Step, dw.TaskID, dw.Attempt = tk.JobID, tk.ItemID, tk.Step, tk.ID, tk.Attempt
			replay = append(replay, dw)
		}
	}
	if err := k.Store.InTx(ctx, func(x store.Executor) error { return d.Domain.Apply(ctx, x.DomainSQL(), replay) }); err != nil {
		t.Fatalf("apply the writes again: %v", err)
	}
	if got := rows(); !slices.Equal(got, committed) {
		t.Errorf("applying the writes again changed the rows:\n got %v\nwant %v", got, committed)
	}

	// Writes applied in a transaction that rolls back leave nothing: on another item, as a
	// task whose transaction failed.
	rollback := errors.New("roll back")
	for i := range replay {
		replay[i].ItemID += 1 << 30
		replay[i].TaskID += 1 << 30
	}
	err := k.Store.InTx(ctx, func(x store.Executor) error {
		if err := d.Domain.Apply(ctx, x.DomainSQL(), replay); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatalf("apply in a transaction that rolls back: %v", err)
	}
	if got := rows(); !slices.Equal(got, committed) {
		t.Errorf("a rolled-back transaction's writes changed the rows:\n got %v\nwant %v", got, committed)
	}
}
