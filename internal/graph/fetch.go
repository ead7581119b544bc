package graph

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/pathroot"
)

// Fetcher reads metadata files from a source: a directory, a file:// URL or an http(s):// URL.
// Each read is bounded in size and, over HTTP, in time. It is safe for concurrent use.
type Fetcher struct {
	roots    *pathroot.Roots
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
	perHost  int

	mu     sync.Mutex
	cache  DocumentCache
	flight map[string]*flight       // HTTP fetches under way, by URL
	hosts  map[string]chan struct{} // per host, a slot per fetch under way
}

// DocumentCache keeps what HTTP fetches read, by URL, so that no request reads a URL twice
// ([Store] is one, in the graph's tables). Registry and proxy content is immutable per URL.
type DocumentCache interface {
	// Document returns the body cached for the URL, and whether there is one.
	Document(ctx context.Context, url string) ([]byte, bool, error)
	// PutDocument caches a body for the URL, unless one is cached.
	PutDocument(ctx context.Context, url string, body []byte) error
}

// flight is one HTTP fetch that callers of the same URL wait for.
type flight struct {
	done chan struct{}
	body []byte
	err  error
}

// fetchOpts vary a fetch: the Accept header, and a bound other than the fetcher's.
type fetchOpts struct {
	accept   string
	maxBytes int64
}

// FetcherConfig configures [NewFetcher].
type FetcherConfig struct {
	// Egress is the policy HTTP sources obey. Nil is egress's default: loopback and private
	// addresses are refused, so a test's local proxy needs a policy that allows it.
	Egress *egress.Policy
	// Timeout bounds one HTTP fetch, from the request to the last byte. Defaults to 30s.
	Timeout time.Duration
	// MaxBytes bounds one metadata file; a larger one is a [*MetadataError]. Defaults to 4 MiB.
	MaxBytes int64
	// Roots are the path roots (--path-root) a local source is opened through, on each fetch
	// ([pathroot.Roots.OpenDir]). Nil opens any directory: a process whose requests name
	// directories its own user chose at the shell (`sluice graph`).
	Roots *pathroot.Roots
	// PerHost bounds the HTTP fetches under way to one host at a time (politeness). Defaults to 4.
	PerHost int
}

// NewFetcher returns a fetcher.
func NewFetcher(cfg FetcherConfig) *Fetcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 4 << 20
	}
	if cfg.PerHost <= 0 {
		cfg.PerHost = 4
	}
	return &Fetcher{roots: cfg.Roots, client: cfg.Egress.Client(), timeout: cfg.Timeout, maxBytes: cfg.MaxBytes, perHost: cfg.PerHost,
		flight: map[string]*flight{}, hosts: map[string]chan struct{}{}}
}

// SetCache makes the fetcher keep what it reads over HTTP in c, and read it from there.
func (f *Fetcher) SetCache(c DocumentCache) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cache = c
}

// Fetch returns the file at rel (a slash-separated path) under source. A file that does not
// exist (or a 404 or 410) wraps [ErrMissing]; one over the size bound is a [*MetadataError];
// anything else (a timeout, a 5xx, a refused connection) is an ordinary, transient error. A
// local source is opened through the path roots on each fetch, so a source outside them, or one
// whose folder (or a folder above it) became a link leading out, is a [*pathroot.Error] — the
// request's, not the version's. A file is read inside the source by [os.Root]'s rules: a
// symbolic link leading out of it is a [*MetadataError], as is a source whose scheme is not
// http, https or file.
func (f *Fetcher) Fetch(ctx context.Context, source, rel string) ([]byte, error) {
	return f.fetch(ctx, source, rel, fetchOpts{})
}

// fetch is [Fetcher.Fetch] with options.
func (f *Fetcher) fetch(ctx context.Context, source, rel string, o fetchOpts) ([]byte, error) {
	if o.maxBytes <= 0 {
		o.maxBytes = f.maxBytes
	}
	// The API checked the source with the same classification ([pathroot.Classify]): what it
	// let through as remote is fetched remotely here, never read as a local path.
	loc, err := pathroot.Classify(source)
	if err != nil {
		var pe *pathroot.Error
		errors.As(err, &pe)
		return nil, &MetadataError{What: source, Reason: pe.Reason}
	}
	switch loc.Kind {
	case pathroot.HTTP:
		return f.fetchCached(ctx, strings.TrimSuffix(source, "/")+"/"+rel, rel, o)
	case pathroot.S3:
		return nil, &MetadataError{What: source, Reason: "s3:// sources are not supported (want http, https, file or a directory)"}
	}
	if strings.Contains(rel, "..") {
		return nil, &MetadataError{What: rel, Reason: "path leaves the source"}
	}
	dir, err := f.OpenSource(source)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	// Read inside the source: a link in it may not lead out of it.
	file, err := pathroot.OpenFile(dir, filepath.FromSlash(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", rel, ErrMissing)
	}
	if pathroot.Escapes(err) {
		return nil, &MetadataError{What: rel, Reason: pathroot.Reason(err)}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	defer file.Close()
	if fi, err := file.Stat(); err == nil && !fi.Mode().IsRegular() {
		return nil, &MetadataError{What: rel, Reason: "not a regular file"}
	}
	return read(file, rel, o.maxBytes)
}

// OpenSource opens a local source directory through the fetcher's path roots
// ([pathroot.Roots.OpenDir]); the caller closes it. A source refused is a [*pathroot.Error].
func (f *Fetcher) OpenSource(source string) (*os.Root, error) {
	return f.roots.OpenDir(source)
}

// fetchCached returns the body of an HTTP URL: from the cache, or fetched once however many
// callers ask for it at the same time (the first fetches, the others wait for its answer), and
// then cached. Only a 200's body is cached; an error is each caller's.
func (f *Fetcher) fetchCached(ctx context.Context, target, rel string, o fetchOpts) ([]byte, error) {
	f.mu.Lock()
	cache := f.cache
	if fl, ok := f.flight[target]; ok {
		f.mu.Unlock()
		select {
		case <-fl.done:
			return fl.body, fl.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	fl := &flight{done: make(chan struct{})}
	f.flight[target] = fl
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.flight, target)
		f.mu.Unlock()
		close(fl.done)
	}()
	// Looked up inside the flight: a caller after this one's cache write finds the body there.
	if cache != nil {
		b, ok, err := cache.Document(ctx, target)
		if err != nil {
			fl.err = err
			return nil, err
		}
		if ok && int64(len(b)) <= o.maxBytes {
			fl.body = b
			return b, nil
		}
	}
	fl.body, fl.err = f.fetchHTTP(ctx, target, rel, o)
	if fl.err == nil && cache != nil {
		// A body the cache could not keep is fetched again by a later request; this one has it.
		_ = cache.PutDocument(ctx, target, fl.body)
	}
	return fl.body, fl.err
}

// hostSlot waits for one of the host's fetch slots and returns its release.
func (f *Fetcher) hostSlot(ctx context.Context, host string) (func(), error) {
	f.mu.Lock()
	slots, ok := f.hosts[host]
	if !ok {
		slots = make(chan struct{}, f.perHost)
		f.hosts[host] = slots
	}
	f.mu.Unlock()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *Fetcher) fetchHTTP(ctx context.Context, target, rel string, o fetchOpts) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, &MetadataError{What: target, Reason: err.Error()}
	}
	if o.accept != "" {
		req.Header.Set("Accept", o.accept)
	}
	release, err := f.hostSlot(ctx, req.URL.Host)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: no answer within %s (waiting for a slot of host %s)", target, f.timeout, req.URL.Host)
	}
	defer release()
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("fetch %s: no answer within %s", target, f.timeout)
		}
		return nil, fmt.Errorf("fetch %s: %w", target, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, fmt.Errorf("%s: status %d: %w", rel, resp.StatusCode, ErrMissing)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, fmt.Errorf("fetch %s: status %d", target, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, &MetadataError{What: rel, Reason: fmt.Sprintf("status %d", resp.StatusCode)}
	}
	if resp.ContentLength > o.maxBytes {
		return nil, &MetadataError{What: rel, Reason: fmt.Sprintf("%d bytes, more than the limit of %d bytes", resp.ContentLength, o.maxBytes)}
	}
	b, err := read(resp.Body, rel, o.maxBytes)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("fetch %s: body not complete within %s", target, f.timeout)
	}
	return b, err
}

// read reads r to the end, at most maxBytes.
func read(r io.Reader, rel string, maxBytes int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if int64(len(b)) > maxBytes {
		return nil, &MetadataError{What: rel, Reason: fmt.Sprintf("more than the limit of %d bytes", maxBytes)}
	}
	return b, nil
}
