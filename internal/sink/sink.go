// Package sink delivers messages to brokers and endpoints: NATS JetStream, HTTP webhooks and
// JSONL files, each opened from a URL. A sink reports, per message, whether the receiver
// acknowledged it; the outbox (internal/outbox) deletes a message only then, so every sink is
// at-least-once, and each message carries a stable id by which a redelivery is deduplicated
// (JetStream's Nats-Msg-Id window, a webhook consumer's Sluice-Message-Id, a file line's id).
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/redact"
)

// Message is one message to deliver.
type Message struct {
	// ID is the message's stable id: a redelivery carries the same one.
	ID string
	// Subject is the subject (NATS), the Sluice-Subject header (webhook) or a field (file).
	Subject string
	// Attributes travel as headers (NATS, webhook) or a field (file).
	Attributes map[string]string
	Body       []byte
}

// Sink delivers messages. Implementations are safe for concurrent use.
type Sink interface {
	// Send delivers msgs, in order per subject, and returns one error per message: nil once
	// the receiver acknowledged it. A sink that sends one message at a time (webhook) does not
	// attempt a message after a failed one of the same subject (its error is
	// [ErrNotAttempted]), so a retry keeps the order; one that pipelines (JetStream) makes
	// each message conditional on the one before it, so that the receiver refuses what
	// follows a failure (also reported [ErrNotAttempted]).
	Send(ctx context.Context, msgs []Message) []error
	// Close releases the sink's connections.
	Close() error
}

// ErrNotAttempted is the error of a message that a sink did not deliver because an earlier
// message of its subject failed (or, for JetStream, another publisher wrote in between): it is
// not a failure of its own, and the retry starts with it.
var ErrNotAttempted = errors.New("not attempted: an earlier message of its subject failed")

// Options configures [Open].
type Options struct {
	// Timeout bounds one delivery (a webhook request, a JetStream acknowledgement). Defaults to 10s.
	Timeout time.Duration
	// Logger logs connection events. Defaults to discarding.
	Logger *slog.Logger
	// HTTPClient sends webhook requests. Defaults to a client with Timeout.
	HTTPClient *http.Client
}

// Open opens a sink from its URL:
//
//   - nats://HOST:PORT[,HOST:PORT…][/PREFIX][?stream=NAME&duplicates=2m&replicas=N] — JetStream,
//     on one server or a cluster's nodes. Subjects are PREFIX.SUBJECT. With stream, a stream of
//     that name capturing PREFIX.> is created when missing, with the duplicates window (default
//     2m, JetStream's) and N replicas (default 1; 3 on a three-node cluster).
//   - http://… or https://…[?secret=S | ?secret_file=F] — a webhook: one POST per message,
//     signed with HMAC-SHA256 of the body under the secret (the query parameters are not sent).
//   - file:PATH — appends one JSON line per message to PATH, fsynced before acknowledging.
func Open(ctx context.Context, raw string, o Options) (Sink, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the whole URL, secrets and all.
		return nil, fmt.Errorf("sink url %s: %w", redact.URL(raw), errors.Unwrap(err))
	}
	switch u.Scheme {
	case "nats":
		return openNATS(ctx, u, o)
	case "http", "https":
		return openWebhook(u, o)
	case "file":
		path := u.Opaque
		if path == "" {
			path = u.Path
		}
		if path == "" {
			return nil, fmt.Errorf("sink url %q: no file path (file:/var/log/out.jsonl)", redact.URL(raw))
		}
		return OpenFile(path)
	}
	return nil, fmt.Errorf("sink url %q: unknown scheme %q (nats, http, https, file)", redact.URL(raw), u.Scheme)
}

// readSecret returns the secret given by ?secret= or ?secret_file=.
func readSecret(q url.Values) (string, error) {
	if s := q.Get("secret"); s != "" {
		return s, nil
	}
	if f := q.Get("secret_file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("webhook secret: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

// skipAfterFailure sends msgs one subject at a time, in order, with send, marking the messages
// of a subject after its first failure [ErrNotAttempted].
func skipAfterFailure(msgs []Message, send func(i int) error) []error {
	errs := make([]error, len(msgs))
	failed := map[string]bool{}
	for i, m := range msgs {
		if failed[m.Subject] {
			errs[i] = ErrNotAttempted
			continue
		}
		if errs[i] = send(i); errs[i] != nil {
			failed[m.Subject] = true
		}
	}
	return errs
}
