package fileset

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Platforms says where each platform's landing pages and API are. The zero value is the public
// services; tests and air-gapped mirrors point them at local servers.
type Platforms struct {
	// DataverseHosts are the Dataverse installations' landing hosts (with their subdomains).
	// Defaults to some well-known installations (dataverse.harvard.edu, demo.dataverse.org,
	// dataverse.nl, borealisdata.ca, …: see knownDataverseHosts); "*" matches any host whose
	// URL has a persistentId.
	// Dataverse is installed by many institutions and its API is on the landing page's host,
	// so matching any host lets whoever submits a URL choose the server whose manifest is
	// believed: a host is recognised only when it is listed.
	DataverseHosts []string
	// FigshareHosts are Figshare's landing hosts. Defaults to figshare.com (and its subdomains).
	FigshareHosts []string
	// FigshareAPI is the base of Figshare's API. Defaults to https://api.figshare.com/v2.
	FigshareAPI string
	// ZenodoHosts are Zenodo's landing hosts. Defaults to zenodo.org.
	ZenodoHosts []string
	// ZenodoAPI is the base of Zenodo's API. Defaults to https://zenodo.org/api.
	ZenodoAPI string
	// ArchiveorgHosts are archive.org's landing hosts. Defaults to archive.org.
	ArchiveorgHosts []string
	// ArchiveorgAPI is the base of archive.org's metadata API and downloads. Defaults to
	// https://archive.org.
	ArchiveorgAPI string
}

// knownDataverseHosts returns the Dataverse installations recognised by default: the Dataverse
// project's demo and some of the largest public installations. Others are named in
// Platforms.DataverseHosts (`--platform dataverse=URL`).
func knownDataverseHosts() []string {
	return []string{"dataverse.harvard.edu", "demo.dataverse.org", "dataverse.nl", "dataverse.no", "borealisdata.ca",
		"data.qdr.syr.edu", "dataverse.unc.edu", "darus.uni-stuttgart.de", "entrepot.recherche.data.gouv.fr",
		"heidata.uni-heidelberg.de", "edmond.mpg.de", "data.aussda.at", "dataverse.tdl.org",
		"researchdata.ntu.edu.sg", "rdr.kuleuven.be", "data.goettingen-research-online.de"}
}

func (p Platforms) withDefaults() Platforms {
	if len(p.DataverseHosts) == 0 {
		p.DataverseHosts = knownDataverseHosts()
	}
	if len(p.FigshareHosts) == 0 {
		p.FigshareHosts = []string{"figshare.com"}
	}
	if p.FigshareAPI == "" {
		p.FigshareAPI = "https://api.figshare.com/v2"
	}
	if len(p.ZenodoHosts) == 0 {
		p.ZenodoHosts = []string{"zenodo.org"}
	}
	if p.ZenodoAPI == "" {
		p.ZenodoAPI = "https://zenodo.org/api"
	}
	if len(p.ArchiveorgHosts) == 0 {
		p.ArchiveorgHosts = []string{"archive.org"}
	}
	if p.ArchiveorgAPI == "" {
		p.ArchiveorgAPI = "https://archive.org"
	}
	p.FigshareAPI = strings.TrimSuffix(p.FigshareAPI, "/")
	p.ZenodoAPI = strings.TrimSuffix(p.ZenodoAPI, "/")
	p.ArchiveorgAPI = strings.TrimSuffix(p.ArchiveorgAPI, "/")
	return p
}

// hostMatches reports whether u's host is one of hosts: an entry equal to the host with its
// port, to the host name, or a parent domain of it; or "*", any host.
func hostMatches(u *url.URL, hosts []string) bool {
	name := strings.ToLower(u.Hostname())
	for _, h := range hosts {
		h = strings.ToLower(h)
		if h == "*" || h == strings.ToLower(u.Host) || h == name || strings.HasSuffix(name, "."+h) {
			return true
		}
	}
	return false
}

// PlatformNames lists the platforms in the order the built-in workflow tries them
// (Sandcrawler's).
var PlatformNames = []string{"dataverse", "figshare", "zenodo", "archiveorg"}

// platform is one hosting platform: match says whether a landing URL is the platform's, process
// reads its API into a manifest.
type platform interface {
	match(u *url.URL) bool
	process(ctx context.Context, f *fetcher, u *url.URL) (*PlatformItem, error)
}

func (p Platforms) platform(name string) (platform, bool) {
	switch name {
	case "dataverse":
		return dataverse{hosts: p.DataverseHosts}, true
	case "figshare":
		return figshare{hosts: p.FigshareHosts, api: p.FigshareAPI}, true
	case "zenodo":
		return zenodo{hosts: p.ZenodoHosts, api: p.ZenodoAPI}, true
	case "archiveorg":
		return archiveorg{hosts: p.ArchiveorgHosts, api: p.ArchiveorgAPI}, true
	}
	return nil, false
}

// maxAPIBody bounds a platform API response.
const maxAPIBody = 64 << 20

// apiGet fetches a platform API document. A network failure is platform-error; 404 is
// platform-404; statuses in pass are returned for the caller to map; other non-2xx are
// platform-http-error.
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
		return 0, failWith(StatusPlatform404, "GET %s: status 404: %s", rawURL, body)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return 0, failWith(StatusPlatformHTTPError, "GET %s: status %d: %s", rawURL, resp.StatusCode, body)
	case len(body) > maxAPIBody:
		return 0, failWith(StatusPlatformError, "GET %s: response over %d bytes", rawURL, maxAPIBody)
	}
	if err := json.Unmarshal(body, into); err != nil {
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
