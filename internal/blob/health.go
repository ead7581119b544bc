package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrUnavailable is wrapped by the error of a blob operation that failed because the store did
// not answer (refused or dropped connections, timeouts) or answered that it cannot serve now
// (a 5xx status, after the client's own retries). It says nothing about the blob or about the
// input being processed: the engine gives such an attempt back and runs the task again later.
var ErrUnavailable = errors.New("blob store unavailable")

// Outage describes a blob store that is not answering: since when (the first failed call of
// the run of failures), how many calls failed since, and the last failure in plain words.
type Outage struct {
	Since    time.Time
	Failures int64
	Reason   string
}

// String is the outage as an operator reads it on /readyz and in the web UI's banner.
func (o Outage) String() string {
	return fmt.Sprintf("blob store unreachable since %s (%s ago, %d failed calls): %s",
		o.Since.UTC().Format(time.RFC3339), time.Since(o.Since).Round(time.Second), o.Failures, o.Reason)
}

// Watched is implemented by blob stores that watch whether their remote end answers ([S3]).
type Watched interface {
	// Outage returns the current outage; ok is false while the store answers.
	Outage() (o Outage, ok bool)
}

// OutageOf returns the store's current outage, when it is a [Watched] store that is not
// answering.
func OutageOf(s Store) (Outage, bool) {
	if w, ok := s.(Watched); ok {
		return w.Outage()
	}
	return Outage{}, false
}

// WriteMetrics writes the store's health as Prometheus metrics when it is [Watched]:
// sluice_blob_store_up (0 during an outage), sluice_blob_store_unreachable_seconds (how long the
// outage has lasted) and sluice_blob_store_failed_calls_total. Other stores write nothing.
func WriteMetrics(w io.Writer, s Store) {
	ws, ok := s.(Watched)
	if !ok {
		return
	}
	o, down := ws.Outage()
	up, secs := 1, 0.0
	if down {
		up, secs = 0, time.Since(o.Since).Seconds()
	}
	var failed int64
	if h, ok := s.(*S3); ok {
		failed = h.health.failedTotal()
	}
	fmt.Fprintf(w, "# HELP sluice_blob_store_up 1 while the blob store answers, 0 during an outage.\n# TYPE sluice_blob_store_up gauge\nsluice_blob_store_up %d\n", up)
	fmt.Fprintf(w, "# HELP sluice_blob_store_unreachable_seconds How long the blob store has not answered (0 while it answers).\n# TYPE sluice_blob_store_unreachable_seconds gauge\nsluice_blob_store_unreachable_seconds %g\n", secs)
	fmt.Fprintf(w, "# HELP sluice_blob_store_failed_calls_total Calls to the blob store that got no answer or a 5xx one, each attempt of a retried call counted.\n# TYPE sluice_blob_store_failed_calls_total counter\nsluice_blob_store_failed_calls_total %d\n", failed)
}

// health follows a store's calls: the first failed one starts an outage, the next answered one
// ends it. It is safe for concurrent use.
type health struct {
	mu     sync.Mutex
	down   bool
	outage Outage
	failed int64
}

func (h *health) observe(failure string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if failure == "" {
		h.down = false
		return
	}
	h.failed++
	if !h.down {
		h.down, h.outage = true, Outage{Since: time.Now()}
	}
	h.outage.Failures++
	h.outage.Reason = failure
}

func (h *health) current() (Outage, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outage, h.down
}

func (h *health) failedTotal() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// watchedClient is the S3 client's HTTP client, telling health the outcome of every request
// (each attempt of the SDK's retries).
type watchedClient struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	health *health
}

func (c watchedClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(r)
	switch {
	case err != nil && r.Context().Err() != nil:
		// The caller gave up (a canceled task): says nothing about the store.
	case err != nil:
		c.health.observe("cannot reach the S3 endpoint: " + err.Error())
	case resp.StatusCode >= 500:
		c.health.observe(fmt.Sprintf("the S3 endpoint answers %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)))
	default:
		c.health.observe("")
	}
	return resp, err
}

// unavailable wraps err with [ErrUnavailable] when it is the store's failure to answer: no
// connection, no response in time, or a 5xx status once the retries are spent.
func unavailable(err error) error {
	// The caller's own deadline or cancelation (an attempt's timeout) is not the store's.
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	var resp *awshttp.ResponseError
	if errors.As(err, &sendErr) || errors.As(err, &netErr) || errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
