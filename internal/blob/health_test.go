package blob_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-project/sluice/internal/blob"
)

// TestS3OutageReported: while the endpoint drops every connection, a blob call fails wrapping
// blob.ErrUnavailable, the store reports an outage (since when, failed calls, the cause in plain
// words) and its metrics say it is down; the first answered call ends the outage, and a missing
// blob is then ErrNotFound, not unavailable. A 503 once the retries are spent is an outage too.
func TestS3OutageReported(t *testing.T) {
	t.Parallel()
	var mode atomic.Int32 // 0 up, 1 drop connections, 2 answer 503
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 1:
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if strings.Count(strings.Trim(r.URL.Path, "/"), "/") > 0 {
			w.WriteHeader(http.StatusNotFound) // an object: absent
		}
	}))
	defer srv.Close()
	s, err := blob.NewS3(t.Context(), blob.S3Config{Bucket: "b", Endpoint: srv.URL, AccessKey: "k", SecretKey: "s", PathStyle: true, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	metrics := func() string {
		var b strings.Builder
		blob.WriteMetrics(&b, s)
		return b.String()
	}
	if _, down := blob.OutageOf(s); down || !strings.Contains(metrics(), "sluice_blob_store_up 1") {
		t.Fatalf("an outage before any failure:\n%s", metrics())
	}
	for _, tc := range []struct {
		name   string
		mode   int32
		reason string
	}{{"dropped", 1, "cannot reach the S3 endpoint"}, {"503", 2, "answers 503"}} {
		mode.Store(tc.mode)
		_, err := s.Stat(t.Context(), sum)
		if !errors.Is(err, blob.ErrUnavailable) {
			t.Fatalf("%s: stat = %v, want blob.ErrUnavailable", tc.name, err)
		}
		o, down := blob.OutageOf(s)
		if !down || o.Failures < 2 || !strings.Contains(o.Reason, tc.reason) || !strings.HasPrefix(o.String(), "blob store unreachable since ") {
			t.Fatalf("%s: outage %+v (%v), want down for 2 failed calls because %q", tc.name, o, down, tc.reason)
		}
		if m := metrics(); !strings.Contains(m, "sluice_blob_store_up 0") || strings.Contains(m, "sluice_blob_store_failed_calls_total 0\n") {
			t.Fatalf("%s: metrics during the outage:\n%s", tc.name, m)
		}
		mode.Store(0)
		if _, err := s.Stat(t.Context(), sum); !errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrUnavailable) {
			t.Fatalf("%s: stat once back = %v, want not found", tc.name, err)
		}
		if o, down := blob.OutageOf(s); down {
			t.Fatalf("%s: outage %+v after an answered call", tc.name, o)
		}
	}
}
