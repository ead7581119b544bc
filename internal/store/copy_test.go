package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/store/sqlite"
)

// openPostgres opens a store in a schema of its own, dropped when the test ends.
func openPostgres(t *testing.T) *postgres.DB { return drivertest.OpenPostgres(t).(*postgres.DB) }

func openSQLite(t *testing.T) *sqlite.DB { return drivertest.OpenSQLite(t).(*sqlite.DB) }

// copyAll exports every table of from into to, the way `sluice migrate copy` does.
func copyAll(ctx context.Context, from *sqlite.DB, to *postgres.DB) error {
	return to.Import(ctx, func(imp *postgres.Importer) error {
		return from.Export(ctx, func(t *sqlite.ExportTable) error {
			_, err := imp.Table(ctx, t.Name, t.Columns, t)
			return err
		})
	})
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestExportImport copies the values whose types differ between the drivers — a 0/1 boolean,
// JSON text to jsonb, text to bytea (bytes that are not UTF-8), NULL and empty text — and checks
// them through the Postgres store, then that new rows get ids after the copied ones and that a
// second import is refused.
func TestExportImport(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := openPostgres(t)
	lite := openSQLite(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	must[*record.Workflow](t)(lite.WorkflowInsert(ctx, store.WorkflowInsertParams{Name: "wf", Digest: "d1",
		Definition: []byte(`{"name":"wf"}`), Source: []byte("name: wf\n"), Now: now}))
	sealed := must[*record.Job](t)(lite.JobInsert(ctx, store.JobInsertParams{Key: "k1", WorkflowName: "wf", WorkflowVersion: 1,
		Metadata: []byte(`{"b": 1, "a": {"z": true}}`), Now: now}))
	open := must[*record.Job](t)(lite.JobInsert(ctx, store.JobInsertParams{Open: true, WorkflowName: "wf", WorkflowVersion: 1, Now: now}))
	text, empty := "héllo", ""
	var items []*record.Item
	for i, txt := range []*string{&text, &empty, nil} {
		it, _, err := lite.ItemInsert(ctx, store.ItemInsertParams{JobID: sealed.ID, Ordinal: i, SortKey: string(rune('a' + i)),
			Name: "n", Text: txt, RangeLen: 1, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	raw := []byte{0xff, 0x00, 0xfe, 'x'}
	if err := lite.OutputPut(ctx, store.OutputPutParams{ItemID: items[0].ID, JobID: sealed.ID, Kind: "raw", Value: raw, Now: now}); err != nil {
		t.Fatal(err)
	}
	if err := lite.CachePut(ctx, store.CachePutParams{Key: "key", Value: []byte{0x80, 0x81}, Now: now}); err != nil {
		t.Fatal(err)
	}

	if err := copyAll(ctx, lite, pg); err != nil {
		t.Fatal(err)
	}

	for _, want := range []*record.Job{sealed, open} {
		got := must[*record.Job](t)(pg.JobGet(ctx, want.ID))
		if got.Key != want.Key || got.Sealed != want.Sealed || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("job %d: key %q sealed %v created %v, want %q %v %v", want.ID, got.Key, got.Sealed, got.CreatedAt, want.Key, want.Sealed, want.CreatedAt)
		}
	}
	if md := must[*record.Job](t)(pg.JobGet(ctx, sealed.ID)).Metadata; !strings.Contains(string(md), `"z": true`) {
		t.Errorf("metadata %s", md)
	}
	for i, want := range []struct {
		has  bool
		text string
	}{{true, text}, {true, ""}, {false, ""}} {
		got := must[*record.Item](t)(pg.ItemGet(ctx, items[i].ID))
		if got.HasText != want.has || got.Text != want.text {
			t.Errorf("item %d: text %v %q, want %v %q", i, got.HasText, got.Text, want.has, want.text)
		}
	}
	outs := must[[]*record.Output](t)(pg.OutputList(ctx, store.OutputListParams{JobID: sealed.ID, Limit: 10}))
	if len(outs) != 1 || !bytes.Equal(outs[0].Value, raw) {
		t.Errorf("outputs %+v, want one with %x", outs, raw)
	}
	if v := must[[]byte](t)(pg.CacheGet(ctx, "key")); !bytes.Equal(v, []byte{0x80, 0x81}) {
		t.Errorf("cache value %x", v)
	}
	if wf := must[*record.Workflow](t)(pg.WorkflowInsert(ctx, store.WorkflowInsertParams{Name: "wf", Digest: "d1",
		Definition: []byte(`{"name":"wf"}`), Source: []byte("name: wf\n"), Now: now})); wf.Version != 1 {
		t.Errorf("re-inserting the copied workflow made version %d, want 1", wf.Version)
	}

	next := must[*record.Job](t)(pg.JobInsert(ctx, store.JobInsertParams{WorkflowName: "wf", WorkflowVersion: 1, Now: now}))
	if next.ID != open.ID+1 {
		t.Errorf("new job id %d, want %d", next.ID, open.ID+1)
	}
	it, _, err := pg.ItemInsert(ctx, store.ItemInsertParams{JobID: next.ID, SortKey: "a", Name: "n", Now: now})
	if err != nil || it.ID != items[2].ID+1 {
		t.Errorf("new item id %v (%v), want %d", it, err, items[2].ID+1)
	}

	err = copyAll(ctx, lite, pg)
	var ne *postgres.NotEmptyError
	if !errors.As(err, &ne) || !strings.HasPrefix(ne.Has, "3 jobs, 1 cache entry, 4 items, 1 output, 1 workflow") {
		t.Errorf("second import: %v, want a NotEmptyError starting with 3 jobs", err)
	}
	if err := pg.ImportCheck(ctx); !errors.As(err, &ne) {
		t.Errorf("ImportCheck: %v", err)
	}
}

// TestImportRejects: a value Postgres cannot hold, a missing table and a column one side lacks
// each fail the import, and nothing is committed.
func TestImportRejects(t *testing.T) {
	t.Parallel()
	empty := func(ctx context.Context, imp *postgres.Importer, table string, cols ...string) error {
		_, err := imp.Table(ctx, table, cols, &rows{})
		return err
	}
	for _, tc := range []struct {
		name string
		fill func(t *testing.T, lite *sqlite.DB)
		fn   func(ctx context.Context, lite *sqlite.DB, imp *postgres.Importer) error
		want string
	}{
		{name: "nul in text",
			fill: func(t *testing.T, lite *sqlite.DB) {
				j := must[*record.Job](t)(lite.JobInsert(t.Context(), store.JobInsertParams{WorkflowName: "wf", WorkflowVersion: 1, Now: time.Now()}))
				bad := "a\x00b"
				if _, _, err := lite.ItemInsert(t.Context(), store.ItemInsertParams{JobID: j.ID, SortKey: "a", Name: "n", Text: &bad, Now: time.Now()}); err != nil {
					t.Fatal(err)
				}
			},
			want: "import items (COPY items, line 1, column text"},
		{name: "missing table",
			fn: func(ctx context.Context, lite *sqlite.DB, imp *postgres.Importer) error {
				return nil
			},
			want: "the source has no table"},
		{name: "extra column",
			fn: func(ctx context.Context, lite *sqlite.DB, imp *postgres.Importer) error {
				return empty(ctx, imp, "jobs", "bogus")
			},
			want: "the source has a column bogus the target lacks"},
		{name: "missing column",
			fn: func(ctx context.Context, lite *sqlite.DB, imp *postgres.Importer) error {
				return empty(ctx, imp, "jobs", "id")
			},
			want: "the source lacks"},
		{name: "unknown table",
			fn: func(ctx context.Context, lite *sqlite.DB, imp *postgres.Importer) error {
				return empty(ctx, imp, "nope", "id")
			},
			want: "import nope: the target has no such table"},
		{name: "bad value",
			fn: func(ctx context.Context, lite *sqlite.DB, imp *postgres.Importer) error {
				_, err := imp.Table(ctx, "cache", []string{"key", "value", "created_at"}, &rows{rows: [][]any{{"k", "v", "yesterday"}}})
				return err
			},
			want: "row 1, column created_at: want an integer, got string yesterday"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pg, lite := openPostgres(t), openSQLite(t)
			if tc.fill != nil {
				tc.fill(t, lite)
			}
			var err error
			if tc.fn != nil {
				err = pg.Import(ctx, func(imp *postgres.Importer) error { return tc.fn(ctx, lite, imp) })
			} else {
				err = copyAll(ctx, lite, pg)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if err := pg.ImportCheck(ctx); err != nil {
				t.Errorf("after a failed import: %v", err)
			}
		})
	}
}

// rows is a [postgres.RowSource] over fixed values.
type rows struct {
	rows [][]any
	i    int
}

func (r *rows) Next() bool             { r.i++; return r.i <= len(r.rows) }
func (r *rows) Values() ([]any, error) { return r.rows[r.i-1], nil }
func (r *rows) Err() error             { return nil }
