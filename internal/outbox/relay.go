package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/sink"
	"github.com/sluice-project/sluice/internal/store"
)

// Start starts a relay per configured sink and the check of pending counts. Calling it again
// does nothing.
func (o *Outbox) Start(ctx context.Context) {
	o.startOnce.Do(func() {
		ctx, o.cancel = context.WithCancel(ctx)
		names := make([]string, 0, len(o.cfg.Sinks))
		for name := range o.cfg.Sinks {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			w := make(chan struct{}, 1)
			o.mu.Lock()
			o.wakes = append(o.wakes, w)
			o.mu.Unlock()
			o.wg.Add(1)
			go func() { defer o.wg.Done(); o.relay(ctx, name, o.cfg.Sinks[name], w) }()
		}
		o.wg.Add(1)
		go func() { defer o.wg.Done(); o.checkLoop(ctx) }()
	})
}

// Stop stops the relays, waits for them, and closes the sinks. It is idempotent.
func (o *Outbox) Stop() {
	o.stopOnce.Do(func() {
		if o.cancel != nil {
			o.cancel()
		}
		o.wg.Wait()
		for _, s := range o.cfg.Sinks {
			_ = s.Close()
		}
	})
}

// replicator is the store's capability of waiting for its standbys (PostgreSQL's):
// WaitReplicated returns once every streaming standby holds what was committed before the call.
type replicator interface {
	WaitReplicated(ctx context.Context) error
}

// row is one undelivered message.
type row struct {
	id  int64
	msg sink.Message
}

// relay delivers one sink's messages for as long as ctx lives, while it holds the sink's lease.
func (o *Outbox) relay(ctx context.Context, name string, s sink.Sink, wake <-chan struct{}) {
	defer o.release(name)
	backoff := time.Duration(0)
	var leased time.Time // when the lease was last taken or renewed
	for ctx.Err() == nil {
		if o.cfg.Now().Sub(leased) > o.cfg.LeaseDuration/3 {
			ok, err := o.claim(ctx, name)
			if err != nil || !ok {
				if err != nil && ctx.Err() == nil {
					o.log.Warn("outbox lease", "sink", name, "error", err)
				}
				leased = time.Time{}
				o.wait(ctx, wake, o.cfg.LeaseDuration/3)
				continue
			}
			leased = o.cfg.Now()
		}
		rows, err := o.pending(ctx, name, o.cfg.BatchSize)
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("outbox read", "sink", name, "error", err)
			}
			o.wait(ctx, wake, o.cfg.PollInterval)
			continue
		}
		if len(rows) == 0 {
			o.wait(ctx, wake, o.cfg.PollInterval)
			continue
		}
		if r, ok := o.db.(replicator); ok {
			// Rows read from a primary may be lost with it if a standby that has not received
			// them is promoted: publish only what the standbys hold.
			if err := r.WaitReplicated(ctx); err != nil {
				if ctx.Err() == nil {
					o.log.Warn("outbox wait for the standbys", "sink", name, "error", err)
				}
				o.wait(ctx, wake, o.cfg.PollInterval)
				continue
			}
		}
		msgs := make([]sink.Message, len(rows))
		for i, r := range rows {
			msgs[i] = r.msg
		}
		errs := s.Send(ctx, msgs)
		if ctx.Err() != nil {
			return // what was acknowledged is sent again by the next relay, same ids
		}
		var acked, failed []int64
		var firstErr error
		for i, err := range errs {
			if err == nil {
				acked = append(acked, rows[i].id)
			} else if !errors.Is(err, sink.ErrNotAttempted) {
				failed = append(failed, rows[i].id)
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		if err := o.settle(ctx, name, acked, failed, firstErr); err != nil && ctx.Err() == nil {
			o.log.Warn("outbox settle", "sink", name, "error", err)
		}
		if firstErr != nil {
			backoff = min(max(2*backoff, o.cfg.MinBackoff), o.cfg.MaxBackoff)
			o.log.Warn("outbox delivery failed", "sink", name, "failed", len(failed), "delivered", len(acked), "retry_in", backoff, "error", firstErr)
			o.wait(ctx, nil, backoff)
			continue
		}
		backoff = 0
	}
}

// wait waits for d, a wake-up or the end of ctx.
func (o *Outbox) wait(ctx context.Context, wake <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}

// claim takes or renews the sink's lease; it reports whether this process holds it.
func (o *Outbox) claim(ctx context.Context, name string) (bool, error) {
	now := o.cfg.Now().UTC()
	cutoff := now.UnixNano()
	if o.cfg.Exclusive {
		cutoff = 1 << 62 // no other process relays from this store
	}
	return messagesIn(o.db).claim(ctx, name, o.owner, now.Add(o.cfg.LeaseDuration).UnixNano(), cutoff)
}

// release gives up the sink's lease, so that another process takes over at once.
func (o *Outbox) release(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = messagesIn(o.db).release(ctx, name, o.owner)
}

// pending reads the oldest undelivered messages of a sink.
func (o *Outbox) pending(ctx context.Context, name string, limit int) ([]row, error) {
	return messagesIn(o.db).pending(ctx, name, limit)
}

// settle deletes the acknowledged messages and records the failures, in one transaction.
func (o *Outbox) settle(ctx context.Context, name string, acked, failed []int64, firstErr error) error {
	// The drops counted in memory move to the row in this transaction: Status, which adds the
	// two, must not read between (it would miss or count twice the ones moving).
	o.dropMu.Lock()
	defer o.dropMu.Unlock()
	o.mu.Lock()
	dropped := o.dropped[name]
	delete(o.dropped, name)
	o.mu.Unlock()
	err := o.db.InTx(ctx, func(tx store.Executor) error {
		ms := messagesIn(tx)
		if len(acked) > 0 {
			if err := ms.delete(ctx, acked); err != nil {
				return err
			}
		}
		if len(failed) > 0 {
			msg := firstErr.Error()
			if len(msg) > 500 {
				msg = msg[:500]
			}
			if err := ms.failed(ctx, name, failed, msg, o.cfg.Now().UTC().UnixNano()); err != nil {
				return err
			}
		}
		return ms.settled(ctx, name, int64(len(acked)), dropped)
	})
	if err != nil && dropped > 0 {
		o.mu.Lock()
		o.dropped[name] += dropped
		o.mu.Unlock()
	}
	return err
}

// checkLoop compares the pending counts with MaxPending, alerting when a sink becomes full and
// when it drains.
func (o *Outbox) checkLoop(ctx context.Context) {
	for {
		if err := o.check(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("outbox check", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.cfg.CheckInterval):
		}
	}
}

// Check compares the pending counts with MaxPending once (the check loop does it every
// CheckInterval): a sink at the bound drops new messages until it is below it again.
func (o *Outbox) Check(ctx context.Context) error { return o.check(ctx) }

func (o *Outbox) check(ctx context.Context) error {
	st, err := o.Status(ctx)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range st {
		full := s.Pending >= int64(o.cfg.MaxPending)
		if full && !o.full[s.Sink] {
			o.log.Error("outbox full: new messages for the sink are dropped until it drains; is the sink down?",
				"sink", s.Sink, "pending", s.Pending, "max_pending", o.cfg.MaxPending, "oldest_age", s.OldestAge.Round(time.Second).String(), "last_error", s.LastError)
		} else if !full && o.full[s.Sink] {
			o.log.Info("outbox drained below its bound: messages are recorded again", "sink", s.Sink, "pending", s.Pending, "dropped", o.drops[s.Sink])
		}
		o.full[s.Sink] = full
	}
	return nil
}

// SinkStatus is the state of one sink's outbox.
type SinkStatus struct {
	Sink string `json:"sink"`
	// Pending is the number of undelivered messages; OldestAge the age of the oldest.
	Pending   int64         `json:"pending"`
	OldestAge time.Duration `json:"oldest_age_ns"`
	// Delivered, Failures and Dropped count since the outbox was created, over every process.
	Delivered   int64     `json:"delivered"`
	Failures    int64     `json:"failures"`
	Dropped     int64     `json:"dropped"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Full says the sink is at MaxPending (as this process last checked).
	Full bool `json:"full"`
	// Relayed says a process holds the sink's relay lease.
	Relayed bool `json:"relayed"`
}

// Status returns every sink's state: those with messages or a relay.
func (o *Outbox) Status(ctx context.Context) ([]SinkStatus, error) {
	ms := messagesIn(o.db)
	now := o.cfg.Now().UTC()
	by := map[string]*SinkStatus{}
	get := func(name string) *SinkStatus {
		if s, ok := by[name]; ok {
			return s
		}
		s := &SinkStatus{Sink: name}
		by[name] = s
		return s
	}
	counts, err := ms.counts(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range counts {
		s := get(c.sink)
		s.Pending, s.OldestAge = c.n, now.Sub(time.Unix(0, c.oldest))
	}
	o.dropMu.Lock() // the drops in the rows and in memory, as settle leaves them
	defer o.dropMu.Unlock()
	relays, err := ms.relays(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range relays {
		s := get(r.sink)
		s.Delivered, s.Failures, s.Dropped, s.LastError = r.delivered, r.failures, r.dropped, r.lastErr
		s.Relayed = r.until > now.UnixNano()
		if r.lastErrAt > 0 {
			s.LastErrorAt = time.Unix(0, r.lastErrAt).UTC()
		}
	}
	o.mu.Lock()
	out := make([]SinkStatus, 0, len(by))
	for _, s := range by {
		s.Full = o.full[s.Sink]
		s.Dropped += o.dropped[s.Sink] // not yet added to the row
		out = append(out, *s)
	}
	o.mu.Unlock()
	slices.SortFunc(out, func(a, b SinkStatus) int { return strings.Compare(a.Sink, b.Sink) })
	return out, nil
}

// WriteMetrics writes the outbox's Prometheus metrics: pending messages, the oldest one's age,
// delivered, failed and dropped messages, and whether the sink is full, per sink.
func (o *Outbox) WriteMetrics(ctx context.Context, w io.Writer) error {
	st, err := o.Status(ctx)
	if err != nil {
		return err
	}
	metric := func(name, typ, help string, v func(SinkStatus) float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, s := range st {
			fmt.Fprintf(w, "%s{sink=%q} %g\n", name, s.Sink, v(s))
		}
	}
	metric("sluice_outbox_pending", "gauge", "Messages in the outbox not yet acknowledged by their sink.", func(s SinkStatus) float64 { return float64(s.Pending) })
	metric("sluice_outbox_oldest_age_seconds", "gauge", "Age of the oldest undelivered message.", func(s SinkStatus) float64 { return s.OldestAge.Seconds() })
	metric("sluice_outbox_delivered_total", "counter", "Messages acknowledged by their sink.", func(s SinkStatus) float64 { return float64(s.Delivered) })
	metric("sluice_outbox_delivery_failures_total", "counter", "Failed deliveries (each retried).", func(s SinkStatus) float64 { return float64(s.Failures) })
	metric("sluice_outbox_dropped_total", "counter", "Messages dropped because the outbox of the sink was full.", func(s SinkStatus) float64 { return float64(s.Dropped) })
	metric("sluice_outbox_full", "gauge", "1 when the sink's outbox is at its bound and new messages are dropped.", func(s SinkStatus) float64 {
		if s.Full {
			return 1
		}
		return 0
	})
	return nil
}

// Drain waits until the relayed sinks have no pending message, ctx ends, or no message was
// delivered for idle (a sink that is down). It does nothing when the relays were not started.
func (o *Outbox) Drain(ctx context.Context, idle time.Duration) {
	if o.cancel == nil || len(o.cfg.Sinks) == 0 {
		return
	}
	last, lastChange := int64(-1), time.Now()
	for ctx.Err() == nil {
		st, err := o.Status(ctx)
		if err != nil {
			return
		}
		var pending int64
		for _, s := range st {
			if _, ok := o.cfg.Sinks[s.Sink]; ok {
				pending += s.Pending
			}
		}
		if pending == 0 {
			return
		}
		if pending != last {
			last, lastChange = pending, time.Now()
		} else if time.Since(lastChange) > idle {
			o.log.Warn("outbox not drained before stopping; the next run delivers the rest", "pending", pending)
			return
		}
		o.wait(ctx, nil, 50*time.Millisecond)
	}
}
