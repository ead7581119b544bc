package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/store"
)

// FailedCommit returns the outcome to commit, in a fresh transaction, for a result whose own
// transaction failed: the same attempt, with none of its effects, failed with an error naming
// the reason. Without it the task would stay running under a lease its worker keeps renewing.
//
// The failure is permanent (an effect that cannot be applied — metadata that is not JSON, a
// nondeterministic child — fails the same way on every attempt), except when the database gave
// up on the transaction for another's sake (store.ErrRetry) or the context ended: those say
// nothing about the task, which is then retried as after a transient error; and except when
// the database's disk is full (store.ErrFull), when the task waits for space without being
// charged the attempt (see [FullBackoff]).
func FailedCommit(r *Result, err error) *Result {
	cause := fmt.Errorf("commit the result of %s (attempt %d): %w", r.Task.Action, r.Task.Attempt, err)
	if !errors.Is(err, store.ErrRetry) && !errors.Is(err, store.ErrFull) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		cause = action.Permanent(cause)
	}
	return &Result{Task: r.Task, Owner: r.Owner, Started: r.Started, Err: cause}
}
