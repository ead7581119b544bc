package action

import (
	"errors"
	"fmt"
	"time"
)

// PermanentError marks bad input: the item gets the error and the task is not retried.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a bad-input error shown to the user and never retried.
// Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Permanentf is [Permanent] of fmt.Errorf.
func Permanentf(format string, args ...any) error {
	return &PermanentError{Err: fmt.Errorf(format, args...)}
}

// IsPermanent reports whether err is or wraps a [PermanentError].
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// SnoozeError asks the engine to run the task again after a delay without spending an attempt.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze returns an error that reschedules the task after d without counting an attempt.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: d} }

// AsSnooze returns the snooze delay if err is or wraps a [SnoozeError].
func AsSnooze(err error) (time.Duration, bool) {
	var s *SnoozeError
	if errors.As(err, &s) {
		return s.Delay, true
	}
	return 0, false
}
