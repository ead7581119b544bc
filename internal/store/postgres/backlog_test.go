package postgres

import (
	"testing"

	"github.com/sluice-project/sluice/internal/store"
)

// FillBacklog writes ready tasks straight into the tasks table, for
// storetest.BenchmarkPickAtBacklog, spread over jobs of 100,000, then finishes the first
// finished of them in pick order as a burndown does: their rows leave the ready index's range,
// while their dead entries stay in it until a vacuum. Then it analyzes the table, as autovacuum
// would have.
func FillBacklog(tb testing.TB, s store.Store, ready, finished int) {
	db := s.(*DB)
	for _, q := range []string{
		`INSERT INTO tasks (job_id, item_id, step, action, queue, state, max_attempts, sort_key, created_at)
		 SELECT 1 + g / 100000, g, 's', 'a', 'q', 'ready', 3, lpad(g::text, 10, '0'), 0 FROM generate_series(1, $1::int) g`,
		`UPDATE tasks SET state = 'complete', attempt = 1 WHERE item_id <= $1::int`,
		`ANALYZE tasks`,
	} {
		var args []any
		switch q[0] {
		case 'I':
			args = []any{ready + finished}
		case 'U':
			args = []any{finished}
		}
		if _, err := db.pool.Exec(tb.Context(), q, args...); err != nil {
			tb.Fatal(err)
		}
	}
}
