package action

import (
	"fmt"
	"runtime/debug"
)

// PanicError is the error of a call into an action that panicked (see [Safe]): a panic in an
// action is the action's bug, reported as an error with its stack, never a crash (DESIGN §4.5).
type PanicError struct {
	// Value is what the action panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack string
}

func (p *PanicError) Error() string { return fmt.Sprintf("action panicked: %v", p.Value) }

// Safe calls fn, turning a panic into a [*PanicError]. It is the one recoverer of calls into
// actions: Run, and a spec's Validate and OutcomesFor.
func Safe(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return fn()
}
