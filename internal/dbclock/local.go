//go:build !sluicetestclock

package dbclock

import "time"

// LocalClock returns the machine's clock, time.Now. Builds with the sluicetestclock tag shift
// it by SLUICE_TEST_CLOCK_OFFSET instead, to test a worker whose clock is off.
func LocalClock() func() time.Time { return time.Now }
