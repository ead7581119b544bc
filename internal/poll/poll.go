// Package poll lets tests wait on a condition with a deadline instead of sleeping: the condition
// is checked on a ticker, and the test fails with the condition's last report when time runs out.
package poll

import (
	"testing"
	"time"
)

// Interval is how often [Until] checks its condition.
const Interval = 5 * time.Millisecond

// Until checks cond every [Interval] until it reports done, failing t after d. cond returns
// whether it is done and a description of the state it saw, used in the failure message.
func Until(t testing.TB, d time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		done, state := cond()
		if done {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", d, what, state)
		case <-tick.C:
		}
	}
}
