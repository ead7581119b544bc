package fleet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/store"
)

// TestMemberStore is the conformance suite of the register's typed store: the same behaviour
// from the statements of every dialect, on every driver.
func TestMemberStore(t *testing.T) {
	t.Parallel()
	domaintest.ForEachStore(t, DomainName, domain{}, func(t *testing.T, db store.Store) {
		ctx := t.Context()
		ms := membersIn(db)
		at := func(s int) time.Time { return time.Unix(1_000_000+int64(s), 0).UTC() }
		put := func(m memberRow) {
			t.Helper()
			if err := ms.put(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		unix := func(t time.Time) int64 {
			if t.IsZero() {
				return 0
			}
			return t.Unix()
		}
		rows := func() string {
			t.Helper()
			rs, err := ms.list(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range rs {
				out = append(out, fmt.Sprintf("%s|%s|%s|%s|%v|%d|%d|%d|%d|%d", m.id, m.kind, m.name, m.via, m.actions, m.inFlight, m.polling,
					unix(m.started), unix(m.seen), unix(m.staleAt)))
			}
			slices.Sort(out)
			return strings.Join(out, "\n")
		}

		put(memberRow{id: "p1", kind: KindProcess, name: "host (pid 1)", started: at(0), seen: at(1), staleAt: at(16)})
		put(memberRow{id: "p1 r1", kind: KindRemote, name: "w", via: "p1", actions: []string{"pdf"}, inFlight: 2, polling: 1, seen: at(1), staleAt: at(16)})
		put(memberRow{id: "p2", kind: KindProcess, name: "other (pid 2)", started: at(0), seen: at(1), staleAt: at(2)})
		// A later write replaces a row but for its start time.
		put(memberRow{id: "p1", kind: KindProcess, name: "host (pid 1)", actions: []string{"office"}, inFlight: 3, started: at(5), seen: at(6), staleAt: at(21)})
		want := "p1 r1|remote|w|p1|[pdf]|2|1|0|1000001|1000016\n" +
			"p1|process|host (pid 1)||[office]|3|0|1000000|1000006|1000021\n" +
			"p2|process|other (pid 2)||[]|0|0|1000000|1000001|1000002"
		if got := rows(); got != want {
			t.Fatalf("rows:\n%s\nwant\n%s", got, want)
		}
		if err := ms.deleteStale(ctx, at(3)); err != nil {
			t.Fatal(err)
		}
		if err := ms.deleteVia(ctx, "p1"); err != nil {
			t.Fatal(err)
		}
		if got, want := rows(), "p1|process|host (pid 1)||[office]|3|0|1000000|1000006|1000021"; got != want {
			t.Fatalf("after deleting p1's remotes and the rows stale before 3s: \n%s\nwant\n%s", got, want)
		}
		put(memberRow{id: "p1 r2", kind: KindRemote, name: "w2", via: "p1", seen: at(7), staleAt: at(20)})
		if err := ms.deleteOwn(ctx, "p1"); err != nil {
			t.Fatal(err)
		}
		if got := rows(); got != "" {
			t.Fatalf("after deleting p1's own rows: %s", got)
		}
	})
}
