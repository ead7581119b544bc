package fileset

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ParseFigsharePath parses a Figshare article path, /articles/[TYPE/]SLUG/ID/VERSION, into the
// article's id and version. A version is required: without one the article is not pinned.
func ParseFigsharePath(path string) (id, version string, err error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) < 4 || len(segs) > 5 || segs[0] != "articles" {
		return "", "", fmt.Errorf("figshare path %q: not /articles/[TYPE/]SLUG/ID/VERSION", path)
	}
	id, version = segs[len(segs)-2], segs[len(segs)-1]
	if !isDigits(id) || !isDigits(version) {
		return "", "", fmt.Errorf("figshare path %q: id and version must be numbers", path)
	}
	for _, s := range segs[1 : len(segs)-2] {
		if s == "" {
			return "", "", fmt.Errorf("figshare path %q: empty segment", path)
		}
	}
	return id, version, nil
}

func isDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// figshareKind is Figshare: figshare.com and its subdomains, its API at api.figshare.com/v2.
var figshareKind = platformKind{name: "figshare", hosts: []string{"figshare.com"}, api: "https://api.figshare.com/v2", apiPath: "/v2",
	make: func(site PlatformSite) platform { return figshare{hosts: site.Hosts, api: site.API} }}

type figshare struct {
	hosts []string
	api   string
}

func (fs figshare) match(u *url.URL) (platformIdent, bool) {
	prefix, path, ok := siteMatch(u, fs.hosts)
	if !ok {
		return platformIdent{}, false
	}
	id, _, err := ParseFigsharePath(path)
	return identOf(u, prefix, id), err == nil
}

func (fs figshare) process(ctx context.Context, f *fetcher, u *url.URL) (*PlatformItem, error) {
	prefix, path, ok := siteMatch(u, fs.hosts)
	id, version, err := ParseFigsharePath(path)
	if !ok || err != nil {
		return nil, errNotHandled("figshare", u)
	}
	ident := identOf(u, prefix, id)
	var art struct {
		ID          int64  `json:"id"`
		Title       string `json:"title"`
		IsPublic    bool   `json:"is_public"`
		IsEmbargoed bool   `json:"is_embargoed"`
		IsLinkOnly  bool   `json:"is_link_only"`
		Files       []struct {
			ID          int64  `json:"id"`
			Name        string `json:"name"`
			Size        *int64 `json:"size"`
			ComputedMD5 string `json:"computed_md5"`
			DownloadURL string `json:"download_url"`
			Mimetype    string `json:"mimetype"`
		} `json:"files"`
	}
	if _, err := apiGet(ctx, f, fs.api+"/articles/"+id+"/versions/"+version, &art); err != nil {
		return nil, err
	}
	if !art.IsPublic || art.IsEmbargoed {
		return nil, failWith(StatusPlatformRestricted, "figshare article %s v%s is not public or is embargoed", id, version)
	}
	if art.IsLinkOnly {
		return nil, failWith(StatusPlatformScope, "figshare article %s v%s is link-only", id, version)
	}
	item := &PlatformItem{
		PlatformName:       "figshare",
		PlatformStatus:     "success",
		PlatformDomain:     ident.Domain,
		PlatformID:         id,
		PlatformBaseURL:    ident.BaseURL,
		ArchiveorgItemName: fmt.Sprintf("%s-%s-v%s", ident.Domain, id, version),
		WebBundleURL:       fmt.Sprintf("%s/articles/%s/versions/%s/download", fs.api, id, version),
	}
	for _, fl := range art.Files {
		item.Manifest = append(item.Manifest, ManifestFile{Path: fl.Name, Size: fl.Size, MD5: fl.ComputedMD5,
			Mimetype: fl.Mimetype, PlatformURL: fl.DownloadURL, Extra: map[string]any{"version": version}})
	}
	return item, nil
}
