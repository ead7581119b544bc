package domaintest

import (
	"encoding/json"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// ForEachStore runs fn as a parallel subtest per store driver, with a new store holding the
// domain's tables (its migrations applied): the setup of the conformance suite of a domain's
// typed store, which holds its statements to one contract in every dialect.
func ForEachStore(t *testing.T, name string, d engine.Domain, fn func(t *testing.T, db store.Store)) {
	t.Helper()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		db := open(t)
		if _, err := db.MigrateDomain(t.Context(), name, d.Migrations(db.DomainSQL().Dialect())); err != nil {
			t.Fatalf("migrate domain %s: %v", name, err)
		}
		fn(t, db)
	})
}

// Apply applies writes as a task of the job (its items numbered jobID*10) would have them
// applied: their payloads encoded, in one transaction of db.
func Apply(tb testing.TB, db store.Store, d engine.Domain, jobID int64, ws []action.DomainWrite) error {
	tb.Helper()
	out := make([]engine.DomainWrite, len(ws))
	for i, w := range ws {
		b, err := json.Marshal(w.Payload)
		if err != nil {
			tb.Fatalf("encode write %q: %v", w.Key, err)
		}
		out[i] = engine.DomainWrite{Domain: w.Domain, Key: w.Key, Payload: b, JobID: jobID, ItemID: jobID * 10}
	}
	return db.InTx(tb.Context(), func(x store.Executor) error { return d.Apply(tb.Context(), x.DomainSQL(), out) })
}
