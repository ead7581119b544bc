package fileset

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ParseZenodoPath returns the record id of a Zenodo landing path, /record/ID or /records/ID.
func ParseZenodoPath(path string) (string, error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) != 2 || (segs[0] != "record" && segs[0] != "records") || !isDigits(segs[1]) {
		return "", fmt.Errorf("zenodo path %q: not /record/ID", path)
	}
	return segs[1], nil
}

// zenodoKind is Zenodo: zenodo.org, its API at zenodo.org/api.
var zenodoKind = platformKind{name: "zenodo", hosts: []string{"zenodo.org"}, api: "https://zenodo.org/api", apiPath: "/api",
	make: func(site PlatformSite) platform { return zenodo{hosts: site.Hosts, api: site.API} }}

type zenodo struct {
	hosts []string
	api   string
}

func (z zenodo) match(u *url.URL) (platformIdent, bool) {
	prefix, path, ok := siteMatch(u, z.hosts)
	if !ok {
		return platformIdent{}, false
	}
	id, err := ParseZenodoPath(path)
	return identOf(u, prefix, id), err == nil
}

func (z zenodo) process(ctx context.Context, f *fetcher, u *url.URL) (*PlatformItem, error) {
	ident, ok := z.match(u)
	if !ok {
		return nil, errNotHandled("zenodo", u)
	}
	id := ident.ID
	var rec struct {
		ID           any `json:"id"`
		ConceptRecID any `json:"conceptrecid"`
		Metadata     struct {
			AccessRight string `json:"access_right"`
			Title       string `json:"title"`
		} `json:"metadata"`
		Files []struct {
			Key      string `json:"key"`
			Size     *int64 `json:"size"`
			Checksum string `json:"checksum"`
			Links    struct {
				Self string `json:"self"`
			} `json:"links"`
		} `json:"files"`
	}
	code, err := apiGet(ctx, f, z.api+"/records/"+id, &rec, http.StatusGone)
	if err != nil {
		return nil, err
	}
	if code == http.StatusGone {
		return nil, failWith(StatusPlatformRestricted, "zenodo record %s is gone (410)", id)
	}
	if fmt.Sprint(rec.ConceptRecID) == fmt.Sprint(rec.ID) || fmt.Sprint(rec.ConceptRecID) == id {
		return nil, failWith(StatusPlatformScope, "zenodo record %s is a concept record (all versions), not one version", id)
	}
	if rec.Metadata.AccessRight != "open" {
		return nil, failWith(StatusPlatformRestricted, "zenodo record %s: access_right %q", id, rec.Metadata.AccessRight)
	}
	item := &PlatformItem{
		PlatformName:       "zenodo",
		PlatformStatus:     "success",
		PlatformDomain:     ident.Domain,
		PlatformID:         id,
		PlatformBaseURL:    ident.BaseURL,
		ArchiveorgItemName: ident.Domain + "-" + id,
		// The record's files as one zip.
		WebBundleURL: z.api + "/records/" + id + "/files-archive",
	}
	for _, fl := range rec.Files {
		mf := ManifestFile{Path: fl.Key, Size: fl.Size, PlatformURL: fl.Links.Self}
		// "md5:HEX"; other algorithms land in their own field.
		if algo, hex, ok := strings.Cut(fl.Checksum, ":"); ok {
			switch algo {
			case "md5":
				mf.MD5 = hex
			case "sha1":
				mf.SHA1 = hex
			case "sha256":
				mf.SHA256 = hex
			}
		}
		item.Manifest = append(item.Manifest, mf)
	}
	return item, nil
}
