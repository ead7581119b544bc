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
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "sluice.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	FillBacklog(t, db, 200_000, 60_000)
	if _, err := db.w.ExecContext(t.Context(), `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	now := micros(time.Now())
	plan := func(q string, args ...any) string {
		if len(args) == 0 {
			args = []any{"o", now, now, "q", now}
		}
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
