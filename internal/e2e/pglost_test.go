package e2e

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// TestAsyncFailoverLostCommit: with asynchronous replication a commit the primary acknowledged
// is lost when the primary dies before its standby received it and the standby is promoted.
// The store's WaitReplicated, which the outbox's relay calls between reading messages and
// publishing them, does not return for such a commit: a message whose commit was lost is never
// published. It returns at once for what the standby holds.
func TestAsyncFailoverLostCommit(t *testing.T) {
	haRequired(t)
	t.Parallel()
	ha := startPGHA(t, true)
	ctx := t.Context()
	st, err := postgres.Open(ctx, postgres.Config{URL: ha.URL(), Schema: "lost"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	exec := func(q string) error {
		c, err := pgx.Connect(ctx, ha.URL())
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		_, err = c.Exec(ctx, q)
		return err
	}
	if err := exec("CREATE TABLE lost.marks (name text PRIMARY KEY); INSERT INTO lost.marks VALUES ('replicated')"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	if err := st.WaitReplicated(wctx); err != nil {
		t.Fatalf("WaitReplicated with the standby streaming: %v", err)
	}
	cancel()

	// The primary stops sending (its WAL sender stopped, so that nothing is even in the
	// socket's buffers), then acknowledges a commit the standby never sees.
	primary := ha.primary()
	wr := ha.child(primary, "walsender")
	if wr == 0 {
		t.Fatalf("the primary has no WAL sender\n%s", ha.logs())
	}
	if err := syscall.Kill(wr, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := exec("INSERT INTO lost.marks VALUES ('lost')"); err != nil {
		t.Fatalf("the async primary refused a commit: %v", err)
	}
	wctx, cancel = context.WithTimeout(ctx, 3*time.Second)
	err = st.WaitReplicated(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReplicated returned %v for a commit the standby does not hold, want it to wait", err)
	}

	// The primary dies, its stopped sender with it; the standby is promoted without the commit.
	ha.kill(primary)
	killed := time.Now()
	poll.Until(t, 3*time.Minute, "the standby promoted", func() (bool, string) {
		s, err := ha.states(ctx)
		return writable(ctx, ha.URL()), fmt.Sprint(s, err)
	})
	t.Logf("writes commit again %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	c, err := pgx.Connect(ctx, ha.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var names []string
	rows, err := c.Query(ctx, "SELECT name FROM lost.marks ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	if fmt.Sprint(names) != "[replicated]" {
		t.Fatalf("after the failover the rows are %v, want [replicated]: the acknowledged commit lost", names)
	}
}
