package dbclock

import "time"

// testOffset shifts the machine's clock, for the tests of a worker whose clock is off: set at
// link time only (go build -ldflags "-X .../dbclock.testOffset=5m"), so that the test's skewed
// binary is linked from the packages already built. A release binary leaves it empty and reads
// no variable of the environment for it.
var testOffset string

// LocalClock returns the machine's clock, time.Now, shifted by testOffset in a test's skewed
// build.
func LocalClock() func() time.Time {
	if testOffset == "" {
		return time.Now
	}
	d, err := time.ParseDuration(testOffset)
	if err != nil {
		panic("dbclock.testOffset: " + err.Error())
	}
	return func() time.Time { return time.Now().Add(d) }
}
