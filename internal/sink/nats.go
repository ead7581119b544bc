package sink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-project/sluice/internal/redact"
)

// NATS is a JetStream sink. Each message is published with Nats-Msg-Id set to its id, so the
// stream drops a redelivery within its duplicates window, and counts as delivered once
// JetStream acknowledged storing it. The connection reconnects by itself, for ever.
//
// Batches are pipelined (published asynchronously, then every acknowledgement awaited), and
// chained so that a failure cannot be overtaken: each message but the first of its stream in
// the batch carries Nats-Expected-Last-Msg-Id, the id of the message before it in the batch
// bound for the same stream, so JetStream stores it only right after that one. When message N
// is lost (sent on a connection that died while N+1 waited in the reconnect buffer) or
// refused (too large for the stream), every later message of the batch bound for that stream
// is refused too, and the retry, which starts at N, keeps the order. A message the stream
// already holds is acknowledged as a duplicate before its expectation is checked, so
// redeliveries pass. Another publisher writing to the same stream at the same time makes
// expectations fail spuriously: those messages are reported [ErrNotAttempted] and the next
// batch starts with them, so the order holds and only speed is lost.
type NATS struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	prefix  string
	timeout time.Duration

	mu      sync.Mutex
	streams map[string]string // NATS subject → the stream that stored its last message
}

// Connect connects to a NATS server (a nats:// URL without path) for as long as the process
// runs: reconnecting for ever every 250ms, and starting even while the server is down. The URL
// may name a cluster's nodes, nats://HOST:PORT,HOST:PORT,HOST:PORT: the connection starts on
// any that answers and moves to another when its node dies (the nodes also announce each other).
func Connect(u *url.URL, name string) (*nats.Conn, error) {
	server := *u
	server.Path, server.RawQuery, server.RawPath = "", "", ""
	nc, err := nats.Connect(server.String(), nats.Name(name), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redact.URL(server.String()), err)
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
	replicas, err := Replicas(u.Query())
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("sink %s: %w", redact.URL(u.String()), err)
	}
	s := &NATS{nc: nc, js: js, prefix: prefix, timeout: o.Timeout, streams: map[string]string{}}
	if name := u.Query().Get("stream"); name != "" {
		dup := 2 * time.Minute
		if d := u.Query().Get("duplicates"); d != "" {
			if dup, err = time.ParseDuration(d); err != nil {
				nc.Close()
				return nil, fmt.Errorf("sink %s: duplicates: %w", redact.URL(u.String()), err)
			}
		}
		subjects := []string{">"}
		if prefix != "" {
			subjects = []string{prefix + ".>"}
		}
		if err := EnsureStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: subjects, Duplicates: dup, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
			// The server may be down: the relay retries publishing, and a publish with no
			// stream says so in the outbox's status.
			o.Logger.Warn("nats stream not ensured", "stream", name, "error", err)
		}
	}
	return s, nil
}

// Replicas reads a sink's or source's replicas= (the copies a stream it creates keeps across a
// JetStream cluster's nodes, 1 to 5); it returns 1 without one.
func Replicas(q url.Values) (int, error) {
	v := q.Get("replicas")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 5 {
		return 0, fmt.Errorf("replicas=%s: a number from 1 to 5 (3 for a three-node cluster)", v)
	}
	return n, nil
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

// Send publishes the messages asynchronously, in order, each expecting the one before it in
// its stream, and waits for their acknowledgements.
func (s *NATS) Send(ctx context.Context, msgs []Message) []error {
	errs := make([]error, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	subjects := make([]string, len(msgs))
	s.mu.Lock()
	streams := maps.Clone(s.streams)
	s.mu.Unlock()
	// Each message must follow the one before it in its stream. Until the stream of every
	// subject in the batch is known (the first batches), each follows the previous message
	// of the batch, whatever its stream: at worst a spurious refusal, retried at once with
	// the streams learnt.
	known := true
	for i, m := range msgs {
		subjects[i] = s.Subject(m.Subject)
		if _, ok := streams[subjects[i]]; !ok {
			known = false
		}
	}
	lastOf := map[string]string{} // stream → id of its last message in the batch so far
	for i, m := range msgs {
		nm := nats.NewMsg(subjects[i])
		nm.Data = m.Body
		for k, v := range m.Attributes {
			nm.Header.Set(k, v)
		}
		opts := []jetstream.PublishOpt{jetstream.WithMsgID(m.ID)}
		stream := ""
		if known {
			stream = streams[subjects[i]]
		}
		if expect := lastOf[stream]; expect != "" {
			opts = append(opts, jetstream.WithExpectLastMsgID(expect))
		}
		lastOf[stream] = m.ID
		f, err := s.js.PublishMsgAsync(nm, opts...)
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
	learnt := map[string]string{}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			learnt[subjects[i]] = ack.Stream
		case err := <-f.Err():
			errs[i] = fmt.Errorf("nats publish: %w", err)
		case <-timer.C:
			errs[i] = errors.New("nats publish: no acknowledgement within the timeout")
			timer.Reset(0)
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	for i, err := range errs {
		var api *jetstream.APIError
		if errors.As(err, &api) && api.ErrorCode == errCodeWrongLastMsgID {
			// Refused because the message before it in the stream is not the one expected:
			// an earlier one failed, or another publisher wrote in between. Either way it
			// was not stored, and the next batch starts with it.
			errs[i] = fmt.Errorf("%w (%v)", ErrNotAttempted, err)
		}
	}
	if len(learnt) > 0 {
		s.mu.Lock()
		maps.Copy(s.streams, learnt)
		s.mu.Unlock()
	}
	return errs
}

// errCodeWrongLastMsgID is JetStream's error code for a publish whose
// Nats-Expected-Last-Msg-Id is not the stream's last message id (JSStreamWrongLastMsgIDErr).
const errCodeWrongLastMsgID jetstream.ErrorCode = 10070

// Close drains nothing: unacknowledged messages stay in the outbox.
func (s *NATS) Close() error {
	s.nc.Close()
	return nil
}
