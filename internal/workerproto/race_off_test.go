//go:build !race

package workerproto_test

// raceEnabled reports whether the race detector, which slows streaming tenfold, is on.
const raceEnabled = false
