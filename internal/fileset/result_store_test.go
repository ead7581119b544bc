package fileset

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
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
			if err := rs.Put(ctx, PutParams{Result: r, Updated: time.UnixMicro(updated), JobID: 3, ItemID: updated}); err != nil {
				t.Fatal(err)
			}
		}

		if _, err := rs.Get(ctx, "dataset", "https://zenodo.org/record/1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get from an empty table: %v, want ErrNotFound", err)
		}
		put(result("dataset", "https://zenodo.org/record/1", StatusPlatform404), 100)
		got, err := rs.Get(ctx, "dataset", "https://zenodo.org/record/1")
		if err != nil || got.Status != StatusPlatform404 || !got.Updated.Equal(time.UnixMicro(100)) || got.JobID != 3 || got.ItemID != 100 ||
			got.Result.Manifest[0].SHA256 != "ab" || *got.Result.FileCount != 1 {
			t.Fatalf("get: %+v, %v", got, err)
		}
		// A later result replaces it; an earlier one (a replay, a slower process) does not.
		put(result("dataset", "https://zenodo.org/record/1", StatusSuccess), 200)
		put(result("dataset", "https://zenodo.org/record/1", StatusPlatformError), 150)
		if got, err := rs.Get(ctx, "dataset", "https://zenodo.org/record/1"); err != nil || got.Status != StatusSuccess || !got.Result.Hit {
			t.Fatalf("after a later and an earlier put: %+v, %v", got, err)
		}
		if err := rs.Put(ctx, PutParams{Result: Result{Status: StatusSuccess, Request: json.RawMessage(`{}`)}, Updated: time.UnixMicro(1)}); err == nil {
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

		// Two captures of one URL and payload in one second: the index keeps the first line,
		// and the blob collector both WARCs (a result names each); an item folder's blobs are
		// kept too, and nothing else.
		line := CDX{URL: "https://zenodo.org/record/1", SHA1Hex: strings.Repeat("1", 40), Datetime: "20261129020000",
			SURT: "org,zenodo)/record/1", Mimetype: "text/html", StatusCode: 200, SHA1B32: "x", WarcCSize: 10, WarcOffset: 100,
			WarcPath: strings.Repeat("a", 64)}
		second := line
		second.WarcPath, second.WarcOffset = strings.Repeat("b", 64), 200
		for _, c := range []CDX{line, second, line} {
			if err := rs.PutCDX(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := rs.CDX(ctx, line.URL, line.SHA1Hex); err != nil || *got != line {
			t.Errorf("CDX: %+v, %v; want the first line %+v", got, err, line)
		}
		size := int64(7)
		folder := &ItemFolder{Name: "zenodo.org-1", Files: []ItemFile{{Name: "a.csv", SHA256: strings.Repeat("c", 64), Size: 7, Source: "original"},
			{Name: "zenodo.org-1_meta.xml", SHA256: strings.Repeat("d", 64), Size: 90, Source: "metadata", Format: "Metadata"}}}
		r := result("dataset", "https://zenodo.org/record/folder", StatusSuccess)
		r.IngestStrategy, r.ArchiveorgItemName = StrategyArchiveorgFileset, folder.Name
		r.Manifest[0].Size = &size
		if err := rs.Put(ctx, PutParams{Result: r, Updated: time.UnixMicro(400), Folder: folder}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			sha  string
			want bool
		}{{line.WarcPath, true}, {second.WarcPath, true}, {strings.Repeat("c", 64), true}, {strings.Repeat("d", 64), true}, {strings.Repeat("e", 64), false}} {
			if ok, err := (Domain{}).BlobReferenced(ctx, db.DomainSQL(), c.sha); err != nil || ok != c.want {
				t.Errorf("blob %s…: referenced %v, %v; want %v", c.sha[:4], ok, err, c.want)
			}
		}
		// A later success for the item writes its folder whole: a file gone from it is gone.
		folder.Files = folder.Files[1:]
		if err := rs.Put(ctx, PutParams{Result: r, Updated: time.UnixMicro(500), Folder: folder}); err != nil {
			t.Fatal(err)
		}
		if files, err := rs.ItemFiles(ctx, folder.Name); err != nil || len(files) != 1 || files[0] != folder.Files[0] {
			t.Errorf("item files after a second folder: %+v, %v", files, err)
		}
	})
}

// TestResultsTableMoves applies the first migration (fileset_results), writes rows as a build
// of then did, and applies the rest: the rows are in ingest_fileset_platform, their times
// converted, archiveorg_item_name kept only for an archiveorg-* strategy, and the old table is
// gone.
func TestResultsTableMoves(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		ctx := t.Context()
		db := open(t)
		ms := Domain{}.Migrations(db.DomainSQL().Dialect())
		if _, err := db.MigrateDomain(ctx, DomainName, ms[:1]); err != nil {
			t.Fatal(err)
		}
		x := db.DomainSQL()
		ins := store.Rebind(x.Dialect(), `INSERT INTO fileset_results (ingest_type, base_url, updated_at, hit, status, platform_name,
	platform_domain, platform_id, ingest_strategy, total_size, file_count, archiveorg_item_name, web_bundle_url, manifest,
	result, job_id, item_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		at := time.Date(2026, 11, 27, 5, 43, 1, 123456789, time.UTC)
		for i, c := range []struct{ status, strategy string }{{StatusSuccess, StrategyWebFileset}, {StatusSuccessFile, StrategyArchiveorgFile}, {StatusPlatform404, ""}} {
			base := fmt.Sprintf("https://zenodo.org/record/%d", i)
			res, _ := json.Marshal(Result{Hit: c.strategy != "", Status: c.status, PlatformName: "zenodo", PlatformDomain: "zenodo.org",
				PlatformID: fmt.Sprint(i), IngestStrategy: c.strategy, Request: json.RawMessage(`{"ingest_type":"dataset","base_url":"` + base + `"}`)})
			if _, err := x.Exec(ctx, ins, "dataset", base, at.UnixNano()+int64(i), c.strategy != "", c.status, "zenodo", "zenodo.org", fmt.Sprint(i),
				c.strategy, 7, 1, fmt.Sprintf("zenodo.org-%d", i), "", `[{"path":"a.csv"}]`, string(res), 9, 90+i); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.MigrateDomain(ctx, DomainName, ms); err != nil {
			t.Fatal(err)
		}
		rows, err := NewResultStore(db).List(ctx, ListParams{})
		if err != nil || len(rows) != 3 {
			t.Fatalf("%d rows moved, %v", len(rows), err)
		}
		for i, r := range rows {
			if !r.Updated.Equal(at.Truncate(time.Microsecond)) || r.JobID != 9 || r.ItemID != int64(90+i) || r.Result.PlatformID != fmt.Sprint(i) {
				t.Errorf("row %d: %+v", i, r)
			}
		}
		var names []string
		q, err := x.Query(ctx, `SELECT coalesce(archiveorg_item_name, '-') FROM ingest_fileset_platform ORDER BY base_url`)
		if err != nil {
			t.Fatal(err)
		}
		for q.Next() {
			var n string
			_ = q.Scan(&n)
			names = append(names, n)
		}
		q.Close()
		if fmt.Sprint(names) != "[- zenodo.org-1 -]" {
			t.Errorf("archiveorg_item_name moved as %v, want only the archiveorg-* strategy's", names)
		}
		if _, err := x.Exec(ctx, `SELECT 1 FROM fileset_results`); err == nil {
			t.Error("fileset_results is still there")
		}
	})
}

// TestDesignTable checks ingest_fileset_platform on PostgreSQL against the design's CREATE
// TABLE: every column's type, nullability and CHECK, the primary key and the index.
func TestDesignTable(t *testing.T) {
	t.Parallel()
	domaintest.ForEachStore(t, DomainName, Domain{}, func(t *testing.T, db store.Store) {
		x := db.DomainSQL()
		if x.Dialect() != store.DialectPostgres {
			return
		}
		ctx := t.Context()
		text := func(q string) []string {
			t.Helper()
			rows, err := x.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				out = append(out, s)
			}
			return out
		}
		cols := text(`SELECT column_name || ' ' || data_type || ' ' || is_nullable || coalesce(' ' || column_default, '')
	FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'ingest_fileset_platform' ORDER BY ordinal_position`)
		want := []string{"ingest_type text NO", "base_url text NO", "updated timestamp with time zone NO now()", "hit boolean NO",
			"status text YES", "platform_name text NO", "platform_domain text NO", "platform_id text NO", "ingest_strategy text YES",
			"total_size bigint YES", "file_count bigint YES", "archiveorg_item_name text YES", "archiveorg_item_bundle_path text YES",
			"web_bundle_url text YES", "web_bundle_dt text YES", "manifest jsonb YES"}
		if fmt.Sprint(cols) != fmt.Sprint(want) {
			t.Errorf("columns\n got %q\nwant %q", cols, want)
		}
		checks := text(`SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'ingest_fileset_platform'::regclass ORDER BY 1`)
		wantChecks := []string{"CHECK ((octet_length(archiveorg_item_bundle_path) >= 1))", "CHECK ((octet_length(archiveorg_item_name) >= 1))",
			"CHECK ((octet_length(base_url) >= 1))", "CHECK ((octet_length(ingest_strategy) >= 1))", "CHECK ((octet_length(ingest_type) >= 1))",
			"CHECK ((octet_length(platform_domain) >= 1))", "CHECK ((octet_length(platform_id) >= 1))", "CHECK ((octet_length(platform_name) >= 1))",
			"CHECK ((octet_length(status) >= 1))", "CHECK ((octet_length(web_bundle_dt) = 14))", "CHECK ((octet_length(web_bundle_url) >= 1))",
			"PRIMARY KEY (ingest_type, base_url)"}
		if fmt.Sprint(checks) != fmt.Sprint(wantChecks) {
			t.Errorf("constraints\n got %q\nwant %q", checks, wantChecks)
		}
		idx := text(`SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'ingest_fileset_platform_name_domain_id_idx'`)
		if len(idx) != 1 || !strings.HasSuffix(idx[0], "USING btree (platform_name, platform_domain, platform_id)") {
			t.Errorf("index: %q", idx)
		}
	})
}
