package fileset

import (
	"context"
	"net/url"
	"strconv"
	"strings"
)

// ParseArchiveorgPath returns the item of an archive.org landing path, /details/ITEM or
// /download/ITEM; with a file path after the item, file is true (a file, not a dataset).
func ParseArchiveorgPath(path string) (item string, file bool, ok bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) < 2 || (segs[0] != "details" && segs[0] != "download") || segs[1] == "" {
		return "", false, false
	}
	return segs[1], len(segs) > 2, true
}

// archiveorgKind is archive.org: its metadata API and downloads on the landing host.
var archiveorgKind = platformKind{name: "archiveorg", hosts: []string{"archive.org"}, api: "https://archive.org",
	make: func(site PlatformSite) platform { return archiveorg{hosts: site.Hosts, api: site.API} }}

type archiveorg struct {
	hosts []string
	api   string
}

// match identifies an item by its name, on the domain archive.org (whichever host serves it).
func (a archiveorg) match(u *url.URL) (platformIdent, bool) {
	prefix, path, ok := siteMatch(u, a.hosts)
	if !ok {
		return platformIdent{}, false
	}
	name, _, ok := ParseArchiveorgPath(path)
	id := identOf(u, prefix, name)
	id.Domain = "archive.org"
	return id, ok
}

// iaSystemFile reports whether name is one of the files archive.org makes for every item.
func iaSystemFile(item, name string) bool {
	base := name[strings.LastIndex(name, "/")+1:]
	if strings.HasPrefix(base, "_") {
		return true
	}
	for _, suffix := range []string{"_meta.xml", "_files.xml", "_meta.sqlite", "_reviews.xml", "_archive.torrent", ".torrent"} {
		if name == item+suffix || strings.HasSuffix(name, suffix) && suffix == ".torrent" {
			return true
		}
	}
	return name == "__ia_thumb.jpg"
}

func (a archiveorg) process(ctx context.Context, f *fetcher, u *url.URL) (*PlatformItem, error) {
	prefix, path, _ := siteMatch(u, a.hosts)
	name, file, ok := ParseArchiveorgPath(path)
	if !ok {
		return nil, errNotHandled("archiveorg", u)
	}
	if file {
		return nil, failWith(StatusPlatformScope, "%s is a file of the item %s, not the item", u.Path, name)
	}
	var md struct {
		Metadata map[string]any `json:"metadata"`
		Files    []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
			Size   string `json:"size"`
			MD5    string `json:"md5"`
			SHA1   string `json:"sha1"`
			Format string `json:"format"`
		} `json:"files"`
	}
	if _, err := apiGet(ctx, f, a.api+"/metadata/"+url.PathEscape(name), &md); err != nil {
		return nil, err
	}
	if md.Metadata == nil {
		// The metadata API answers {} for an item that does not exist.
		return nil, failWith(StatusPlatform404, "archive.org item %s not found", name)
	}
	item := &PlatformItem{
		PlatformName:       "archiveorg",
		PlatformStatus:     "success",
		PlatformDomain:     "archive.org",
		PlatformID:         name,
		PlatformBaseURL:    identOf(u, prefix, name).BaseURL,
		ArchiveorgItemName: name,
		ArchiveorgItemMeta: md.Metadata,
	}
	for _, fl := range md.Files {
		if fl.Source != "original" || iaSystemFile(name, fl.Name) {
			continue
		}
		mf := ManifestFile{Path: fl.Name, MD5: fl.MD5, SHA1: fl.SHA1, Mimetype: iaFormats[fl.Format],
			PlatformURL: a.api + "/download/" + url.PathEscape(name) + "/" + escapePath(fl.Name)}
		if n, err := strconv.ParseInt(fl.Size, 10, 64); err == nil {
			mf.Size = int64p(n)
		}
		item.Manifest = append(item.Manifest, mf)
	}
	return item, nil
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
