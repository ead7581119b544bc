package engine

import "context"

// Writer runs a function in a process's group-commit writer and waits for its commit; a running
// worker (worker.Worker) is one. Its transaction commits while no other transaction of the writer
// is open.
type Writer interface {
	Do(ctx context.Context, fn func(t *Tx) error) error
}

// AttachWriter makes w the writer through which the engine commits the state changes that
// would contend with the workers' own transactions for the same rows ([Engine.Retry]). A worker
// attaches itself while it runs, and detaches before its writer stops. Safe for concurrent use.
func (e *Engine) AttachWriter(w Writer) {
	e.mu.Lock()
	e.writer = w
	e.mu.Unlock()
}

// DetachWriter detaches w, unless another writer was attached since: the engine then commits in
// transactions of its own. Safe for concurrent use.
func (e *Engine) DetachWriter(w Writer) {
	e.mu.Lock()
	if e.writer == w {
		e.writer = nil
	}
	e.mu.Unlock()
}

// write runs fn in the attached writer, or in a transaction of its own when none is attached
// (no worker runs in this process).
func (e *Engine) write(ctx context.Context, fn func(t *Tx) error) error {
	e.mu.RLock()
	w := e.writer
	e.mu.RUnlock()
	if w != nil {
		fn, committed := noted(ctx, fn)
		if err := w.Do(ctx, fn); err != nil {
			return err
		}
		committed()
		return nil
	}
	return e.Run(ctx, fn)
}
