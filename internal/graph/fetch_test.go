package graph_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/graph"
)

// TestFetchLocal reads a local source's files inside the source: a file, and a link staying in
// it, are read; a link leading out of it, a path leaving it and a source whose scheme is not
// one the API checks as local ("a:/../../x", which a drive-letter reading would take for a
// relative path) are refused as metadata errors, with nothing read.
func TestFetchLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, outside := filepath.Join(dir, "proxy"), filepath.Join(dir, "outside")
	for _, err := range []error{
		os.MkdirAll(filepath.Join(src, "m"), 0o700),
		os.MkdirAll(outside, 0o700),
		os.WriteFile(filepath.Join(src, "m", "v1.mod"), []byte("module m\n"), 0o600),
		os.WriteFile(filepath.Join(outside, "secret.mod"), []byte("secret"), 0o600),
		os.Symlink("v1.mod", filepath.Join(src, "m", "v2.mod")),
		os.Symlink("../../outside/secret.mod", filepath.Join(src, "m", "v3.mod")),
		os.Symlink("../outside", filepath.Join(src, "out")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	f := graph.NewFetcher(graph.FetcherConfig{})
	for _, tt := range []struct {
		name, source, rel string
		refused           string // part of the metadata error; "" reads "module m\n"
	}{
		{"file", src, "m/v1.mod", ""},
		{"file URL", "file://" + src, "m/v1.mod", ""},
		{"link inside", src, "m/v2.mod", ""},
		{"link to a file outside", src, "m/v3.mod", "leads out of its root"},
		{"link to a directory outside", src, "out/secret.mod", "leads out of its root"},
		{"dot-dot", src, "../outside/secret.mod", "leaves the source"},
		{"one-letter scheme", "a:/../../" + outside, "secret.mod", `the scheme "a"`},
		{"file URL on another host", "file://host" + outside, "secret.mod", "file:///path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := f.Fetch(t.Context(), tt.source, tt.rel)
			if tt.refused == "" {
				if err != nil || string(b) != "module m\n" {
					t.Fatalf("Fetch(%q, %q) = %q, %v", tt.source, tt.rel, b, err)
				}
				return
			}
			var me *graph.MetadataError
			if !errors.As(err, &me) || !strings.Contains(me.Reason, tt.refused) || b != nil {
				t.Fatalf("Fetch(%q, %q) = %q, %v; want a metadata error with %q", tt.source, tt.rel, b, err, tt.refused)
			}
		})
	}
}

// TestFetchPerHost: at most PerHost fetches to one host are under way at a time; the others
// wait for a slot, and all complete.
func TestFetchPerHost(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inflight, most := 0, 0
	release := make(chan struct{})
	reached := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		if inflight == 2 {
			select {
			case reached <- struct{}{}:
			default:
			}
		}
		mu.Unlock()
		<-release
		mu.Lock()
		inflight--
		mu.Unlock()
		_, _ = w.Write([]byte("module x\n"))
	}))
	defer srv.Close()
	f := graph.NewFetcher(graph.FetcherConfig{Egress: loopback(t), PerHost: 2, Timeout: time.Minute})
	errs := make(chan error, 6)
	for i := range 6 {
		go func() {
			_, err := f.Fetch(t.Context(), srv.URL, fmt.Sprintf("m%d/@v/v1.0.0.mod", i))
			errs <- err
		}()
	}
	<-reached
	close(release)
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Errorf("%d fetches under way at most, want 2", most)
	}
}
