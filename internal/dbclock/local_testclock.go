//go:build sluicetestclock

package dbclock

import (
	"os"
	"time"
)

// LocalClock returns the machine's clock shifted by SLUICE_TEST_CLOCK_OFFSET (a Go duration,
// "5m" or "-5m"): this build is only for the tests of a worker whose clock is off, and no
// release binary reads that variable.
func LocalClock() func() time.Time {
	v := os.Getenv("SLUICE_TEST_CLOCK_OFFSET")
	if v == "" {
		return time.Now
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic("SLUICE_TEST_CLOCK_OFFSET: " + err.Error())
	}
	return func() time.Time { return time.Now().Add(d) }
}
