package converter

import (
	"errors"

	"github.com/sluice-project/sluice/internal/subprocess"
)

// exitStderr returns the captured stderr of a failed tool run, or "".
func exitStderr(err error) string {
	var ee *subprocess.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return ""
}

// Stderr returns the captured stderr tail of a tool that exited non-zero, or "" for any other
// error. Actions use it to recognise tool-specific conditions such as a wrong password.
func Stderr(err error) string { return exitStderr(err) }

// ExitCode returns the exit status of a tool that exited non-zero, or 0 for any other error.
func ExitCode(err error) int {
	var ee *subprocess.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 0
}
