package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/sluice-project/sluice/internal/metadata"
)

// deadlineBody bounds the reading of a request body with the connection's read deadline. At
// first the whole body must arrive within the timeout; [deadlineBody.streaming] turns that into a
// stall timeout, renewed by every read, for uploads that may take as long as they keep sending.
type deadlineBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	stall   bool
	expired atomic.Bool
}

func newDeadlineBody(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) *deadlineBody {
	b := &deadlineBody{body: body, rc: http.NewResponseController(w), timeout: timeout}
	// Unsupported (a test's recorder) means no deadline, not an error.
	_ = b.rc.SetReadDeadline(time.Now().Add(timeout))
	return b
}

// streaming makes the timeout apply to each read rather than to the whole body.
func (b *deadlineBody) streaming() { b.stall = true }

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.stall {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		// The body is in. net/http now watches the connection for a hang-up (which cancels the
		// request's context); that watch must not time out while the handler works.
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.expired.Store(true)
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// timedOut reports whether a read failed on the deadline.
func (b *deadlineBody) timedOut() bool { return b.expired.Load() }

// errCapped is returned by a [capReader] past its cap.
var errCapped = errors.New("api: limit exceeded")

// capReader reads at most left bytes of r; one more byte fails with errCapped, so input of
// exactly the cap passes.
type capReader struct {
	r    io.Reader
	left int64
	hit  bool
	// readErr is the error reading r gave, other than io.EOF: the request body was cut off or
	// malformed (a 400), as opposed to the store failing to keep what was read (a 500).
	readErr error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.hit = true
			return 0, errCapped
		}
		c.noteErr(err)
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	c.noteErr(err)
	return n, err
}

func (c *capReader) noteErr(err error) {
	if err != nil && err != io.EOF && c.readErr == nil {
		c.readErr = err
	}
}

// tooLarge is the error of an exceeded limit: 413, naming the flag that raises it.
func tooLarge(flag, format string, args ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Limit: flag,
		Message: fmt.Sprintf(format, args...) + "; raise it with sluice serve --" + flag}
}

// formatBytes writes n in the largest binary unit that divides it, as the flags accept it.
func formatBytes(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// readCapped reads a body of at most max bytes; what is the body, for the 413.
func readCapped(body io.Reader, max int64, what string) ([]byte, error) {
	cr := &capReader{r: body, left: max}
	b, err := io.ReadAll(cr)
	switch {
	case cr.hit:
		return nil, errf(CodeTooLarge, "%s may be at most %s", what, formatBytes(max))
	case err != nil:
		return nil, errf(CodeBadRequest, "body: %v", err)
	}
	return b, nil
}

// decodeCapped decodes a JSON body of at most max bytes into v.
func decodeCapped(body io.Reader, max int64, what string, v any) error {
	cr := &capReader{r: body, left: max}
	// Numbers in metadata and other free-form values stay json.Number, exactly as sent.
	err := metadata.Decoder(cr).Decode(v)
	switch {
	case cr.hit:
		return errf(CodeTooLarge, "%s may be at most %s", what, formatBytes(max))
	case err != nil:
		return errf(CodeBadRequest, "body: %v", err)
	}
	return nil
}
