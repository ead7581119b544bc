package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-project/sluice/internal/sink"
)

// DefaultAckWait is the acknowledgement wait of a [ConsumerConfig] that sets none.
const DefaultAckWait = 30 * time.Second

// ConsumerConfig configures a [Consumer].
type ConsumerConfig struct {
	Spec    *Spec
	Handler *Handler
	Logger  *slog.Logger
	// AckWait is how long JetStream waits for an acknowledgement before redelivering a
	// message (to this or another consumer process). Defaults to [DefaultAckWait].
	AckWait time.Duration
	// Batch is how many messages one fetch asks for. Defaults to 100.
	Batch int
}

// Consumer is a JetStream durable pull consumer feeding a source's handler. Several processes
// may run the same durable consumer: JetStream hands each message to one of them.
type Consumer struct {
	cfg    ConsumerConfig
	log    *slog.Logger
	once   sync.Once
	stop   sync.Once
	cancel context.CancelFunc
	done   chan struct{}
}

// NewConsumer returns a consumer; Start starts it.
func NewConsumer(cfg ConsumerConfig) *Consumer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	return &Consumer{cfg: cfg, log: cfg.Logger.With("source", cfg.Spec.Name), done: make(chan struct{})}
}

// Start connects and consumes until Stop. Connection trouble is logged and retried.
func (c *Consumer) Start(ctx context.Context) {
	c.once.Do(func() {
		ctx, c.cancel = context.WithCancel(ctx)
		go func() { defer close(c.done); c.run(ctx) }()
	})
}

// Stop stops consuming and waits; messages being handled finish first. It is idempotent.
func (c *Consumer) Stop() {
	c.stop.Do(func() {
		if c.cancel == nil {
			return
		}
		c.cancel()
		<-c.done
	})
}

func (c *Consumer) run(ctx context.Context) {
	s := c.cfg.Spec
	nc, err := sink.Connect(s.Server, "sluice-source-"+s.Name)
	if err != nil {
		c.log.Error("source connect", "error", err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.log.Error("source jetstream", "error", err)
		return
	}
	var cons jetstream.Consumer
	for ctx.Err() == nil {
		if cons, err = c.consumer(ctx, js); err == nil {
			break
		}
		c.log.Warn("source consumer not ready; retrying", "error", err)
		sleep(ctx, time.Second)
	}
	for ctx.Err() == nil {
		batch, err := cons.Fetch(c.cfg.Batch, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			c.log.Warn("source fetch", "error", err)
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		for m := range batch.Messages() {
			c.handle(ctx, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			c.log.Warn("source fetch", "error", err)
			sleep(ctx, 250*time.Millisecond)
		}
	}
}

// consumer ensures the stream and the durable consumer.
func (c *Consumer) consumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	s := c.cfg.Spec
	if err := sink.EnsureStream(ctx, js, jetstream.StreamConfig{Name: s.Stream, Subjects: []string{s.Subject}, Storage: jetstream.FileStorage, Replicas: s.Replicas}); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return js.CreateOrUpdateConsumer(cctx, s.Stream, jetstream.ConsumerConfig{
		Durable: s.Durable, FilterSubject: s.Subject, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: c.cfg.AckWait, MaxAckPending: 10 * c.cfg.Batch, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
}

// handle hands one message to the handler and acknowledges it once its job or event
// committed; a failure is redelivered after a delay.
func (c *Consumer) handle(ctx context.Context, m jetstream.Msg) {
	msg := Message{Subject: m.Subject(), Body: m.Data(), Attributes: map[string]string{}}
	for k, vs := range m.Headers() {
		if len(vs) > 0 {
			msg.Attributes[strings.ToLower(k)] = vs[0]
		}
	}
	msg.ID = m.Headers().Get(jetstream.MsgIDHeader)
	if msg.ID == "" {
		if md, err := m.Metadata(); err == nil {
			msg.ID = fmt.Sprintf("%s:%d", md.Stream, md.Sequence.Stream)
		}
	}
	out, err := c.cfg.Handler.Handle(ctx, c.cfg.Spec, msg)
	switch {
	case err == nil:
		if err := m.Ack(); err != nil {
			// Redelivered later: its job exists, so nothing is done twice.
			c.log.Warn("source ack", "message_id", msg.ID, "error", err)
		}
		c.log.Debug("source message", "message_id", msg.ID, "job_id", out.JobID, "created", out.Created, "filtered", out.Filtered, "fired", len(out.Fired))
	case errors.Is(err, ErrNoKey):
		c.log.Error("source message dropped", "message_id", msg.ID, "error", err)
		_ = m.Term()
	case ctx.Err() != nil:
		// Stopping: left unacknowledged, redelivered after AckWait.
	default:
		c.log.Warn("source message failed; redelivered in 5s", "message_id", msg.ID, "error", err)
		_ = m.NakWithDelay(5 * time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
