package postgres

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestFinishPlanAfterGrowth: a held batch's finish must not keep a plan made while tasks was
// tiny. On one connection whose prepared statements use their generic plan (as Postgres chooses
// after five runs), the finish statement runs while the table is new and under ten pages, which
// caches that plan; then the table grows to
// thousands of ready tasks and a thousand of them finish. Run bare (the control), the cached plan
// scans the table and re-reads the finished pairs for each of its rows; run as the driver runs it
// (TaskSetStateIfRunningMany in a transaction), the plan is made for the table as it is and looks the tasks
// up by their key. auto_explain reports the plans Postgres executed.
func TestFinishPlanAfterGrowth(t *testing.T) {
	// The control needs the cached plan to outlive the growth; a cache reset (the shared
	// invalidation queue overflowing while other packages' tests create and drop schemas) makes
	// Postgres plan it again for the grown table. It is tried afresh, up to three times.
	for attempt := 1; ; attempt++ {
		control, ok := finishPlanAfterGrowth(t)
		if ok {
			return
		}
		if attempt == 3 {
			t.Fatalf("control: the bare finish's cached plan = %s in each of 3 tries; want the sequential scan of tasks made while it was tiny (else this test checks nothing)", control)
		}
		t.Logf("control, try %d: the bare finish's cached plan = %s; trying again on a new schema", attempt, control)
	}
}

// finishPlanAfterGrowth runs TestFinishPlanAfterGrowth on a new schema. It returns the control's
// plan and false when the control did not show the plan made while tasks was tiny.
func finishPlanAfterGrowth(t *testing.T) (string, bool) {
	db := openTestSchema(t)
	url, schema := os.Getenv("SLUICE_TEST_DATABASE_URL"), db.schema
	ctx := t.Context()
	// The plan Postgres caches after five runs (it chose it in the benchmark's slow rounds, not
	// at every run), chosen at once.
	conn := explainConn(t, url, schema, "SET plan_cache_mode = force_generic_plan")
	ready := func(from, n int) {
		t.Helper()
		if _, err := db.pool.Exec(ctx, `INSERT INTO tasks (id, job_id, item_id, step, action, queue, state, max_attempts, sort_key, created_at)
			SELECT g, 1, g, 's', 'a', 'q', 'ready', 3, lpad(g::text, 10, '0'), 0 FROM generate_series($1::bigint, $2::bigint) g`, from, from+n-1); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	finish := func(from, n int) []store.TaskFinishParams {
		ps := make([]store.TaskFinishParams, n)
		for i := range ps {
			ps[i] = store.TaskFinishParams{ID: int64(from + i), Attempt: 1, State: record.TaskComplete, Now: now, Started: now}
		}
		return ps
	}
	// bare runs the finish statement alone in a transaction, as it was sent before.
	bare := func(ps []store.TaskFinishParams) {
		t.Helper()
		g := finishGroup{}
		for _, p := range ps {
			g.ids, g.attempts = append(g.ids, p.ID), append(g.attempts, int32(p.Attempt))
		}
		args := append([]any{g.ids, g.attempts}, taskFinishArgs(ps[0])[:5]...)
		args = append(args, ps[0].Worker, micros(now))
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, qTaskFinishHeldMany, args...)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// plans returns the node types auto_explain reported for finishes since the last call.
	plans := func() []string {
		t.Helper()
		got := conn.take()
		var nodes []string
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
			if !strings.HasPrefix(plan.Query, "UPDATE tasks") {
				continue
			}
			walkPlan(plan.Plan, func(n planNode) { nodes = append(nodes, n.NodeType+" "+n.RelationName+n.IndexName) })
		}
		if len(nodes) == 0 {
			t.Fatalf("auto_explain reported no finish in %d notices", len(got))
		}
		return nodes
	}

	// No autovacuum on this schema's tasks: an analyze after the growth below invalidates the
	// cached plan, and the control then plans for the grown table (it failed so, now and then).
	if _, err := db.pool.Exec(ctx, `ALTER TABLE tasks SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	ready(1, 20)
	for i := range 6 {
		bare(finish(1+3*i, 3))
	}
	if _, err := conn.Exec(ctx, "SET auto_explain.log_min_duration = 0"); err != nil {
		t.Fatal(err)
	}
	conn.take()
	ready(1000, 5000)

	bare(finish(1000, 1000))
	if got := strings.Join(plans(), ", "); !strings.Contains(got, "Seq Scan tasks") {
		return got, false
	}

	tc := &txConn{conn: conn.Conn}
	q := &queries{db: db, c: tc, inTx: true, brief: &briefBatch{attempts: map[int64]int{}}}
	ps := finish(3000, 1000)
	for _, p := range ps { // a brief batch's finish
		q.brief.attempts[p.ID] = p.Attempt
	}
	oks, err := q.TaskSetStateIfRunningMany(ctx, ps)
	if err == nil {
		err = tc.commit(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range oks {
		if !ok {
			t.Fatalf("task %d not finished", 3000+i)
		}
	}
	if got := strings.Join(plans(), ", "); strings.Contains(got, "Seq Scan tasks") || !strings.Contains(got, "Index Scan taskstasks_pkey") {
		t.Errorf("the driver's finish plan = %s; want tasks looked up by their key, no sequential scan", got)
	}
	return "", true
}
