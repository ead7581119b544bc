package postgres

import (
	"encoding/json"
	"testing"
)

// TestJobOpenBelowFloor: the check of a job's open items starts at the open item it last saw,
// and an item open before that floor (here, given its open_items row back after the floor was
// set, as a reopen does) still keeps the job open; only when no item is open does it say so.
func TestJobOpenBelowFloor(t *testing.T) {
	t.Parallel()
	db := openTestSchema(t)
	ctx := t.Context()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	open := func(job int64) bool {
		t.Helper()
		ok, err := db.JobHasOpenItems(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// Job 1 has items 1..3000 open; job 2 items 3001..3100, after them.
	exec(`INSERT INTO open_items (id, job_id, parent_id, state) SELECT g, CASE WHEN g <= 3000 THEN 1 ELSE 2 END, 0, 'written' FROM generate_series(1, 3100) g`)
	if !open(1) || !open(2) {
		t.Fatal("jobs with open items reported closed")
	}
	exec(`DELETE FROM open_items WHERE id <= 2000`) // ingested
	if !open(1) {
		t.Fatal("job 1 with 1,000 open items reported closed")
	}
	floor := db.openFloors.get(1)
	if floor <= 2000 {
		t.Fatalf("job 1's floor is %d after items up to 2000 were ingested, want past them", floor)
	}
	exec(`INSERT INTO open_items (id, job_id, parent_id, state) VALUES (10, 1, 0, 'written')`) // reopened, before the floor
	exec(`DELETE FROM open_items WHERE id > 2000 AND job_id = 1`)
	if !open(1) {
		t.Fatal("job 1 with an open item before its floor reported closed")
	}
	if got := db.openFloors.get(1); got != 10 {
		t.Fatalf("job 1's floor is %d, want the open item 10", got)
	}
	// More than openFloorWindow open items of another job between the floor and job 1's next.
	exec(`INSERT INTO open_items (id, job_id, parent_id, state) SELECT g, 2, 0, 'written' FROM generate_series(11, 1500) g`)
	exec(`INSERT INTO open_items (id, job_id, parent_id, state) VALUES (1600, 1, 0, 'written')`)
	exec(`DELETE FROM open_items WHERE id = 10`)
	if !open(1) {
		t.Fatal("job 1 with an open item past the floor's window reported closed")
	}
	exec(`DELETE FROM open_items WHERE job_id = 1`)
	if open(1) {
		t.Fatal("job 1 without open items reported open")
	}
	if !open(2) {
		t.Fatal("job 2 with open items reported closed")
	}
}

// TestJobOpenFromStopsAtFirst: the check from a floor reads open_items up to the job's first
// open item, not the whole window after the floor: with the job's item right at the floor it
// reads one row.
func TestJobOpenFromStopsAtFirst(t *testing.T) {
	t.Parallel()
	db := openTestSchema(t)
	ctx := t.Context()
	if _, err := db.pool.Exec(ctx, `INSERT INTO open_items (id, job_id, parent_id, state) SELECT g, 1, 0, 'written' FROM generate_series(1, 3000) g`); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := db.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+qJobOpenFrom, int64(1), int64(500)).Scan(&out); err != nil {
		t.Fatal(err)
	}
	type node struct {
		NodeType string `json:"Node Type"`
		Relation string `json:"Relation Name"`
		Rows     int    `json:"Actual Rows"`
		Plans    []node `json:"Plans"`
	}
	var plans []struct{ Plan node }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN: %v\n%s", err, out)
	}
	read := -1
	var walk func(n node)
	walk = func(n node) {
		if n.Relation == "open_items" {
			read = n.Rows
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	if read != 1 {
		t.Fatalf("the check from the floor read %d rows of open_items, want 1:\n%s", read, out)
	}
	ok, err := db.JobHasOpenItems(ctx, 1)
	if err != nil || !ok {
		t.Fatalf("JobHasOpenItems = %v, %v; want open", ok, err)
	}
}
