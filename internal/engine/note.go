package engine

import (
	"context"
	"sync/atomic"

	"github.com/sluice-project/sluice/internal/store"
)

// A changeNote is written in the transaction of the change it describes: an audit log's entry
// for a cancel, a retry, an event or an approval commits with the change or not at all.
type changeNote struct {
	fn   func(ctx context.Context, x store.Executor, what string) error
	done atomic.Bool // set once a transaction that ran fn committed
}

type changeNoteKey struct{}

// WithChangeNote returns a context whose first engine transaction to commit ([Engine.Cancel],
// [Engine.Retry], [Engine.Fire] and what runs through them) also runs fn, inside that
// transaction. An error of fn rolls the change back. A change made in several transactions
// (an event fired on many items, in batches) runs fn in the first. what names what changed when
// the engine knows more than its caller ("documents v3" for [Engine.ApplyWorkflow]); else "".
func WithChangeNote(ctx context.Context, fn func(ctx context.Context, x store.Executor, what string) error) context.Context {
	return context.WithValue(ctx, changeNoteKey{}, &changeNote{fn: fn})
}

// noted wraps fn so that it also writes ctx's change note, if it has one not yet committed;
// commit is to be called once the transaction committed.
func noted(ctx context.Context, fn func(t *Tx) error) (wrapped func(t *Tx) error, commit func()) {
	n, _ := ctx.Value(changeNoteKey{}).(*changeNote)
	if n == nil || n.done.Load() {
		return fn, func() {}
	}
	return func(t *Tx) error {
			if err := fn(t); err != nil {
				return err
			}
			return n.fn(ctx, t.Executor(), "")
		}, func() {
			n.done.Store(true)
		}
}

// inTxNoted runs fn in a store transaction of its own with ctx's change note, for a change
// made outside the engine's transactions (a workflow saved).
func (e *Engine) inTxNoted(ctx context.Context, fn func(x store.Executor) (what string, err error)) error {
	n, _ := ctx.Value(changeNoteKey{}).(*changeNote)
	err := e.store.InTx(ctx, func(x store.Executor) error {
		what, err := fn(x)
		if err != nil || n == nil || n.done.Load() {
			return err
		}
		return n.fn(ctx, x, what)
	})
	if err == nil && n != nil {
		n.done.Store(true)
	}
	return err
}
