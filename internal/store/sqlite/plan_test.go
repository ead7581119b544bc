package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLeasePlan: the lease's pick, and the held lease's (TaskHoldMany), walk tasks_ready in
// order and sort nothing, after ANALYZE
// has given the planner statistics of a large backlog (200,000 ready tasks, 60,000 finished) —
// the plan is pinned with INDEXED BY, so no statistics can change it.
func TestLeasePlan(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	FillBacklog(t, db, 200_000, 60_000)
	if _, err := db.w.ExecContext(t.Context(), `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	now := micros(time.Now())
	plan := func(q string, args ...any) string {
		if len(args) == 0 {
			args = []any{"o", now, now, "q", now}
		}
		return queryPlan(t, db, q, args...)
	}
	ordered := func(plan string) bool {
		return strings.Contains(plan, "USING INDEX tasks_ready") && !strings.Contains(plan, "TEMP B-TREE") && !strings.Contains(plan, "SCAN tasks")
	}
	if p := plan(qTaskLease(1000)); !ordered(p) {
		t.Errorf("the pick does not walk tasks_ready in order:\n%s", p)
	}
	if p := plan(qTaskHold(1000), "q", now); !ordered(p) {
		t.Errorf("the held pick does not walk tasks_ready in order:\n%s", p)
	}
	// Control: the plan the check exists for (a scan and a sort of every ready row) is caught.
	if p := plan(strings.Replace(qTaskLease(1000), "INDEXED BY tasks_ready", "NOT INDEXED", 1)); ordered(p) {
		t.Errorf("the check passed a pick with no index:\n%s", p)
	}
}

// TestItemIndexPlans: the queries that look for open items, blobs and children use the narrow
// indexes of migration 012 (a partial index is used only when the query names its predicate),
// and the queries that may ask for ingested children go through items_key.
func TestItemIndexPlans(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	for _, tc := range []struct {
		name, query, index string
		args               []any
	}{
		{"JobHasOpenItems", qJobHasOpenItems, "items_job_open", []any{1}},
		{"ItemHasChildInState, open states", qItemHasOpenChild(2), "items_parent_open", []any{1, "created", "written"}},
		{"ItemHasChildInState, ingested", qItemHasChildState(2), "items_key", []any{1, "written", "ingested"}},
		{"ItemListChildren", qItemListChildren, "items_key", []any{1, "s"}},
		{"BlobIsReferenced, blobs", qBlobIsReferenced, "items_blob", []any{"x"}},
		{"BlobIsReferenced, thumbnails", qBlobIsReferenced, "items_thumbnail", []any{"x"}},
	} {
		if p := queryPlan(t, db, tc.query, tc.args...); !strings.Contains(p, "INDEX "+tc.index+" ") || strings.Contains(p, "SCAN items") {
			t.Errorf("%s does not search %s:\n%s", tc.name, tc.index, p)
		}
	}
}

// queryPlan returns the EXPLAIN QUERY PLAN of the query on the writer, a line per step.
func queryPlan(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.w.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// openDB opens a database in a temporary directory, closed when the test ends.
func openDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "sluice.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
