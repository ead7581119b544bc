package blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
)

// TestS3StalledUpload: a server that stops reading an upload in the middle of its body (a proxy
// that hangs) used to hold the Put forever, since the response timeout starts only once the body
// is sent. The stalled write now fails after the request timeout and the call is retried.
func TestS3StalledUpload(t *testing.T) {
	t.Parallel()
	endpoint, _ := startVersityGW(t)
	createBucket(t, endpoint, testBucket)
	u, _ := url.Parse(endpoint)
	rp := httputil.NewSingleHostReverseProxy(u)
	stop := make(chan struct{})
	var stalled atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.ContentLength > 1<<20 && stalled.Add(1) == 1 {
			// Read nothing of the body, answer nothing: the client's writes fill the buffers.
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(stop); hs.CloseClientConnections(); hs.Close() })
	s, err := blob.NewS3(t.Context(), blob.S3Config{Bucket: testBucket, Prefix: "stall/", Endpoint: hs.URL, AccessKey: testAccess,
		SecretKey: testSecret, PathStyle: true, SpoolDir: t.TempDir(), RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 12<<20) // two parts of a multipart upload
	rand.Read(data)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sha, size, err := s.Put(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put through a server that stalls one upload: %v", err)
	}
	if size != int64(len(data)) || stalled.Load() < 2 {
		t.Fatalf("put %d bytes, %d large PUTs (want the stalled one retried)", size, stalled.Load())
	}
	if n, err := s.Stat(ctx, sha); err != nil || n != size {
		t.Fatalf("stat %s: %d %v", sha, n, err)
	}
}
