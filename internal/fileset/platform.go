package fileset

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/jsonsize"
	"github.com/sluice-project/sluice/internal/metadata"
)

// Platforms says where each platform's landing pages and API are, by platform name. A platform
// it does not name, and a site's empty fields, are the public service's; tests and air-gapped
// mirrors point them at local servers ([Platforms.Serve]).
type Platforms map[string]PlatformSite

// PlatformSite is where one platform is.
type PlatformSite struct {
	// Hosts are its landing sites, HOST[:PORT][/PATH]: the host with its subdomains and, with a
	// path, only URLs under it (a platform behind a path prefix: a mirror, a proxy), whose
	// paths the platform reads from there; "*" matches any host. Defaults to the public
	// service's.
	Hosts []string
	// API is the base of its API. Defaults to the public service's; a platform whose API is on
	// the landing page's host (Dataverse) has none.
	API string
}

// platformKind is a hosting platform the workflow knows: its name, where its public service is,
// and how to make it for a site.
type platformKind struct {
	name string
	// hosts and api are the public service's (see PlatformSite).
	hosts []string
	api   string
	// apiPath is where the API is under a server given as a whole ([Platforms.Serve]); none for
	// a platform without an API base.
	apiPath string
	make    func(site PlatformSite) platform
}

// platformKinds are the platforms, in the order the built-in workflow tries them
// (Sandcrawler's). A platform is its own file, that declares its kind, and its line here.
var platformKinds = []platformKind{dataverseKind, figshareKind, zenodoKind, archiveorgKind}

// PlatformNames lists the platforms in the order the built-in workflow tries them.
var PlatformNames = func() []string {
	out := make([]string, len(platformKinds))
	for i, k := range platformKinds {
		out[i] = k.name
	}
	return out
}()

func kindOf(name string) (platformKind, bool) {
	for _, k := range platformKinds {
		if k.name == name {
			return k, true
		}
	}
	return platformKind{}, false
}

// Serve records that the platform named name is served at base (a mirror, a test server): its
// host, with base's path, is one of the platform's landing sites — a landing page is the
// platform's when its path is under base's, and is parsed from there — and its API is at the
// platform's path under base. It returns an error for an unknown platform.
func (p *Platforms) Serve(name string, base *url.URL) error {
	k, ok := kindOf(name)
	if !ok {
		return fmt.Errorf("unknown platform (one of %s)", strings.Join(PlatformNames, ", "))
	}
	if *p == nil {
		*p = Platforms{}
	}
	site := (*p)[name]
	site.Hosts = append(site.Hosts, base.Host+strings.TrimSuffix(base.EscapedPath(), "/"))
	if k.api != "" {
		site.API = strings.TrimSuffix(base.String(), "/") + k.apiPath
	}
	(*p)[name] = site
	return nil
}

func (p Platforms) withDefaults() Platforms {
	out := Platforms{}
	for _, k := range platformKinds {
		site := p[k.name]
		if len(site.Hosts) == 0 {
			site.Hosts = k.hosts
		}
		if site.API == "" {
			site.API = k.api
		}
		site.API = strings.TrimSuffix(site.API, "/")
		out[k.name] = site
	}
	return out
}

// siteMatch reports whether u is under one of sites (see [PlatformSite.Hosts]): an entry whose
// host is u's host with its port, its host name, or a parent domain of it, or "*", any host;
// and whose path, if any, is u's path or a parent of it. It returns the entry's path (the
// prefix: "" or "/PATH") and u's path under it ("/record/1" of "/zenodo/record/1" under
// "/zenodo"). Of several entries that match, the longest prefix wins.
func siteMatch(u *url.URL, sites []string) (prefix, rest string, ok bool) {
	name := strings.ToLower(u.Hostname())
	path := u.EscapedPath()
	for _, site := range sites {
		h, p, _ := strings.Cut(site, "/")
		h = strings.ToLower(h)
		if h != "*" && h != strings.ToLower(u.Host) && h != name && !strings.HasSuffix(name, "."+h) {
			continue
		}
		if p = strings.TrimSuffix(p, "/"); p != "" {
			p = "/" + p
		}
		r, under := strings.CutPrefix(path, p)
		if !under || (r != "" && !strings.HasPrefix(r, "/")) || (ok && len(p) <= len(prefix)) {
			continue
		}
		prefix, rest, ok = p, r, true
	}
	if !ok {
		return "", "", false
	}
	if unescaped, err := url.PathUnescape(rest); err == nil {
		rest = unescaped
	}
	return prefix, rest, true
}

// platform is one hosting platform: match says whether a landing URL is the platform's, and
// what the URL alone says of the dataset; process reads its API into a manifest.
type platform interface {
	match(u *url.URL) (platformIdent, bool)
	process(ctx context.Context, f *fetcher, u *url.URL) (*PlatformItem, error)
}

// platformIdent is a dataset's identity on its platform, as its landing URL gives it: the
// result's platform_domain, platform_id and platform_base_url, known as soon as a platform
// matches, so that a request its platform refuses (404, restricted, out of scope) still has
// them — and its row in ingest_fileset_platform.
type platformIdent struct {
	Domain  string `json:"platform_domain"`
	ID      string `json:"platform_id"`
	BaseURL string `json:"platform_base_url"`
}

// identOf is the identity of id on the platform at u's host, under prefix.
func identOf(u *url.URL, prefix, id string) platformIdent {
	return platformIdent{Domain: strings.ToLower(u.Hostname()), ID: id, BaseURL: u.Scheme + "://" + u.Host + prefix}
}

func (p Platforms) platform(name string) (platform, bool) {
	k, ok := kindOf(name)
	if !ok {
		return nil, false
	}
	return k.make(p[name]), true
}

// maxAPIBody bounds a platform API response.
const maxAPIBody = 64 << 20

// maxQuoted bounds how much of an error answer's body an error quotes.
const maxQuoted = 512

// apiBounds bounds what a platform API document may hold before it is decoded: a decoded value
// costs tens to hundreds of times its bytes (a 64 MiB list of {} decoded into a Dataverse version
// held 14.5 GB), so the body's size alone does not bound the decode. A file of a listing is at
// most about 40 values (a Dataverse file with its dataFile and checksum; archive.org's are 6 to
// 15, with several derivatives an original), so a listing of maxManifest files fits ten times over
// in one list and, with the dataset's own metadata, in the document.
type apiBounds struct {
	list   int // members of one array or object
	values int // values in the document, containers included
}

func apiBoundsFor(maxManifest int) apiBounds {
	return apiBounds{list: 10 * maxManifest, values: 100 * maxManifest}
}

// check returns a platform-error naming the bound body breaks ([jsonsize.Check]), if any.
func (b apiBounds) check(rawURL string, body []byte) error {
	if err := jsonsize.Check(body, b.list, b.values); err != nil {
		return failWith(StatusPlatformError, "GET %s: the answer has %v, more than a dataset's listing needs; refused before reading it", rawURL, err)
	}
	return nil
}

// quoted is the start of an error answer's body, for an error message: at most maxQuoted bytes,
// quoted, with how much was left out.
func quoted(body []byte) string {
	if len(body) <= maxQuoted {
		return strconv.Quote(string(body))
	}
	return fmt.Sprintf("%q (%d more bytes)", body[:maxQuoted], len(body)-maxQuoted)
}

// apiGet fetches a platform API document. A network failure is platform-error; 404 is
// platform-404; statuses in pass are returned for the caller to map; other non-2xx are
// platform-http-error. A document over maxAPIBody bytes, or over the fetcher's apiBounds, is
// platform-error, refused before it is decoded.
func apiGet(ctx context.Context, f *fetcher, rawURL string, into any, pass ...int) (int, error) {
	resp, _, err := f.get(ctx, rawURL, http.Header{"Accept": {"application/json"}})
	if err != nil {
		if _, _, ok := asStatus(err); ok {
			return 0, err
		}
		return 0, failWith(StatusPlatformError, "GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	for _, c := range pass {
		if resp.StatusCode == c {
			return c, nil
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody+1))
	if err != nil {
		return 0, failWith(StatusPlatformError, "GET %s: read body: %v", rawURL, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, failWith(StatusPlatform404, "GET %s: status 404: %s", rawURL, quoted(body))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return 0, failWith(StatusPlatformHTTPError, "GET %s: status %d: %s", rawURL, resp.StatusCode, quoted(body))
	case len(body) > maxAPIBody:
		return 0, failWith(StatusPlatformError, "GET %s: response over %d bytes", rawURL, maxAPIBody)
	}
	if err := f.api.check(rawURL, body); err != nil {
		return 0, err
	}
	if err := metadata.Unmarshal(body, into); err != nil {
		return 0, failWith(StatusPlatformError, "GET %s: decode: %v", rawURL, err)
	}
	return resp.StatusCode, nil
}

func int64p(n int64) *int64 { return &n }

// mimetypeOf maps archive.org's format names to MIME types, for the common ones.
var iaFormats = map[string]string{
	"Text PDF": "application/pdf", "Additional Text PDF": "application/pdf", "Image Container PDF": "application/pdf",
	"Comma-Separated Values": "text/csv", "Tab-separated values": "text/tab-separated-values",
	"ZIP": "application/zip", "Gzip": "application/gzip", "TAR": "application/x-tar", "JSON": "application/json",
	"Text": "text/plain", "JPEG": "image/jpeg", "PNG": "image/png", "TIFF": "image/tiff", "GIF": "image/gif",
	"HTML": "text/html", "XML": "application/xml", "MPEG4": "video/mp4", "MP3": "audio/mpeg",
	"Microsoft Excel": "application/vnd.ms-excel", "Microsoft Word": "application/msword",
}

func errNotHandled(name string, u *url.URL) error {
	return fmt.Errorf("%s does not handle %s", name, u)
}
