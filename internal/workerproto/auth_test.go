package workerproto_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/workerproto"
)

// countingBody is a request body that records how much of it was read: endless when n is 0,
// else n bytes.
type countingBody struct {
	read atomic.Int64
	n    int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	if c.n > 0 && c.read.Load() >= c.n {
		return 0, io.EOF
	}
	for i := range p {
		p[i] = 'x'
	}
	c.read.Add(int64(len(p)))
	return len(p), nil
}

func (c *countingBody) Close() error { return nil }

// TestUnauthenticatedBodyUnread checks that a poll without a valid token, and a fragment POST to
// an unknown task id, are answered without reading any of the body: the handler reads nothing of
// a 1 MiB body, and over a real connection the answer arrives while the body is still open (the
// client never finishes sending it).
func TestUnauthenticatedBodyUnread(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	srv := workerproto.New(workerproto.Config{Backend: workerproto.NewBackend(b.e, b.blobs, b.w), LongPoll: 50 * time.Millisecond,
		Auth: func(token string) (string, error) {
			switch token {
			case "":
				return "", workerproto.ErrNoToken
			case "worker":
				return "w1", nil
			}
			return "", workerproto.ErrBadToken
		}})
	h := srv.Handler()
	for _, tt := range []struct {
		name, path, auth, contentType string
		want                          int
	}{
		{"poll without a token", "/v1/workers/Pdf", "", "", 401},
		{"poll with a bad token", "/v1/workers/Pdf", "Bearer nope", "", 401},
		{"fragment to an unknown task", "/v1/workers/Pdf/00000000-0000-4000-8000-000000000000/0.json", "", "", 404},
		{"multipart to an unknown task", "/v1/workers/Pdf/00000000-0000-4000-8000-000000000000", "", "multipart/form-data; boundary=x", 404},
		{"non-multipart to an unknown task", "/v1/workers/Pdf/00000000-0000-4000-8000-000000000000", "", "text/plain", 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// In process: the handler reads none of the body.
			body := &countingBody{n: 1 << 20}
			req := httptest.NewRequestWithContext(t.Context(), "POST", tt.path, body)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want || body.read.Load() != 0 {
				t.Errorf("in process: %d after reading %d bytes of the body; want %d after none", rec.Code, body.read.Load(), tt.want)
			}

			// Over a connection: the response comes back while the body is still being sent.
			hs := httptest.NewServer(h)
			defer hs.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			pr, pw := io.Pipe()
			defer pw.Close()
			// The transport waits for its body writer; end the body when the request times out.
			context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
			go func() { _, _ = pw.Write([]byte(strings.Repeat("x", 1024))) }() // then nothing more, never closed
			req, _ = http.NewRequestWithContext(ctx, "POST", hs.URL+tt.path, pr)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("over a connection: %v (the server waited for the body)", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want || ctx.Err() != nil {
				t.Errorf("over a connection: %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	// A valid token still gets its long poll answered.
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/workers/Pdf", strings.NewReader("ignored"))
	req.Header.Set("Authorization", "Bearer worker")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Errorf("authorized poll: %d, want 204", rec.Code)
	}
}
