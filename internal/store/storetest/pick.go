package storetest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Backlog fills a store with ready tasks for [BenchmarkPickAtBacklog]: ready ready tasks of
// queue "q" with sort keys in order, and the finished tasks before them in pick order, as a
// burndown leaves them (on Postgres, dead entries in the ready index until a vacuum). Drivers
// write it in SQL, since inserting millions of tasks through the store API would take hours.
type Backlog func(tb testing.TB, s store.Store, ready, finished int)

// BenchmarkPickAtBacklog measures the pick of every lease at backlogs of ready tasks given by
// SLUICE_BENCH_BACKLOGS (comma-separated; default "1000,100000"), each also with as many
// finished tasks before them (at most 1,000,000, a burndown's worth before autovacuum comes): one op leases 1,000 tasks (TaskGetAvailable) or takes them as a
// brief batch (Brief), in a transaction rolled back, so the backlog stays as it
// was. It reports µs/task: at a pick that costs the same at any backlog, the figures match.
func BenchmarkPickAtBacklog(b *testing.B, open func(tb testing.TB) store.Store, fill Backlog) {
	sizes := []int{1000, 100_000}
	if v := os.Getenv("SLUICE_BENCH_BACKLOGS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1000 {
				b.Fatalf("SLUICE_BENCH_BACKLOGS: %q is not a count of at least 1000", f)
			}
			sizes = append(sizes, n)
		}
	}
	const limit = 1000
	errRollback := errors.New("roll back")
	for _, n := range sizes {
		for _, finished := range []int{0, min(n, 1_000_000)} {
			b.Run(fmt.Sprintf("ready=%d/finished=%d", n, finished), func(b *testing.B) {
				s := open(b)
				t0 := time.Now()
				fill(b, s, n, finished)
				b.Logf("filled %d ready and %d finished tasks in %s", n, finished, time.Since(t0).Round(time.Millisecond))
				ctx := b.Context()
				for _, mode := range []string{"lease", "hold"} {
					b.Run(mode, func(b *testing.B) {
						tasks := 0
						for b.Loop() {
							now := time.Now()
							err := s.InTx(ctx, func(x store.Executor) error {
								var ts []*record.Task
								var err error
								p := store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{limit}, Owner: "bench", Now: now, LeaseUntil: now.Add(time.Minute), Brief: mode == "hold"}
								ts, err = x.TaskGetAvailable(ctx, p)
								if err != nil {
									return err
								}
								if len(ts) != min(limit, n) {
									return fmt.Errorf("picked %d tasks, want %d", len(ts), min(limit, n))
								}
								tasks += len(ts)
								return errRollback
							})
							if !errors.Is(err, errRollback) {
								b.Fatal(err)
							}
						}
						b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(tasks), "µs/task")
					})
				}
			})
		}
	}
}
