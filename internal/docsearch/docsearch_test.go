package docsearch_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/sqlite"
)

func openStore(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// addDocs records n documents "doc-I.txt" with text "page I of the report", one in ten with a
// page number.
func addDocs(t *testing.T, st store.Store, n int) {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	j, err := st.JobInsert(ctx, store.JobInsertParams{WorkflowName: "documents", WorkflowVersion: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	err = st.InTx(ctx, func(x store.Executor) error {
		for i := range n {
			text := fmt.Sprintf("page %d of the report", i)
			it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: i, SortKey: fmt.Sprintf("%05d", i),
				Name: fmt.Sprintf("doc-%d.txt", i), ContentType: "text/plain", Text: &text, Now: now})
			if err != nil {
				return err
			}
			value := fmt.Sprintf(`{"title":"report.pdf","page_number":%d}`, i+1)
			o := store.OutputPutParams{ItemID: it.ID, JobID: j.ID, Kind: store.OutputDocument, Value: []byte(value), Now: now}
			if err := x.OutputPut(ctx, o); err != nil {
				return err
			}
			if err := (docsearch.Domain{}).OutputsRecorded(ctx, x.DomainSQL(), []store.OutputPutParams{o}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSearch: hits carry the document's title, its page and a marked snippet; pages follow
// the cursor; bad requests are BadRequestErrors.
func TestSearch(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "sluice.db"))
	defer st.Close()
	addDocs(t, st, 5)
	ctx := t.Context()
	res, err := docsearch.Search(ctx, st, docsearch.Request{Query: `"page 3"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 1 || res.Hits[0].Title != "report.pdf" || res.Hits[0].Page != 4 || res.Hits[0].Snippet != "«page 3» of the report" || res.Next != "" {
		t.Fatalf("hits %+v", res)
	}
	seen := map[int64]bool{}
	req := docsearch.Request{Query: "report", Limit: 2}
	for range 5 {
		res, err := docsearch.Search(ctx, st, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range res.Hits {
			if seen[h.ID] {
				t.Fatalf("hit %d twice", h.ID)
			}
			seen[h.ID] = true
		}
		if res.Next == "" {
			break
		}
		req.Cursor = res.Next
	}
	if len(seen) != 5 {
		t.Fatalf("paged through %d hits, want 5", len(seen))
	}
	for _, r := range []docsearch.Request{{Query: "-only"}, {Query: ""}, {Query: "x", Cursor: "nope"}, {Query: "x", Metadata: []string{"novalue"}}, {Query: "x", Limit: 5000}} {
		if _, err := docsearch.Search(ctx, st, r); !docsearch.IsBadRequest(err) {
			t.Errorf("%+v: %v, want a bad request", r, err)
		}
	}
}

// TestReindex: an installation whose documents predate the index (its rows deleted here) gets
// them all back, in batches that commit as they go: stopped after the first batch, a second run
// picks up the rest.
func TestReindex(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sluice.db")
	st := openStore(t, path)
	addDocs(t, st, 25)
	st.Close()

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM search_index`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	st = openStore(t, path)
	defer st.Close()
	ctx := t.Context()
	if docs, indexed, err := docsearch.NewIndex(st.DomainSQL()).Count(ctx); err != nil || docs != 25 || indexed != 0 {
		t.Fatalf("before: %d documents, %d indexed, %v", docs, indexed, err)
	}
	if res, err := docsearch.Search(ctx, st, docsearch.Request{Query: "report"}); err != nil || len(res.Hits) != 0 {
		t.Fatalf("before: %+v %v", res, err)
	}

	stop := errors.New("stopped")
	cctx, cancel := context.WithCancelCause(ctx)
	_, err = docsearch.Reindex(cctx, st, 10, func(p docsearch.ReindexProgress) {
		if p.Indexed == 10 {
			cancel(stop)
		}
	})
	if err == nil {
		t.Fatal("a stopped reindex returned no error")
	}
	if _, indexed, _ := docsearch.NewIndex(st.DomainSQL()).Count(ctx); indexed != 10 {
		t.Fatalf("after the first batch: %d indexed, want 10", indexed)
	}
	var reports []string
	pr, err := docsearch.Reindex(ctx, st, 10, func(p docsearch.ReindexProgress) {
		reports = append(reports, fmt.Sprintf("%d/%d+%d", p.Seen, p.Documents, p.Indexed))
	})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Documents != 25 || pr.Indexed != 15 || strings.Join(reports, " ") != "10/25+0 20/25+10 25/25+15" {
		t.Fatalf("second run: %+v, progress %v", pr, reports)
	}
	res, err := docsearch.Search(ctx, st, docsearch.Request{Query: "report", Limit: 100})
	if err != nil || len(res.Hits) != 25 {
		t.Fatalf("after: %d hits, %v", len(res.Hits), err)
	}

	// Deleting a document (no code does yet) deletes its index row.
	raw, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`DELETE FROM outputs WHERE item_id = ?`, res.Hits[0].ID); err != nil {
		t.Fatal(err)
	}
	if docs, indexed, err := docsearch.NewIndex(st.DomainSQL()).Count(ctx); err != nil || docs != 24 || indexed != 24 {
		t.Fatalf("after a delete: %d documents, %d indexed, %v", docs, indexed, err)
	}
}
