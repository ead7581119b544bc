// Package poll lets tests wait on a condition with a deadline instead of sleeping: the condition
// is checked on a ticker, and the test fails with the condition's last report when time runs out.
package poll

import (
	"testing"
	"time"
)

// Interval is how often [Until] checks its condition. Not shorter: many conditions are queries,
// and 5 ms made a sampled count on PostgreSQL compete with the work it watched (a backlog test
// took 57 s, 31 s at 10 ms, the same at 20).
const Interval = 10 * time.Millisecond

// Until checks cond every [Interval] until it reports done, failing t after d. cond returns
// whether it is done and a description of the state it saw, used in the failure message.
func Until(t testing.TB, d time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	var state string
	UntilDone(t, d, what, func() bool {
		var done bool
		done, state = cond()
		return done
	}, func() string { return state })
}

// UntilDone is [Until] for a condition whose description is costly: state is called only when
// time has run out, for the failure message.
func UntilDone(t testing.TB, d time.Duration, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", d, what, state())
		case <-tick.C:
		}
	}
}
