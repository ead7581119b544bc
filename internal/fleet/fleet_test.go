package fleet_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/fleet"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRegister has two engine processes share a database, one serving a remote worker: both
// are listed, with their actions and tasks in flight; the remote worker under its process,
// stale once quiet for a minute; a process that stops writing (killed) is flagged stale after
// three intervals and forgotten an hour later, and one that stops cleanly deletes its rows.
// On both drivers.
func TestRegister(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		k := enginetest.Start(t, open)
		ctx := t.Context()
		clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		inFlight := 3
		a := fleet.New(fleet.Config{Store: k.Store, ID: "owner-a", Name: "host-a (pid 1)", InFlight: func() int { return inFlight }, Now: clk.Now})
		if err := a.Register(ctx, k.Engine); err != nil {
			t.Fatal(err)
		}
		b := fleet.New(fleet.Config{Store: k.Store, ID: "owner-b", Name: "host-b (pid 2)", Actions: []string{"office", "pdf"}, Now: clk.Now})
		remoteSeen := clk.Now()
		a.ServeRemotes(func() []workerproto.RemoteClient {
			return []workerproto.RemoteClient{{ID: "tok 10.0.0.9 w", TokenID: "tok", Addr: "10.0.0.9", Agent: "sluice-worker (box; pid 7)",
				Actions: []string{"Pdf"}, InFlight: 2, Seen: remoteSeen}}
		})
		for _, r := range []*fleet.Register{a, b} {
			if err := r.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		list := func() string {
			t.Helper()
			ms, err := fleet.List(ctx, k.Store, clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			s := ""
			for _, m := range ms {
				s += fmt.Sprintf("%s|%s|%v|%d|stale=%v\n", m.Kind, m.Name, m.Actions, m.InFlight, m.Stale)
			}
			return s
		}
		want := "process|host-a (pid 1)|[]|3|stale=false\n" +
			"remote|sluice-worker (box; pid 7) from 10.0.0.9 (token tok)|[Pdf]|2|stale=false\n" +
			"process|host-b (pid 2)|[office pdf]|0|stale=false\n"
		if got := list(); got != want {
			t.Fatalf("register:\n%s\nwant:\n%s", got, want)
		}

		// 20 s on, both write again, but the remote worker has been quiet since: still
		// connected. Then b stops writing (killed) and the remote worker stays quiet.
		clk.add(20 * time.Second)
		inFlight = 1
		for _, r := range []*fleet.Register{a, b} {
			if err := r.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		clk.add(50 * time.Second)
		if err := a.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		want = "process|host-a (pid 1)|[]|1|stale=false\n" +
			"remote|sluice-worker (box; pid 7) from 10.0.0.9 (token tok)|[Pdf]|2|stale=true\n" +
			"process|host-b (pid 2)|[office pdf]|0|stale=true\n"
		if got := list(); got != want {
			t.Fatalf("after b stopped writing and the remote worker went quiet:\n%s\nwant:\n%s", got, want)
		}

		// An hour on, a's write deletes b's row.
		clk.add(time.Hour)
		remoteSeen = clk.Now()
		if err := a.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		want = "process|host-a (pid 1)|[]|1|stale=false\n" +
			"remote|sluice-worker (box; pid 7) from 10.0.0.9 (token tok)|[Pdf]|2|stale=false\n"
		if got := list(); got != want {
			t.Fatalf("an hour later:\n%s\nwant:\n%s", got, want)
		}

		// A clean stop deletes the process's rows, its remote workers' too.
		a.Start(ctx)
		a.Stop()
		if got := list(); got != "" {
			t.Fatalf("after a stopped:\n%s", got)
		}
	})
}
