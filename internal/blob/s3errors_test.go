package blob_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/blob"
)

// TestS3LocationErrors opens s3:// locations on a fake S3 endpoint that answers each bucket as
// the case says, and on an endpoint nothing listens on: each failure reads in plain words naming
// the location — no such object, no such bucket, access denied, cannot reach the S3 endpoint —
// and none shows the SDK's own text.
func TestS3LocationErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		answer := func(status int, code string) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			if r.Method != http.MethodHead {
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>SDK words</Message></Error>`))
			}
		}
		switch {
		case bucket == "denied":
			answer(http.StatusForbidden, "AccessDenied")
		case bucket == "gone":
			answer(http.StatusNotFound, "NoSuchBucket")
		case key == "": // HeadBucket of a bucket that exists
			w.WriteHeader(http.StatusOK)
		case key == "locked.tif":
			answer(http.StatusForbidden, "AccessDenied")
		default:
			answer(http.StatusNotFound, "NoSuchKey")
		}
	}))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	open := func(endpoint, bucket string) (*blob.S3, error) {
		return blob.NewS3(t.Context(), blob.S3Config{Endpoint: endpoint, Bucket: bucket, AccessKey: "k", SecretKey: "s",
			PathStyle: true, MaxAttempts: 1})
	}
	for _, tt := range []struct{ name, endpoint, bucket, want string }{
		{"access denied", srv.URL, "denied", "s3://denied: access denied"},
		{"no such bucket", srv.URL, "gone", "s3://gone: no such bucket"},
		{"unreachable", closed, "ingest", "s3://ingest: cannot reach the S3 endpoint"},
	} {
		t.Run("open "+tt.name, func(t *testing.T) {
			_, err := open(tt.endpoint, tt.bucket)
			checkPlain(t, err, tt.want)
		})
	}
	s, err := open(srv.URL, "ingest")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, key, want string }{
		{"no such object", "batch/missing.tif", "s3://ingest/batch/missing.tif: no such object"},
		{"access denied", "locked.tif", "s3://ingest/locked.tif: access denied"},
	} {
		t.Run("read "+tt.name, func(t *testing.T) {
			_, err := s.OpenObject(t.Context(), tt.key, 0)
			checkPlain(t, err, tt.want)
			var le *blob.LocationError
			if !errors.As(err, &le) {
				t.Errorf("%v is not a *blob.LocationError", err)
			}
			if (tt.name == "no such object") != errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%v: errors.Is ErrNotFound = %v", err, errors.Is(err, blob.ErrNotFound))
			}
		})
	}
}

func checkPlain(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("error %v, want it to end %q", err, want)
	}
	for _, sdk := range []string{"StatusCode", "api error", "operation error", "SDK words", "RequestID"} {
		if strings.Contains(err.Error(), sdk) {
			t.Errorf("error %q shows the SDK's text (%q)", err, sdk)
		}
	}
}
