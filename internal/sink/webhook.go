package sink

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-project/sluice/internal/redact"
)

// Headers of a webhook request.
const (
	// HeaderID carries the message's stable id: a consumer deduplicates by it.
	HeaderID = "Sluice-Message-Id"
	// HeaderSubject carries the message's subject.
	HeaderSubject = "Sluice-Subject"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the body under the sink's secret.
	HeaderSignature = "Sluice-Signature"
)

// Webhook is a sink POSTing each message to a URL: the body as is (Content-Type
// application/json), the id, subject and signature in headers, attributes as headers of their
// own names. A 2xx answer acknowledges; anything else, or no answer within the timeout, is a
// failure retried later with the same id.
type Webhook struct {
	url    string
	secret []byte
	client *http.Client
}

func openWebhook(u *url.URL, o Options) (*Webhook, error) {
	q := u.Query()
	secret, err := readSecret(q)
	if err != nil {
		return nil, err
	}
	q.Del("secret")
	q.Del("secret_file")
	u.RawQuery = q.Encode()
	c := o.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: o.Timeout}
	}
	return &Webhook{url: u.String(), secret: []byte(secret), client: c}, nil
}

// Sign returns the signature header value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is body's signature under secret, in constant time.
func Verify(secret, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// Send posts the messages one after the other, in order per subject.
func (s *Webhook) Send(ctx context.Context, msgs []Message) []error {
	return skipAfterFailure(msgs, func(i int) error { return s.post(ctx, msgs[i]) })
}

func (s *Webhook) post(ctx context.Context, m Message) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(m.Body))
	if err != nil {
		return redact.Error(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range m.Attributes {
		req.Header.Set(k, v)
	}
	req.Header.Set(HeaderID, m.ID)
	req.Header.Set(HeaderSubject, m.Subject)
	if len(s.secret) > 0 {
		req.Header.Set(HeaderSignature, Sign(s.secret, m.Body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// The client's error names the URL, whose query may hold the receiver's token.
		return fmt.Errorf("webhook: %w", redact.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("webhook: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return nil
}

// Close closes idle connections.
func (s *Webhook) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
