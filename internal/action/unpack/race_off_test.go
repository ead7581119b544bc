//go:build !race

package unpack

// raceEnabled reports whether the race detector, which multiplies memory use, is on.
const raceEnabled = false
