package sqlite_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/sqlite"
	"github.com/sluice-project/sluice/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(tb testing.TB) store.Store {
	tb.Helper()
	db, err := sqlite.Open(tb.Context(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "sluice.db")})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return db
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store { return open(t) })
}

func BenchmarkLeaseFinish(b *testing.B) {
	storetest.BenchmarkLeaseFinish(b, open, 10_000)
}

// BenchmarkPickAtBacklog: SLUICE_BENCH_BACKLOGS=1000,10000000 for the figures of
// docs/performance.md.
func BenchmarkPickAtBacklog(b *testing.B) {
	storetest.BenchmarkPickAtBacklog(b, open, sqlite.FillBacklog)
}
