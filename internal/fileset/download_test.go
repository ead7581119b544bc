package fileset

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/egress"
)

// TestDownloadWrongRange resumes a partial file from a server that answers a range request
// with another range: the download starts again from the first byte and verifies.
func TestDownloadWrongRange(t *testing.T) {
	t.Parallel()
	body := content("range", 10000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", len(body)-1, len(body)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(body)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	p, _ := egress.New([]string{"127.0.0.1"}, nil)
	s := New(Config{Egress: p, PartialDir: t.TempDir()})
	partial := filepath.Join(t.TempDir(), "f.partial")
	if err := os.WriteFile(partial, []byte("garbage from an earlier attempt"), 0o644); err != nil {
		t.Fatal(err)
	}
	size := int64(len(body))
	got, err := s.download(t.Context(), ManifestFile{Path: "f", Size: &size, MD5: md5hex(body), PlatformURL: srv.URL + "/f"}, s.cfg.MaxFileSize, partial, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.meta.Size != size || got.meta.MD5 != md5hex(body) {
		t.Errorf("downloaded %+v", got.meta)
	}
}

// TestComposeFailedStep: a request whose step failed for good, deciding nothing, is not a
// success but platform-error with the item's error.
func TestComposeFailedStep(t *testing.T) {
	t.Parallel()
	it := action.Item{Metadata: map[string]any{mdRequest: map[string]any{"base_url": "https://x.example/"}}, Error: "fileset-landing: boom"}
	r, fr := compose(it, nil)
	if r.Status != StatusPlatformError || r.Hit || fr != nil || !strings.Contains(r.ErrorMessage, "boom") {
		t.Errorf("compose of a failed step: %+v", r)
	}
}

// TestDownloadUnsizedLimit: a file without a declared size stops at the limit it is given (its
// share of the request's size limit), however long its body.
func TestDownloadUnsizedLimit(t *testing.T) {
	t.Parallel()
	body := content("long", 50000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	t.Cleanup(srv.Close)
	p, _ := egress.New([]string{"127.0.0.1"}, nil)
	s := New(Config{Egress: p, PartialDir: t.TempDir()})
	partial := filepath.Join(t.TempDir(), "f.partial")
	_, err := s.download(t.Context(), ManifestFile{Path: "f", PlatformURL: srv.URL + "/f"}, 1000, partial, 0, nil)
	if st, msg, _ := asStatus(err); st != StatusBodyTooLarge || msg != "f: body over 1000 bytes" {
		t.Fatalf("download: %v; want body-too-large", err)
	}
	if st, err := os.Stat(partial); err != nil || st.Size() > 1001 {
		t.Fatalf("partial file: %v, %v; want at most 1001 bytes", st, err)
	}
}
