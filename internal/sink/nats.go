package sink

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS is a JetStream sink. Each message is published with Nats-Msg-Id set to its id, so the
// stream drops a redelivery within its duplicates window, and counts as delivered once
// JetStream acknowledged storing it. Batches are pipelined (published asynchronously, then
// every acknowledgement awaited). The connection reconnects by itself, for ever.
type NATS struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	prefix  string
	timeout time.Duration
}

// Connect connects to a NATS server (a nats:// URL without path) for as long as the process
// runs: reconnecting for ever every 250ms, and starting even while the server is down.
func Connect(u *url.URL, name string) (*nats.Conn, error) {
	server := *u
	server.Path, server.RawQuery, server.RawPath = "", "", ""
	nc, err := nats.Connect(server.String(), nats.Name(name), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", server.Redacted(), err)
	}
	return nc, nil
}

func openNATS(ctx context.Context, u *url.URL, o Options) (*NATS, error) {
	prefix := strings.Trim(u.Path, "/")
	nc, err := Connect(u, "sluice-sink")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, err
	}
	s := &NATS{nc: nc, js: js, prefix: prefix, timeout: o.Timeout}
	if name := u.Query().Get("stream"); name != "" {
		dup := 2 * time.Minute
		if d := u.Query().Get("duplicates"); d != "" {
			if dup, err = time.ParseDuration(d); err != nil {
				nc.Close()
				return nil, fmt.Errorf("sink %s: duplicates: %w", u.Redacted(), err)
			}
		}
		subjects := []string{">"}
		if prefix != "" {
			subjects = []string{prefix + ".>"}
		}
		if err := EnsureStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: subjects, Duplicates: dup, Storage: jetstream.FileStorage}); err != nil {
			// The server may be down: the relay retries publishing, and a publish with no
			// stream says so in the outbox's status.
			o.Logger.Warn("nats stream not ensured", "stream", name, "error", err)
		}
	}
	return s, nil
}

// EnsureStream creates the stream when it does not exist; an existing one is left as it is.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, cfg.Name); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("look up stream %q: %w", cfg.Name, err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("create stream %q: %w", cfg.Name, err)
	}
	return nil
}

// Subject returns the NATS subject of a message subject.
func (s *NATS) Subject(subject string) string {
	if s.prefix == "" {
		return subject
	}
	return s.prefix + "." + subject
}

// Send publishes the messages asynchronously, in order, and waits for their acknowledgements.
func (s *NATS) Send(ctx context.Context, msgs []Message) []error {
	errs := make([]error, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		nm := nats.NewMsg(s.Subject(m.Subject))
		nm.Data = m.Body
		for k, v := range m.Attributes {
			nm.Header.Set(k, v)
		}
		f, err := s.js.PublishMsgAsync(nm, jetstream.WithMsgID(m.ID))
		if err != nil {
			errs[i] = fmt.Errorf("nats publish: %w", err)
			for j := i + 1; j < len(msgs); j++ {
				errs[j] = ErrNotAttempted
			}
			break
		}
		futures[i] = f
	}
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = fmt.Errorf("nats publish: %w", err)
		case <-timer.C:
			errs[i] = errors.New("nats publish: no acknowledgement within the timeout")
			timer.Reset(0)
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	return errs
}

// Close drains nothing: unacknowledged messages stay in the outbox.
func (s *NATS) Close() error {
	s.nc.Close()
	return nil
}
