package action_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
)

func boom() error { panic("boom") }

// TestSafe checks that a panic becomes a PanicError with its value and a stack naming the
// panicking function, and that an ordinary error passes through untouched.
func TestSafe(t *testing.T) {
	t.Parallel()
	err := action.Safe(boom)
	var pe *action.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || !strings.Contains(pe.Stack, "action_test.boom") ||
		err.Error() != "action panicked: boom" {
		t.Fatalf("Safe(panic) = %v (%+v); want a PanicError with the value and the stack", err, pe)
	}
	plain := errors.New("plain")
	if err := action.Safe(func() error { return plain }); err != plain {
		t.Fatalf("Safe(error) = %v; want the error itself", err)
	}
}
