// Package warmpool keeps warm converters — converter sandboxes kept running for the documents of
// one job (LibreOffice, Chromium) — by job: at most one per job, never shared across jobs, a
// bounded number at once, and, once a process has served two jobs, one spare started ahead of
// demand so that the next job's first document does not wait for a start.
package warmpool

import (
	"errors"
	"sync"
)

// ErrRetry is a converter's answer for a document it never began: it retired first (its quota
// of documents done, or another document's failure ended it). The job's next converter may take
// the document (see Offer).
var ErrRetry = errors.New("warmpool: offer to another converter")

// Tries is how many converters Offer hands one document to.
const Tries = 3

// Offer hands a document to the converter get returns (false: none can be had), and to the
// job's next one while do answers ErrRetry, Tries converters at most. It returns ErrRetry when no
// converter took the document: the caller converts it cold. Before, a document a retiring
// converter never began was converted cold at once, at many times a warm conversion's cost.
func Offer[C, R any](get func() (C, bool), do func(C) (R, error)) (R, error) {
	var zero R
	for range Tries {
		c, ok := get()
		if !ok {
			break
		}
		r, err := do(c)
		if !errors.Is(err, ErrRetry) {
			return r, err
		}
	}
	return zero, ErrRetry
}

// Converter is a warm converter as a [Pool] keeps it.
type Converter interface {
	// Retire ends the converter without waiting for it; it is idempotent.
	Retire()
	// Retired reports whether Retire was called (or the converter retired itself).
	Retired() bool
	// Idle reports whether the converter has no work queued nor running.
	Idle() bool
	// Gone is closed once the converter's sandbox is gone and its directory removed.
	Gone() <-chan struct{}
}

// Pool holds the warm converters of one action. The zero value holds none and is ready to use;
// it is safe for concurrent use and must not be copied after first use.
type Pool[C Converter] struct {
	mu       sync.Mutex
	byJob    map[int64]C
	spare    C
	hasSpare bool
	starting bool // a spare is being started
	gen      int  // counts closes: a spare started before one is not kept
	jobs     int  // how many converters were given to jobs
	// live counts, per generation, the converters started and not yet gone (retired ones
	// still ending included) and the spares being started: what Close waits for.
	live map[int]int
	gone *sync.Cond // signalled when a live count drops
}

// track counts c live in generation gen until it is gone. p.mu is held.
func (p *Pool[C]) track(c C, gen int) {
	p.liveAdd(gen, 1)
	go func() {
		<-c.Gone()
		p.mu.Lock()
		p.liveAdd(gen, -1)
		p.mu.Unlock()
	}()
}

// liveAdd adds n to generation gen's live count. p.mu is held.
func (p *Pool[C]) liveAdd(gen, n int) {
	if p.live == nil {
		p.live, p.gone = map[int]int{}, sync.NewCond(&p.mu)
	}
	if p.live[gen] += n; p.live[gen] == 0 {
		delete(p.live, gen)
	}
	if n < 0 {
		p.gone.Broadcast()
	}
}

// Get returns the converter of job, starting one with start (or taking the spare) when it has
// none or its own was retired. It reports false when none can be had now: max converters serve
// other jobs and none of them is idle, or start failed. Once the pool has given converters twice, it starts
// a spare with start in the background, ahead of the next job.
func (p *Pool[C]) Get(job int64, max int, start func() (C, error)) (C, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byJob == nil {
		p.byJob = map[int64]C{}
	}
	if c, ok := p.byJob[job]; ok && !c.Retired() {
		return c, true
	}
	delete(p.byJob, job)
	var zero C
	if len(p.byJob) >= max && !p.evictIdle() {
		return zero, false
	}
	c, ok := p.spare, p.hasSpare
	p.spare, p.hasSpare = zero, false
	if !ok || c.Retired() {
		var err error
		if c, err = start(); err != nil {
			return zero, false
		}
		p.track(c, p.gen)
	}
	p.byJob[job] = c
	// A process that has served several jobs will likely see more: keep one converter ready
	// ahead of the next, so that its first document does not wait for the converter to start.
	if p.jobs++; p.jobs > 1 {
		p.prestart(start)
	}
	return c, true
}

// Job returns the converter job holds, retired or not.
func (p *Pool[C]) Job(job int64) (C, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.byJob[job]
	return c, ok
}

// Close retires every converter and waits until they are gone, with those retired before
// (still ending) and a spare being started. Later calls of Get start new ones; Close does not
// wait for those.
func (p *Pool[C]) Close() {
	p.mu.Lock()
	cs := make([]C, 0, len(p.byJob)+1)
	for _, c := range p.byJob {
		cs = append(cs, c)
	}
	if p.hasSpare {
		cs = append(cs, p.spare)
	}
	var zero C
	p.byJob, p.spare, p.hasSpare = nil, zero, false
	closed := p.gen
	p.gen++
	p.mu.Unlock()
	for _, c := range cs {
		c.Retire()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		n := 0
		for gen, k := range p.live {
			if gen <= closed {
				n += k
			}
		}
		if n == 0 {
			return
		}
		p.gone.Wait()
	}
}

// evictIdle retires the converter of another job that has nothing queued nor running, and
// reports whether it found one. p.mu is held.
func (p *Pool[C]) evictIdle() bool {
	for job, c := range p.byJob {
		if c.Idle() {
			c.Retire()
			delete(p.byJob, job)
			return true
		}
	}
	return false
}

// Prestart starts a spare in the background, unless there is one or one is being started: for a
// converter about to retire (it has its quota of documents), so that its job's next documents
// find their next converter up rather than wait for its start.
func (p *Pool[C]) Prestart(start func() (C, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prestart(start)
}

// prestart starts the spare converter in the background. p.mu is held.
func (p *Pool[C]) prestart(start func() (C, error)) {
	if p.hasSpare || p.starting {
		return
	}
	p.starting = true
	gen := p.gen
	p.liveAdd(gen, 1) // the start, counted until its converter is
	go func() {
		c, err := start()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.starting = false
		if err == nil {
			p.track(c, gen)
		}
		p.liveAdd(gen, -1)
		switch {
		case err != nil:
		case p.gen != gen:
			c.Retire()
		default:
			p.spare, p.hasSpare = c, true
		}
	}()
}
