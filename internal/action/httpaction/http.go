// Package httpaction provides the `http` action, which calls an outside service for an item: a
// templated URL, the item described as JSON (or its blob) as the body, statuses mapped to outcome
// events, and a JSON response read back into the item.
//
// Errors are classified the way DESIGN §4.5 asks: 5xx, 429, timeouts and connection errors are
// transient and retried with backoff (or snoozed when the server sends Retry-After); other 4xx
// statuses are bad input and fail the item. Connections obey an egress policy (package egress):
// by default loopback, private and link-local addresses are refused, permanently.
package httpaction

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/result"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/action/tasktemplate"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/redact"
	"github.com/sluice-project/sluice/internal/tracing"
)

// maxResponse caps how much of a response body is read.
const maxResponse = 1 << 20

// maxSnooze caps how long a Retry-After header can postpone a task. A snooze does not spend an
// attempt, so an unbounded delay from a misbehaving server would park the item indefinitely.
const maxSnooze = time.Hour

// Config configures the `http` action. The zero value is ready to use.
type Config struct {
	// Egress is the policy of the addresses requests may go to (redirects included). Nil is
	// egress's default policy: loopback, private and link-local addresses are refused. A refused
	// connection fails the item with a permanent error.
	Egress *egress.Policy
	// Client, when set, sends the requests instead of Egress's client, and is then responsible
	// for enforcing a policy (tests). Its Timeout, if any, applies on top of the step's `timeout`
	// setting and the per-attempt timeout. Defaults to Egress.Client().
	Client *http.Client
}

// New returns the `http` action. It is safe for concurrent use.
func New(cfg Config) action.Action {
	if cfg.Client == nil {
		cfg.Client = cfg.Egress.Client()
	}
	return &httpAction{client: cfg.Client}
}

type httpAction struct {
	client *http.Client
}

func (a *httpAction) Spec() action.Spec {
	outcomesFor, validate := settings.Hooks(parseConfig)
	return action.Spec{
		Name:        "http",
		Version:     "1",
		Doc:         "Calls an HTTP service for the item, sending it as JSON or sending its blob.",
		Concurrency: 16,
		OutcomesFor: outcomesFor,
		Validate:    validate,
		Settings:    typed.Settings(),
	}
}

func newTemplateData(t *action.Task) templateData {
	return templateData{
		Item: tasktemplate.ItemOf(t.Item),
		Step: t.Step, Job: t.JobID,
	}
}

// itemBody is the request body with `body: item`.
type itemBody struct {
	JobID       int64          `json:"job_id"`
	ItemID      int64          `json:"item_id"`
	Name        string         `json:"name"`
	ContentType string         `json:"content_type"`
	Size        int64          `json:"size"`
	SHA256      string         `json:"sha256"`
	Metadata    map[string]any `json:"metadata"`
	Options     map[string]any `json:"options"`
	Step        string         `json:"step"`
}

func (a *httpAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	c, err := parseConfig(t.With)
	if err != nil {
		return action.Permanent(fmt.Errorf("http settings: %w", err))
	}
	data := newTemplateData(t)
	raw, err := render(c.url, data)
	if err != nil {
		return action.Permanent(err)
	}
	u, err := parseURL(raw)
	if err != nil {
		return action.Permanent(err)
	}
	// where names the endpoint in errors without its query or credentials, which may hold secrets.
	where := c.method + " " + u.Scheme + "://" + u.Host + u.EscapedPath()

	reqCtx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		reqCtx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := a.newRequest(reqCtx, c, t, u)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "sluice")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("sluice-%d-%d-%s", t.JobID, t.Item.ID, url.PathEscape(t.Step)))
	for _, h := range c.headers {
		v, err := render(h.value, data)
		if err != nil {
			return action.Permanent(err)
		}
		if h.name == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(h.name, v)
	}

	tracing.Inject(ctx, req.Header) // the attempt's trace continues in the service, if it traces
	resp, err := a.client.Do(req)
	if err != nil {
		if re := (*egress.RefusedError)(nil); errors.As(err, &re) {
			return action.Permanent(fmt.Errorf("%s: %w", where, re))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", where, ctx.Err())
		}
		if reqCtx.Err() != nil {
			return fmt.Errorf("%s: timed out after %s", where, c.timeout)
		}
		return fmt.Errorf("%s: %w", where, redact.Error(err)) // the client's error quotes the whole URL
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", where, ctx.Err())
		}
		return fmt.Errorf("%s: read response: %w", where, err)
	}
	over := len(body) > maxResponse

	m, mapped := c.outcome(resp.StatusCode)
	switch code := resp.StatusCode; {
	case mapped && m.failure:
		// The event fires with the step's failure events (the engine fires the outcomes of a
		// permanent failure), so the workflow can route this failure by its cause.
		out.Emit(m.event)
		return action.Permanentf("%s: status %d (%s): %s", where, code, m.event, snippet(body))
	case mapped || 200 <= code && code < 300:
		if c.response == responseJSON {
			if over {
				return action.Permanentf("%s: response larger than %d MiB", where, maxResponse>>20)
			}
			if err := result.Apply(ctx, body, result.Source{What: "response", Declared: c.declared, Dir: t.TempDir}, out); err != nil {
				return err
			}
		}
		if mapped {
			out.Emit(m.event)
		}
		return nil
	case code == http.StatusTooManyRequests || code >= 500:
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return action.Snooze(d)
		}
		return fmt.Errorf("%s: status %d: %s", where, code, snippet(body))
	default:
		return action.Permanentf("%s: status %d: %s", where, code, snippet(body))
	}
}

// newRequest builds the request with the body the step asks for.
func (a *httpAction) newRequest(ctx context.Context, c *config, t *action.Task, u *url.URL) (*http.Request, error) {
	switch c.body {
	case bodyItem:
		b, err := json.Marshal(itemBody{
			JobID: t.JobID, ItemID: t.Item.ID, Name: t.Item.Name, ContentType: t.Item.ContentType,
			Size: t.Item.Size, SHA256: t.Item.BlobSHA256, Metadata: t.Item.Metadata, Options: t.Item.Options,
			Step: t.Step,
		})
		if err != nil {
			return nil, action.Permanentf("encode item %d as JSON: %w", t.Item.ID, err)
		}
		req, err := http.NewRequestWithContext(ctx, c.method, u.String(), bytes.NewReader(b))
		if err != nil {
			return nil, action.Permanent(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	case bodyBlob:
		if t.Item.BlobSHA256 == "" || t.OpenBlob == nil {
			return nil, action.Permanentf("item %q has no content to send", t.Item.Name)
		}
		req, err := http.NewRequestWithContext(ctx, c.method, u.String(), http.NoBody)
		if err != nil {
			return nil, action.Permanent(err)
		}
		if t.Item.Size > 0 {
			rc, err := t.OpenBlob(ctx)
			if err != nil {
				return nil, fmt.Errorf("open blob of item %d: %w", t.Item.ID, err)
			}
			// The transport closes Body; GetBody reopens the blob for a redirect.
			req.Body = rc
			req.ContentLength = t.Item.Size
			req.GetBody = func() (io.ReadCloser, error) { return t.OpenBlob(ctx) }
		}
		ct := t.Item.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		req.Header.Set("Content-Type", ct)
		return req, nil
	default:
		req, err := http.NewRequestWithContext(ctx, c.method, u.String(), nil)
		if err != nil {
			return nil, action.Permanent(err)
		}
		return req, nil
	}
}

// parseURL checks that s is an absolute http or https URL.
func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("url %s: %w", redact.URL(s), errors.Unwrap(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url: %q is not an absolute http or https URL", redact.URL(s))
	}
	return u, nil
}

// retryAfter parses a Retry-After header, in seconds or as an HTTP date, into a delay between one
// second and [maxSnooze].
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int(maxSnooze/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, time.Second), maxSnooze), true
}

// snippet returns the start of a body for an error message.
func snippet(b []byte) string {
	if len(bytes.TrimSpace(b)) == 0 {
		return "(empty body)"
	}
	return result.Snippet(b, 512)
}
