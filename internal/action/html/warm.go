package html

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/warmpool"
)

// A warm converter is one Chromium in the converter sandbox, kept running for the documents of
// one job and started, for the jobs after the first two, before the job needs it. A cold render
// pays per document for the sandbox and Chromium's start; a warm converter pays for them once
// per job.
//
// Isolation. Each document is printed in a browser context of its own, made for it and disposed
// of afterwards (see [chrome]): with JavaScript off and every request but data: URLs refused, a
// document cannot reach the next one's cookies, storage, cache or pages. Documents of different
// jobs never share a converter: each job gets its own Chromium, sandbox and directory, and a
// converter given to a job is never given to another. A converter is retired — its whole
// sandbox killed, its directory removed — after [warmMaxDocs] documents, after any render that
// failed (a crash, a protocol error), after a render past its time limit, after [warmIdle]
// without work, and when a document left something behind once its context was disposed of (a
// page, a worker, a browser context: see [chrome.leftover]); that document is then rendered
// again cold. The sandbox, flags and program are a cold run's.

// Limits of warm converters.
const (
	// warmMaxDocs is how many documents a converter renders before it is retired.
	warmMaxDocs = 100
	// warmIdle is how long a converter waits for work before it is retired.
	warmIdle = 20 * time.Second
	// warmMax is how many converters serve jobs at once; a job that finds them all busy
	// renders cold.
	warmMax = 2
)

// errNoWarm says a document must be rendered cold: no warm converter could take it, or its
// render failed (the cold run then says why, in its own words).
var errNoWarm = errors.New("html: no warm render")

// pool holds the warm converters of one [Action] (see [warmpool.Pool]): at most one per job, at
// most warmMax, plus a spare started ahead of demand. It is safe for concurrent use.
type pool struct {
	warmpool.Pool[*warm]
	// idle, when set, replaces warmIdle (tests on a loaded machine); maxDocs, when set,
	// replaces warmMaxDocs.
	idle    time.Duration
	maxDocs int
	// started counts the converters started, warmDocs the documents they rendered: figures
	// for tests.
	started, warmDocs atomic.Int64
	// lastRetired says why the last converter retired early went.
	lastRetired atomic.Pointer[string]
}

// get returns the warm converter of job, starting one (or taking the spare) when it has none,
// in a new directory under base (the engine's directory of attempt dirs, which it empties when
// it opens; "" means the system's temporary directory). It returns nil when none can be had
// now: warmMax converters are busy with other jobs.
func (p *pool) get(ctx context.Context, job int64, browser string, lim converter.Limits, base string) *warm {
	w, ok := p.Get(job, warmMax, func() (*warm, error) { return p.start(ctx, base, browser, lim) })
	if !ok {
		return nil
	}
	return w
}

func (p *pool) maxDocsOr() int {
	if p == nil || p.maxDocs <= 0 {
		return warmMaxDocs
	}
	return p.maxDocs
}

func (p *pool) start(ctx context.Context, base, browser string, lim converter.Limits) (*warm, error) {
	idle := p.idle
	if idle <= 0 {
		idle = warmIdle
	}
	w, err := startWarm(ctx, base, browser, lim, p, idle)
	if err == nil {
		p.started.Add(1)
	}
	return w, err
}

// warm is one warm converter: one Chromium rendering one document at a time.
type warm struct {
	pool *pool
	lim  converter.Limits // its start's: the time limit bounds the check after each document
	dir  string           // the sandbox's directory
	// idleFor is how long it waits for work before it retires.
	idleFor time.Duration

	ready chan struct{} // closed once Chromium answered, or could not be started
	ch    *chrome       // set before ready closes; nil when Chromium could not be started
	// turn holds the right to talk to Chromium: one token, taken by a render for its document
	// and by the retirement for good.
	turn chan struct{}
	quit chan struct{} // closed by retire
	gone chan struct{} // closed once the sandbox is gone and the directory removed
	// next starts a converter like w (nil without a pool): w's successor, started as w renders
	// its last document.
	next func() (*warm, error)

	mu      sync.Mutex
	done    bool
	pending int // renders waiting or running
	docs    int
	idleT   *time.Timer
}

// startWarm starts a warm converter in a new directory under base. It returns at once; the
// converter's first render waits until Chromium answers.
func startWarm(ctx context.Context, base, browser string, lim converter.Limits, p *pool, idle time.Duration) (*warm, error) {
	if lim.Timeout <= 0 {
		lim.Timeout = converter.DefaultTimeout
	}
	dir, err := os.MkdirTemp(base, "sluice-html-")
	if err != nil {
		return nil, err
	}
	w := &warm{pool: p, lim: lim, dir: dir, idleFor: idle, ready: make(chan struct{}),
		turn: make(chan struct{}, 1), quit: make(chan struct{}), gone: make(chan struct{})}
	w.turn <- struct{}{}
	if p != nil {
		w.next = func() (*warm, error) { return p.start(ctx, base, browser, lim) }
	}
	w.idleT = time.AfterFunc(idle, func() {
		if w.Idle() {
			w.Retire()
		} else {
			w.idleT.Reset(idle)
		}
	})
	go func() {
		// The converter outlives the task that asked for it: it keeps the task's values (the
		// engine's records of running tools) but not its end.
		ch, err := openChrome(context.WithoutCancel(ctx), &converter.Runner{Limits: lim, Dir: dir}, browser)
		if err != nil {
			w.note("did not start: %v", err)
			w.Retire()
		}
		w.ch = ch
		close(w.ready)
	}()
	return w, nil
}

// render prints doc in w within limit, as [chrome.render] does. It returns errNoWarm when the
// document must be rendered cold: its render failed, which retires w, or Chromium could not be
// started; warmpool.ErrRetry when w retired before the document's turn (it had rendered
// warmMaxDocs, or another document's render failed).
func (w *warm) render(ctx context.Context, doc string, limit time.Duration, heartbeat func()) (pdf []byte, blocked int, err error) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return nil, 0, w.refused()
	}
	w.pending++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.pending--
		w.mu.Unlock()
	}()
	// Waiting for the converter (another document of the job being rendered, Chromium
	// starting) can take a render's time limit: the task's lease is kept meanwhile.
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for got := false; !got; {
		select {
		case <-w.turn:
			got = true
		case <-w.quit:
			return nil, 0, w.refused()
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-tick.C:
			if heartbeat != nil {
				heartbeat()
			}
		}
	}
	defer func() { w.turn <- struct{}{} }()
	for ready := false; !ready; {
		select {
		case <-w.ready:
			ready = true
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-tick.C:
			if heartbeat != nil {
				heartbeat()
			}
		}
	}
	if w.Retired() {
		return nil, 0, w.refused()
	}
	if limit <= 0 {
		limit = converter.DefaultTimeout
	}
	if w.next != nil && w.docs+1 >= w.pool.maxDocsOr() {
		// Its last document: its successor starts now and is up when the job's next comes.
		w.pool.Prestart(w.next)
	}
	pdf, blocked, err = w.ch.render(ctx, doc, limit, heartbeat)
	w.docs++
	if err == nil {
		if left := w.ch.leftover(ctx, w.lim.Timeout); left != "" {
			err = fmt.Errorf("the document left something behind: %s", left)
		}
	}
	if err != nil {
		w.note("render %d: %v", w.docs, err)
		w.Retire()
		if ctx.Err() != nil {
			return nil, blocked, ctx.Err()
		}
		return nil, blocked, errNoWarm
	}
	if w.docs >= w.pool.maxDocsOr() {
		w.Retire()
	} else {
		// Idle from now on.
		w.idleT.Reset(w.idleFor)
	}
	if w.pool != nil {
		w.pool.warmDocs.Add(1)
	}
	return pdf, blocked, nil
}

// refused is the answer to a document w did not render: warmpool.ErrRetry once Chromium has
// started in it, errNoWarm when it has not (or could not) — a Chromium that does not start in
// one converter will not in the next.
func (w *warm) refused() error {
	select {
	case <-w.ready:
		if w.ch != nil {
			return warmpool.ErrRetry
		}
	default:
	}
	return errNoWarm
}

func (w *warm) Idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending == 0 || w.done
}

// Gone is closed once w's sandbox is gone and its directory removed.
func (w *warm) Gone() <-chan struct{} { return w.gone }

func (w *warm) Retired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// Retire ends w: once its current render (if any) has returned, its sandbox is killed and its
// directory removed. It is idempotent and does not wait.
func (w *warm) Retire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	close(w.quit)
	w.idleT.Stop()
	go func() {
		defer close(w.gone)
		<-w.turn // never given back: no render runs from now on
		<-w.ready
		if w.ch != nil {
			w.ch.close()
		}
		if err := os.RemoveAll(w.dir); err != nil {
			w.note("remove its directory: %v", err)
		}
	}()
}

// note keeps why w was retired early, for tests and the pool's figures.
func (w *warm) note(format string, args ...any) {
	if w.pool != nil {
		why := fmt.Sprintf(format, args...)
		w.pool.lastRetired.Store(&why)
	}
}
