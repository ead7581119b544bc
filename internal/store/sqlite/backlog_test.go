package sqlite

import (
	"testing"

	"github.com/sluice-project/sluice/internal/store"
)

// FillBacklog writes ready and finished tasks straight into the tasks table, for
// storetest.BenchmarkPickAtBacklog: finished ones first in pick order, then ready ones, spread
// over jobs of 100,000. SQLite updates its indexes in place, so finished tasks leave nothing in
// the ready index.
func FillBacklog(tb testing.TB, s store.Store, ready, finished int) {
	db := s.(*DB)
	_, err := db.w.ExecContext(tb.Context(), `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
		INSERT INTO tasks (job_id, item_id, step, action, queue, state, attempt, max_attempts, sort_key, created_at)
		SELECT 1 + n / 100000, n, 's', 'a', 'q', CASE WHEN n <= ? THEN 'complete' ELSE 'ready' END, n <= ?, 3, printf('%010d', n), 0 FROM g`,
		ready+finished, finished, finished)
	if err != nil {
		tb.Fatal(err)
	}
}
