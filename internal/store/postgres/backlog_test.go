package postgres

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// FillBacklog writes ready tasks straight into the tasks table, for
// storetest.BenchmarkPickAtBacklog, spread over jobs of 100,000, and vacuums the table (as
// autovacuum would have, so that it does not run during the measurement). Then it finishes the
// first finished of them in pick order as a burndown does: their rows leave the ready index's
// range, while their dead entries stay in it until the next vacuum. Last, it logs the buffers
// one pick of 1,000 touches, from EXPLAIN (ANALYZE, BUFFERS): a measure of its cost that the
// machine's other load does not move.
func FillBacklog(tb testing.TB, s store.Store, ready, finished int) {
	db := s.(*DB)
	ctx := tb.Context()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tasks (job_id, item_id, step, action, queue, state, max_attempts, sort_key, created_at)
		 SELECT 1 + g / 100000, g, 's', 'a', 'q', 'ready', 3, lpad(g::text, 10, '0'), 0 FROM generate_series(1, $1::int) g`, []any{ready + finished}},
		{`VACUUM ANALYZE tasks`, nil},
		{`UPDATE tasks SET state = 'complete', attempt = 1 WHERE item_id <= $1::int`, []any{finished}},
		{`ANALYZE tasks`, nil},
		{`CHECKPOINT`, nil},
	} {
		if _, err := db.pool.Exec(ctx, q.sql, q.args...); err != nil {
			tb.Fatal(err)
		}
	}
	// From the front of the index twice (the first also marks the finished tasks' entries
	// dead), then from the floor a process would have after its first pick: the first ready task.
	first := finished + 1
	for i, from := range [][2]any{{int64(0), ""}, {int64(0), ""}, {int64(1 + first/100000), fmt.Sprintf("%010d", first)}} {
		tx, err := db.pool.Begin(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		var raw []byte
		err = tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM task_pick(ARRAY['q'], $1, ARRAY[1000], ARRAY[$2::bigint], ARRAY[$3::text], ARRAY[]::bigint[])`,
			micros(time.Now()), from[0], from[1]).Scan(&raw)
		tx.Rollback(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		var plan []struct {
			Plan struct {
				Hit  int     `json:"Shared Hit Blocks"`
				Read int     `json:"Shared Read Blocks"`
				Rows int     `json:"Actual Rows"`
				Time float64 `json:"Actual Total Time"`
			}
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			tb.Fatal(err)
		}
		p := plan[0].Plan
		tb.Logf("pick %d from (%v, %q): %d tasks, %d buffers (%d read), %.2f ms", i+1, from[0], from[1], p.Rows, p.Hit+p.Read, p.Read, p.Time)
	}
}
