package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestLeasePlanAtScale: the pick of ready tasks (plain and held leases) must cost the same at any
// backlog, so its plan may hold neither a sort nor a scan of every ready row. At a backlog of
// 200,000 ready tasks, beside 60,000 finished ones (the point where, in the scale benchmark,
// Postgres once switched to a bitmap scan of every ready row and an on-disk sort), the statements
// run as the driver runs them, and auto_explain reports the plans Postgres executed, the
// statement's and task_pick's inside it, custom and generic (as a prepared statement's plan
// becomes after five runs). A control run with task_pick's pins off and index scans off must be
// caught.
func TestLeasePlanAtScale(t *testing.T) {
	db := openTestSchema(t)
	url, schema := os.Getenv("SLUICE_TEST_DATABASE_URL"), db.schema
	ctx := t.Context()
	// Tasks straight into the table: 260,000 ready in queue q over three jobs (and a few
	// thousand in another queue), of which 60,000 then finish.
	for _, q := range []string{
		`INSERT INTO tasks (job_id, item_id, step, action, queue, state, max_attempts, sort_key, created_at)
		 SELECT 1 + g / 100000, g, 's', 'a', 'q', 'ready', 3, lpad(g::text, 10, '0'), 0 FROM generate_series(1, 260000) g`,
		`INSERT INTO tasks (job_id, item_id, step, action, queue, state, max_attempts, sort_key, created_at)
		 SELECT 3, 300000 + g, 's', 'b', 'other', 'ready', 3, lpad(g::text, 10, '0'), 0 FROM generate_series(1, 5000) g`,
		`ANALYZE tasks`,
		// The first 60,000 in pick order are worked off, as a burndown does: their rows leave
		// the ready index's range while dead entries stay in it until a vacuum.
		`UPDATE tasks SET state = 'complete', attempt = 1 WHERE queue = 'q' AND sort_key <= lpad('60000', 10, '0')`,
		`ANALYZE tasks`,
	} {
		if _, err := db.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// One connection of its own, whose notices carry auto_explain's plans.
	conn := explainConn(t, url, schema, "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on")
	now := micros(time.Now())
	for _, tc := range []struct {
		name string
		sql  string
		args []any
	}{
		{"held", qTaskHoldMany, []any{[]string{"q"}, now, []int32{1000}, []int64{0}, []string{""}, []int64{}}},
		{"held from a floor", qTaskHoldMany, []any{[]string{"q"}, now, []int32{1000}, []int64{2}, []string{"0000150000"}, []int64{7, 8}}},
		{"lease", qTaskLeaseMany, []any{[]string{"q", "other"}, now, []int32{1000, 100}, "w", now + 30e6, []int64{0, 0}, []string{"", ""}, []int64{}}},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan", "control"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				set := "SET LOCAL plan_cache_mode = " + mode
				if mode == "control" {
					// The plan the check exists for: task_pick's pins taken off (rolled back with
					// the transaction) and the planner led away from the index. It must be caught.
					// With the pins on, index scans off change nothing.
					set = "ALTER FUNCTION task_pick(text[], bigint, integer[], bigint[], text[], bigint[]) RESET ALL; SET LOCAL enable_indexscan = off"
				}
				// task_pick's plan is cached per connection, and a setting does not invalidate it.
				if _, err := tx.Exec(ctx, "DISCARD PLANS"); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, set); err != nil {
					t.Fatal(err)
				}
				conn.take()
				// Six runs, so that a prepared statement's generic plan would be in use.
				var n int
				for range 6 {
					rows, err := tx.Query(ctx, tc.sql, tc.args...)
					if err != nil {
						t.Fatal(err)
					}
					n = 0
					for rows.Next() {
						n++
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
					}
				}
				if n == 0 {
					t.Fatal("the pick found no task")
				}
				got := conn.take()
				var bad []string
				picks := 0
				for _, msg := range got {
					i := strings.IndexByte(msg, '{')
					if i < 0 {
						continue
					}
					var plan struct {
						Query string `json:"Query Text"`
						Plan  planNode
					}
					if err := json.Unmarshal([]byte(msg[i:]), &plan); err != nil {
						t.Fatalf("auto_explain notice: %v\n%s", err, msg)
					}
					if strings.Contains(plan.Query, "FOR UPDATE OF t SKIP LOCKED") {
						picks++
					}
					walkPlan(plan.Plan, func(n planNode) {
						switch {
						case n.NodeType == "Sort", n.NodeType == "Incremental Sort":
							bad = append(bad, "a sort")
						case n.RelationName == "tasks" && n.NodeType == "Seq Scan":
							bad = append(bad, "a sequential scan of tasks")
						case n.NodeType == "Bitmap Index Scan" && strings.HasPrefix(n.IndexName, "tasks_ready"):
							// A bitmap of the ready index is every ready row, then sorted; one of
							// the primary key (the picked ids) is bounded by the pick.
							bad = append(bad, "a bitmap scan of "+n.IndexName)
						}
					})
				}
				if picks == 0 {
					t.Fatalf("auto_explain reported no plan of task_pick's statement in %d notices", len(got))
				}
				switch {
				case mode == "control" && len(bad) == 0:
					t.Errorf("with index scans off, the check found nothing wrong in:\n%s", strings.Join(got, "\n"))
				case mode != "control" && len(bad) > 0:
					t.Errorf("the plans hold %s:\n%s", strings.Join(bad, ", "), strings.Join(got, "\n"))
				}
			})
		}
	}
}

// openTestSchema opens a store in a new schema of its own, dropped when the test ends (the
// package's external tests have drivertest for this, which imports this package).
func openTestSchema(t *testing.T) *DB {
	t.Helper()
	url := os.Getenv("SLUICE_TEST_DATABASE_URL")
	if url == "" {
		if os.Getenv("SLUICE_TEST_REQUIRE_POSTGRES") == "1" {
			t.Fatal("PostgreSQL required: set SLUICE_TEST_DATABASE_URL")
		}
		t.Skip("PostgreSQL: set SLUICE_TEST_DATABASE_URL")
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "sluice_test_" + hex.EncodeToString(b)
	db, err := Open(t.Context(), Config{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		DropSchema(c, url, schema)
	})
	return db
}

type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	Plans        []planNode `json:"Plans"`
}

func walkPlan(n planNode, fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		walkPlan(c, fn)
	}
}

// explained is a connection of its own whose notices carry the plans auto_explain reports.
type explained struct {
	*pgx.Conn
	mu      sync.Mutex
	notices []string
}

// explainConn connects to the test schema with auto_explain loaded, reporting plans as JSON
// notices, with settings run after.
func explainConn(t *testing.T, url, schema string, settings ...string) *explained {
	t.Helper()
	ctx := t.Context()
	e := &explained{}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		e.mu.Lock()
		e.notices = append(e.notices, n.Message)
		e.mu.Unlock()
	}
	if e.Conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Conn.Close(context.Background()) })
	for _, q := range append([]string{
		"SET search_path TO " + pgx.Identifier{schema}.Sanitize(),
		"LOAD 'auto_explain'",
		"SET auto_explain.log_format = json",
		"SET auto_explain.log_level = notice",
		"SET client_min_messages = notice",
	}, settings...) {
		if _, err := e.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v (auto_explain ships with PostgreSQL; LOAD needs a superuser)", q, err)
		}
	}
	return e
}

// take returns the notices so far and forgets them.
func (e *explained) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.notices
	e.notices = nil
	return got
}

// TestPickPlannedOnce: task_pick keeps its plan for the connection (migration 022) — its pins
// leave the plan no choice to make per call, and planning each call was most of a one-task
// lease. TestLeasePlanAtScale checks that plan at a large backlog.
func TestPickPlannedOnce(t *testing.T) {
	t.Parallel()
	db := openTestSchema(t)
	var config []string
	if err := db.pool.QueryRow(t.Context(), `SELECT proconfig FROM pg_proc WHERE oid = 'task_pick'::regproc`).Scan(&config); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"plan_cache_mode=force_generic_plan", "enable_sort=off", "enable_seqscan=off"} {
		if !slices.Contains(config, want) {
			t.Errorf("task_pick's settings are %q, want %s among them", config, want)
		}
	}
}
