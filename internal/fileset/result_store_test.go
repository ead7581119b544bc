package fileset

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/store"
)

// TestResultStore is the conformance suite of the results store: the same behaviour from the
// statements of every dialect, on every driver.
func TestResultStore(t *testing.T) {
	t.Parallel()
	domaintest.ForEachStore(t, DomainName, Domain{}, func(t *testing.T, db store.Store) {
		ctx := t.Context()
		rs := NewResultStore(db)
		result := func(typ, base, status string) Result {
			req, _ := json.Marshal(Request{IngestType: typ, BaseURL: base})
			n, size := 1, int64(7)
			return Result{Hit: status == StatusSuccess, Status: status, Request: req, PlatformName: "zenodo",
				PlatformDomain: "zenodo.org", PlatformID: base, FileCount: &n, TotalSize: &size, IngestStrategy: StrategyWebFile,
				Manifest: []ManifestFile{{Path: "a.csv", Size: &size, SHA256: "ab", Status: status}}}
		}
		put := func(r Result, updated int64) {
			t.Helper()
			if err := rs.Put(ctx, PutParams{Result: r, Updated: updated, JobID: 3, ItemID: updated}); err != nil {
				t.Fatal(err)
			}
		}

		if _, err := rs.Get(ctx, "dataset", "https://zenodo.org/record/1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get from an empty table: %v, want ErrNotFound", err)
		}
		put(result("dataset", "https://zenodo.org/record/1", StatusPlatform404), 100)
		got, err := rs.Get(ctx, "dataset", "https://zenodo.org/record/1")
		if err != nil || got.Status != StatusPlatform404 || got.Updated.UnixNano() != 100 || got.JobID != 3 || got.ItemID != 100 ||
			got.Result.Manifest[0].SHA256 != "ab" || *got.Result.FileCount != 1 {
			t.Fatalf("get: %+v, %v", got, err)
		}
		// A later result replaces it; an earlier one (a replay, a slower process) does not.
		put(result("dataset", "https://zenodo.org/record/1", StatusSuccess), 200)
		put(result("dataset", "https://zenodo.org/record/1", StatusPlatformError), 150)
		if got, err := rs.Get(ctx, "dataset", "https://zenodo.org/record/1"); err != nil || got.Status != StatusSuccess || !got.Result.Hit {
			t.Fatalf("after a later and an earlier put: %+v, %v", got, err)
		}
		if err := rs.Put(ctx, PutParams{Result: Result{Status: StatusSuccess, Request: json.RawMessage(`{}`)}, Updated: 1}); err == nil {
			t.Error("a result without platform or request was put")
		}

		for i := range 4 {
			st := StatusSuccess
			if i%2 == 1 {
				st = StatusTooManyFiles
			}
			put(result("dataset", fmt.Sprintf("https://zenodo.org/record/x%d", i), st), 300)
		}
		put(result("dataset-file", "https://zenodo.org/record/0", StatusSuccess), 300)
		keys := func(rows []Row) (out []string) {
			for _, r := range rows {
				out = append(out, r.IngestType+" "+r.BaseURL)
			}
			return out
		}
		all, err := rs.List(ctx, ListParams{})
		want := fmt.Sprint([]string{"dataset https://zenodo.org/record/1", "dataset https://zenodo.org/record/x0",
			"dataset https://zenodo.org/record/x1", "dataset https://zenodo.org/record/x2", "dataset https://zenodo.org/record/x3",
			"dataset-file https://zenodo.org/record/0"})
		if err != nil || fmt.Sprint(keys(all)) != want {
			t.Fatalf("list: %v, %v\nwant %s", keys(all), err, want)
		}
		var paged []Row
		p := ListParams{Status: StatusSuccess, Limit: 2}
		for {
			rows, err := rs.List(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, rows...)
			if len(rows) < p.Limit {
				break
			}
			p.AfterIngestType, p.AfterBaseURL = rows[len(rows)-1].IngestType, rows[len(rows)-1].BaseURL
		}
		want = fmt.Sprint([]string{"dataset https://zenodo.org/record/1", "dataset https://zenodo.org/record/x0",
			"dataset https://zenodo.org/record/x2", "dataset-file https://zenodo.org/record/0"})
		if fmt.Sprint(keys(paged)) != want {
			t.Errorf("successes by pages of 2: %v\nwant %s", keys(paged), want)
		}
	})
}
