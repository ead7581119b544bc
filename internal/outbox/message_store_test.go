package outbox

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"

	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/sink"
	"github.com/sluice-project/sluice/internal/store"
)

// TestMessageStore is the conformance suite of the outbox's typed store: the same behaviour
// from the statements of every dialect, on every driver.
func TestMessageStore(t *testing.T) {
	t.Parallel()
	domaintest.ForEachStore(t, DomainName, domain{}, func(t *testing.T, db store.Store) {
		ctx := t.Context()
		ms := messagesIn(db)
		if id, err := ms.installation(ctx); err != nil || id == "" {
			t.Fatalf("installation id %q, %v", id, err)
		}

		msg := func(sinkName string, i int) newMessage {
			return newMessage{sink: sinkName, createdAt: int64(1000 + i), msg: sink.Message{ID: fmt.Sprintf("m%d", i), Subject: "s",
				Attributes: map[string]string{"n": fmt.Sprint(i)}, Body: []byte(fmt.Sprintf(`{"n":%d}`, i))}}
		}
		if err := ms.insert(ctx, []newMessage{msg("a", 1), msg("a", 2), msg("b", 3)}); err != nil {
			t.Fatal(err)
		}
		// A message inserted again (a replayed commit) is not there twice.
		if err := ms.insert(ctx, []newMessage{msg("a", 2), msg("a", 4)}); err != nil {
			t.Fatal(err)
		}
		// On PostgreSQL a transaction open anywhere in the cluster (other tests) holds the
		// messages back a moment (see outboxSQL).
		var all []row
		poll.Until(t, 30*time.Second, "the messages of a readable", func() (bool, string) {
			var err error
			if all, err = ms.pending(ctx, "a", 10); err != nil {
				t.Fatal(err)
			}
			return len(all) == 3, fmt.Sprint(all)
		})
		if all[2].msg.ID != "m4" {
			t.Fatalf("pending of a: %+v", all)
		}
		rows, err := ms.pending(ctx, "a", 2)
		if err != nil || len(rows) != 2 || rows[0].msg.ID != "m1" || rows[1].msg.ID != "m2" ||
			rows[1].msg.Attributes["n"] != "2" || string(rows[1].msg.Body) != `{"n":2}` {
			t.Fatalf("pending, 2 of a: %+v, %v", rows, err)
		}

		// One owner holds a lease until it ends; another takes it only after.
		if ok, err := ms.claim(ctx, "a", "p1", 500, 100); !ok || err != nil {
			t.Fatalf("first claim: %v, %v", ok, err)
		}
		if ok, err := ms.claim(ctx, "a", "p2", 600, 200); ok || err != nil {
			t.Fatalf("claim of a held lease: %v, %v", ok, err)
		}
		if ok, err := ms.claim(ctx, "a", "p1", 700, 200); !ok || err != nil {
			t.Fatalf("renewal: %v, %v", ok, err)
		}
		if err := ms.release(ctx, "a", "p2"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := ms.claim(ctx, "a", "p2", 800, 300); ok {
			t.Fatal("another owner's release ended the lease")
		}
		if err := ms.release(ctx, "a", "p1"); err != nil {
			t.Fatal(err)
		}
		if ok, err := ms.claim(ctx, "a", "p2", 900, 300); !ok || err != nil {
			t.Fatalf("claim after a release: %v, %v", ok, err)
		}

		if err := ms.failed(ctx, "a", []int64{rows[0].id}, "down", 42); err != nil {
			t.Fatal(err)
		}
		if err := ms.delete(ctx, []int64{rows[0].id, rows[1].id}); err != nil {
			t.Fatal(err)
		}
		if err := ms.settled(ctx, "a", 2, 5); err != nil {
			t.Fatal(err)
		}
		counts, err := ms.counts(ctx)
		slices.SortFunc(counts, func(a, b pendingCount) int { return strings.Compare(a.sink, b.sink) })
		if got, want := fmt.Sprint(counts), fmt.Sprint([]pendingCount{{"a", 1, 1004}, {"b", 1, 1003}}); err != nil || got != want {
			t.Errorf("counts: %s, %v; want %s", got, err, want)
		}
		relays, err := ms.relays(ctx)
		if err != nil || len(relays) != 1 {
			t.Fatalf("relays: %+v, %v", relays, err)
		}
		if r := relays[0]; r.sink != "a" || r.until != 900 || r.delivered != 2 || r.dropped != 5 || r.failures != 1 || r.lastErr != "down" || r.lastErrAt != 42 {
			t.Errorf("relay row: %+v", r)
		}
	})
}
