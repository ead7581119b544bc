package testdomain_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/enginetest/testdomain"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

var domains = map[string]engine.Domain{testdomain.Name: testdomain.Domain{}}

// TestDomainWrites runs an action that writes to the test domain, on every driver: the writes of
// a task are committed if and only if the task completes — those of an attempt that fails
// (permanently, or to be retried), and all of a result one of whose writes the domain refuses,
// are not — and a key written twice is written once, the first time.
func TestDomainWrites(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		write := func(out action.Output, key string, payload any) error {
			return out.Write(action.DomainWrite{Domain: testdomain.Name, Key: key, Payload: payload})
		}
		w := enginetest.Func("w", func(_ context.Context, tk *action.Task, out action.Output) error {
			switch tk.Item.Name {
			case "ok":
				for _, kv := range []struct {
					k string
					v any
				}{{"a", map[string]any{"n": 1}}, {"b", map[string]any{"n": 2}}, {"a", map[string]any{"n": 3}}} {
					if err := write(out, kv.k, kv.v); err != nil {
						return err
					}
				}
			case "bad":
				if err := write(out, "a", 1); err != nil {
					return err
				}
				return action.Permanentf("bad input")
			case "flaky":
				if err := write(out, "a", map[string]any{"attempt": tk.Attempt}); err != nil {
					return err
				}
				if tk.Attempt == 1 {
					return errors.New("transient trouble")
				}
			case "refused":
				if err := write(out, "a", 1); err != nil {
					return err
				}
				return write(out, testdomain.FailKey, 1)
			case "nan":
				if err := write(out, "a", math.NaN()); err != nil {
					return action.Permanent(err)
				}
			case "unknown":
				if err := out.Write(action.DomainWrite{Domain: "nope", Key: "a"}); err != nil {
					return action.Permanent(err)
				}
			}
			return nil
		})
		k := enginetest.StartWith(t, open, enginetest.Config{Domains: domains}, w)
		names := []string{"ok", "bad", "flaky", "refused", "nan", "unknown"}
		var roots []engine.Root
		for _, n := range names {
			roots = append(roots, engine.Root{Name: n})
		}
		job := k.StartJob(t, "name: w\nsteps:\n  w: {action: w, needs: [start]}\n", roots...)
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job = %s (%s), want complete", j.State, j.Error)
		}
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID})
		if err != nil {
			t.Fatal(err)
		}
		name := map[int64]string{}
		for _, it := range items {
			name[it.ID] = it.Name
		}
		wantTask := map[string]struct {
			state   record.TaskState
			attempt int
			err     string
		}{
			"ok":      {record.TaskComplete, 1, ""},
			"bad":     {record.TaskFailed, 1, "bad input"},
			"flaky":   {record.TaskComplete, 2, ""},
			"refused": {record.TaskFailed, 1, `commit the result of w (attempt 1): task %d: domain "test": testdomain refuses key "fail"`},
			"nan":     {record.TaskFailed, 1, `write "a" to domain "test": json: unsupported value: NaN`},
			"unknown": {record.TaskFailed, 1, `write "a" to domain "nope": no such domain is registered`},
		}
		taskOf := map[string]*record.Task{}
		for _, tk := range k.Tasks(t, job.ID) {
			n := name[tk.ItemID]
			taskOf[n] = tk
			want := wantTask[n]
			if want.err != "" && strings.Contains(want.err, "%d") {
				want.err = fmt.Sprintf(want.err, tk.ID)
			}
			if tk.State != want.state || tk.Attempt != want.attempt || tk.Error != want.err {
				t.Errorf("task of %s = %s at attempt %d (%q), want %s at %d (%q)", n, tk.State, tk.Attempt, tk.Error, want.state, want.attempt, want.err)
			}
		}
		rows, err := testdomain.Rows(t.Context(), k.Store, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			tk := taskOf[name[r.ItemID]]
			if r.Step != "w" || r.TaskID != tk.ID || r.Attempt != tk.Attempt || r.JobID != job.ID {
				t.Errorf("row %+v, want step w, task %d, attempt %d, job %d", r, tk.ID, tk.Attempt, job.ID)
			}
			got = append(got, fmt.Sprintf("%s/%s=%s", name[r.ItemID], r.Key, strings.ReplaceAll(r.Payload, " ", "")))
		}
		want := []string{`ok/a={"n":1}`, `ok/b={"n":2}`, `flaky/a={"attempt":2}`}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("rows = %v, want %v", got, want)
		}
	})
}

// TestDomainMigrations applies the test domain's migrations on every driver: all of them once,
// in order, and none again when a second engine registers the domain on the same store.
func TestDomainMigrations(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		db := open(t)
		ms := testdomain.Domain{}.Migrations(db.DomainSQL().Dialect())
		if len(ms) != 2 || ms[0].Version != 1 || ms[1].Version != 2 {
			t.Fatalf("migrations = %+v, want versions 1 and 2", ms)
		}
		got, err := db.MigrateDomain(t.Context(), testdomain.Name, ms)
		if err != nil || fmt.Sprint(got) != "[1 2]" {
			t.Fatalf("first MigrateDomain = %v, %v; want [1 2]", got, err)
		}
		if got, err = db.MigrateDomain(t.Context(), testdomain.Name, ms); err != nil || len(got) != 0 {
			t.Fatalf("second MigrateDomain = %v, %v; want none", got, err)
		}
		// An engine registering it finds it migrated, and its table usable.
		if err := testdomain.Register(t.Context(), engine.New(engine.Config{Store: db})); err != nil {
			t.Fatal(err)
		}
		if rows, err := testdomain.Rows(t.Context(), db, 1); err != nil || len(rows) != 0 {
			t.Fatalf("rows of an empty domain = %v, %v", rows, err)
		}
	})
}
