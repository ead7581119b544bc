package fileset

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
)

func TestSiteMatch(t *testing.T) {
	t.Parallel()
	sites := []string{"mirror.example:8080/zenodo", "mirror.example:8080/zenodo/deep", "zenodo.org"}
	for _, c := range []struct {
		url, prefix, rest string
		ok                bool
	}{
		{"http://mirror.example:8080/zenodo/record/5", "/zenodo", "/record/5", true},
		{"http://mirror.example:8080/zenodo/deep/record/5", "/zenodo/deep", "/record/5", true},
		{"http://mirror.example:8080/zenodo", "/zenodo", "", true},
		{"http://mirror.example:8080/zenodox/record/5", "", "", false},
		{"http://mirror.example:8080/record/5", "", "", false},
		{"http://other.example:8080/zenodo/record/5", "", "", false},
		{"https://sandbox.zenodo.org/record/5", "", "/record/5", true},
	} {
		u, _ := url.Parse(c.url)
		prefix, rest, ok := siteMatch(u, sites)
		if prefix != c.prefix || rest != c.rest || ok != c.ok {
			t.Errorf("%s: %q %q %v, want %q %q %v", c.url, prefix, rest, ok, c.prefix, c.rest, c.ok)
		}
	}
}

// TestPlatformPathPrefix serves the four platforms' fakes behind one loopback port, each under a
// path of its own (a mirror, a proxy), named by --platform NAME=URL's form (Platforms.Serve):
// landing pages are recognised under the path, the APIs are called under it, and the results are
// those of the platforms served at their own roots.
func TestPlatformPathPrefix(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		f := newFakes(t)
		cs := statusCases(f)
		proxy := func(s *httptest.Server) http.Handler {
			u, _ := url.Parse(s.URL)
			return httputil.NewSingleHostReverseProxy(u)
		}
		var apiCalls, landings atomic.Int64
		mux := http.NewServeMux()
		mux.HandleFunc("/", f.land)
		for _, route := range []struct {
			pattern, strip string
			s              *httptest.Server
		}{{"/zenodo/", "/zenodo", f.zenodo}, {"/figshare/", "/figshare", f.figshare}, {"/figshare/v2/", "/figshare", f.figshareAPI},
			{"/dv/root/", "/dv/root", f.dataverse}, {"/ia/", "/ia", f.ia}} {
			h := http.StripPrefix(route.strip, proxy(route.s))
			mux.Handle(route.pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "/api/") || strings.Contains(r.URL.Path, "/v2/") || strings.Contains(r.URL.Path, "/metadata/") {
					apiCalls.Add(1)
				} else {
					landings.Add(1)
				}
				h.ServeHTTP(w, r)
			}))
		}
		mirror := httptest.NewServer(mux)
		t.Cleanup(mirror.Close)
		base := "http://localhost:" + mirror.URL[strings.LastIndex(mirror.URL, ":")+1:]

		cfg := f.config(t)
		cfg.MaxFileSize = 1 << 20
		cfg.Platforms = nil
		for name, path := range map[string]string{"zenodo": "/zenodo", "figshare": "/figshare", "dataverse": "/dv/root/", "archiveorg": "/ia"} {
			u, _ := url.Parse(base + path)
			if err := cfg.Platforms.Serve(name, u); err != nil {
				t.Fatal(err)
			}
		}
		k, _ := startKit(t, open, cfg)
		// The platforms' cases, their landing pages moved under the mirror's paths.
		moved := map[string]string{baseOf(f.zenodo): base + "/zenodo", baseOf(f.figshare): base + "/figshare",
			baseOf(f.dataverse): base + "/dv/root", baseOf(f.ia): base + "/ia"}
		var picked []statusCase
		for _, c := range cs {
			for from, to := range moved {
				if rest, ok := strings.CutPrefix(c.url, from); ok && !strings.HasPrefix(c.name, "landing") {
					c.url = to + rest
					picked = append(picked, c)
				}
			}
		}
		// A page of the mirror outside every platform's path is no platform's.
		picked = append(picked, statusCase{"outside the paths", base + "/record/100", StatusNoPlatformMatch},
			statusCase{"a path that only starts like one", base + "/zenodox/record/100", StatusNoPlatformMatch})
		reqs := make([]Request, len(picked))
		for i, c := range picked {
			reqs[i] = Request{IngestType: "dataset", BaseURL: c.url}
		}
		_, results := runRequests(t, k, reqs, time.Minute)
		var again []Request
		for i, c := range picked {
			r := results[i]
			if r.Status != c.want {
				t.Errorf("%s (%s): status %q (%s), want %q", c.name, c.url, r.Status, r.ErrorMessage, c.want)
			}
			if r.PlatformName != "" && !strings.HasPrefix(r.PlatformBaseURL, base+"/") {
				t.Errorf("%s: platform_base_url %q, want under %s", c.name, r.PlatformBaseURL, base)
			}
			checkFields(t, c, r)
			if r.Hit {
				again = append(again, reqs[i])
			}
		}
		// The successes again: each success-existing, nothing fetched — no file, no bundle, no
		// landing page or API call through the mirror.
		f.mu.Lock()
		served, archives := f.served, f.gets["archive/130"]
		f.mu.Unlock()
		calls := apiCalls.Load() + landings.Load()
		_, second := runRequests(t, k, again, time.Minute)
		for i, r := range second {
			if r.Status != StatusSuccessExisting {
				t.Errorf("%s again: %s (%s)", again[i].BaseURL, r.Status, r.ErrorMessage)
			}
		}
		f.mu.Lock()
		if f.served != served || f.gets["archive/130"] != archives {
			t.Errorf("the re-run fetched %d bytes of files, %d bundles", f.served-served, f.gets["archive/130"]-archives)
		}
		f.mu.Unlock()
		if n := apiCalls.Load() + landings.Load() - calls; len(again) < 8 || n != 0 {
			t.Errorf("the re-run of %d successes made %d requests through the mirror", len(again), n)
		}
		if len(picked) < 25 || apiCalls.Load() < 20 || landings.Load() < 20 {
			t.Errorf("%d cases, %d API calls and %d landing pages through the mirror", len(picked), apiCalls.Load(), landings.Load())
		}
	})
}
