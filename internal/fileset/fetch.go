package fileset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/sluice-project/sluice/internal/egress"
)

// statusError is a failure with a status of the vocabulary: the request (or the file) ends with
// it, permanently.
type statusError struct {
	status string
	msg    string
}

func (e *statusError) Error() string { return e.status + ": " + e.msg }

func failWith(status, format string, args ...any) error {
	return &statusError{status: status, msg: fmt.Sprintf(format, args...)}
}

// asStatus returns the status and message of a *statusError in err's chain.
func asStatus(err error) (string, string, bool) {
	var se *statusError
	if errors.As(err, &se) {
		return se.status, se.msg, true
	}
	return "", "", false
}

// fetcher makes the workflow's HTTP requests: http and https only, every connection checked by
// the egress policy, redirects followed by hand so that each hop is checked and counted.
type fetcher struct {
	client       *http.Client
	maxRedirects int
	userAgent    string
	// turns spaces the polite requests (getPolite) to each host.
	turns hostTurns
	// api bounds the platform API documents apiGet decodes.
	api apiBounds
}

func newFetcher(p *egress.Policy, maxRedirects int, timeout time.Duration, api apiBounds) *fetcher {
	tr := p.Transport()
	// Downloads of a dataset's files go to one host in parallel: keep their connections.
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = timeout
	return &fetcher{
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		maxRedirects: maxRedirects,
		userAgent:    "sluice-fileset/1",
		api:          api,
	}
}

// get requests rawURL with the headers, following redirects, and returns the final response (of
// any status) and its URL. Its errors are a *statusError for a URL or redirect it refuses
// (skip-url-blocklist, bad-redirect, redirect-loop, redirects-exceeded), or the network's error.
func (f *fetcher) get(ctx context.Context, rawURL string, hdr http.Header) (*http.Response, string, error) {
	return f.getPolite(ctx, rawURL, hdr, 0)
}

// getPolite is get, each of whose requests (the first, and each redirect's) is sent only once
// the polite request to its host before it has its response's head and delay has passed since
// (see [hostTurns]); a delay of 0 or less is get's.
func (f *fetcher) getPolite(ctx context.Context, rawURL string, hdr http.Header, delay time.Duration) (*http.Response, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, rawURL, failWith(StatusSkipURLBlocklist, "not an http(s) URL: %q", rawURL)
	}
	seen := map[string]bool{}
	for hop := 0; ; hop++ {
		seen[u.String()] = true
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, u.String(), failWith(StatusSkipURLBlocklist, "bad URL %q: %v", u.String(), err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		req.Header.Set("User-Agent", f.userAgent)
		release, err := f.turns.take(ctx, u.Host, delay)
		if err != nil {
			return nil, u.String(), err
		}
		resp, err := f.client.Do(req)
		release()
		if err != nil {
			if egress.IsRefused(err) {
				if hop > 0 {
					return nil, u.String(), failWith(StatusBadRedirect, "redirected to %s: %v", u.String(), err)
				}
				return nil, u.String(), failWith(StatusSkipURLBlocklist, "%v", err)
			}
			return nil, u.String(), err
		}
		loc := resp.Header.Get("Location")
		if resp.StatusCode < 300 || resp.StatusCode > 399 || loc == "" || resp.StatusCode == http.StatusNotModified {
			return resp, u.String(), nil
		}
		drain(resp)
		next, err := u.Parse(loc)
		if err != nil || (next.Scheme != "http" && next.Scheme != "https") || next.Host == "" {
			return nil, u.String(), failWith(StatusBadRedirect, "%s redirects to %q, not an http(s) URL", u.String(), loc)
		}
		if seen[next.String()] {
			return nil, u.String(), failWith(StatusRedirectLoop, "%s redirects back to %s", u.String(), next.String())
		}
		if hop+1 > f.maxRedirects {
			return nil, u.String(), failWith(StatusRedirectsExceeded, "more than %d redirects from %s", f.maxRedirects, rawURL)
		}
		u = next
	}
}

// drain reads a little of a body we do not want, so its connection can be reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
