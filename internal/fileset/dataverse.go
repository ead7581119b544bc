package fileset

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// PersistentID is a parsed Dataverse persistentId (doi: or hdl:): the dataset's id, under an
// optional shoulder, and the file's id when it names a file.
type PersistentID struct {
	Type      string // "doi" or "hdl"
	Authority string // "10.5072", "20.500.12690"
	Shoulder  string // may be empty
	DatasetID string
	FileID    string // empty for a dataset
}

var (
	pidAuthority = regexp.MustCompile(`^[0-9]+(\.[0-9]+)+$`)
	pidShoulder  = regexp.MustCompile(`^[A-Za-z0-9]{1,8}$`)
	pidID        = regexp.MustCompile(`^[A-Za-z0-9]{6}$`)
)

// ParsePersistentID parses a Dataverse persistentId: TYPE:AUTHORITY/[SHOULDER/]DATASET[/FILE],
// TYPE doi or hdl, dataset and file ids of six letters and digits. With two segments after the
// authority they are the shoulder and the dataset (a file id needs its dataset's shoulder).
func ParsePersistentID(s string) (PersistentID, error) {
	var p PersistentID
	typ, rest, ok := strings.Cut(s, ":")
	if !ok || (typ != "doi" && typ != "hdl") {
		return p, fmt.Errorf("persistentId %q: not doi: or hdl:", s)
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || len(parts) > 4 || !pidAuthority.MatchString(parts[0]) {
		return p, fmt.Errorf("persistentId %q: not AUTHORITY/[SHOULDER/]DATASET[/FILE]", s)
	}
	if typ == "doi" && !strings.HasPrefix(parts[0], "10.") {
		return p, fmt.Errorf("persistentId %q: a DOI's authority starts with 10.", s)
	}
	p.Type, p.Authority = typ, parts[0]
	ids := parts[1:]
	for _, id := range ids {
		if id == "" {
			return p, fmt.Errorf("persistentId %q: empty segment", s)
		}
	}
	switch len(ids) {
	case 1:
		p.DatasetID = ids[0]
	case 2:
		p.Shoulder, p.DatasetID = ids[0], ids[1]
	case 3:
		p.Shoulder, p.DatasetID, p.FileID = ids[0], ids[1], ids[2]
	}
	if p.Shoulder != "" && !pidShoulder.MatchString(p.Shoulder) {
		return PersistentID{}, fmt.Errorf("persistentId %q: bad shoulder %q", s, p.Shoulder)
	}
	if !pidID.MatchString(p.DatasetID) {
		return PersistentID{}, fmt.Errorf("persistentId %q: bad dataset id %q", s, p.DatasetID)
	}
	if p.FileID != "" && !pidID.MatchString(p.FileID) {
		return PersistentID{}, fmt.Errorf("persistentId %q: bad file id %q", s, p.FileID)
	}
	return p, nil
}

// Dataset returns the persistentId of the dataset (without the file id).
func (p PersistentID) Dataset() string {
	s := p.Type + ":" + p.Authority + "/"
	if p.Shoulder != "" {
		s += p.Shoulder + "/"
	}
	return s + p.DatasetID
}

// dataverseKind is Dataverse. It is installed by many institutions and its API is on the
// landing page's host, so matching any host would let whoever submits a URL choose the server
// whose manifest is believed: a host is recognised only when it is listed — by default the
// Dataverse project's demo and some of the largest public installations; others are named in
// the site's Hosts (`--platform dataverse=URL`), or any host whose URL has a persistentId with
// "*".
var dataverseKind = platformKind{name: "dataverse",
	hosts: []string{"dataverse.harvard.edu", "demo.dataverse.org", "dataverse.nl", "dataverse.no", "borealisdata.ca",
		"data.qdr.syr.edu", "dataverse.unc.edu", "darus.uni-stuttgart.de", "entrepot.recherche.data.gouv.fr",
		"heidata.uni-heidelberg.de", "edmond.mpg.de", "data.aussda.at", "dataverse.tdl.org",
		"researchdata.ntu.edu.sg", "rdr.kuleuven.be", "data.goettingen-research-online.de"},
	make: func(site PlatformSite) platform { return dataverse{hosts: site.Hosts} }}

type dataverse struct{ hosts []string }

// match identifies a dataset by the persistentId of its URL, as given (Sandcrawler's
// platform_id; a file's, for a file-level id, which process refuses).
func (d dataverse) match(u *url.URL) (platformIdent, bool) {
	prefix, _, ok := siteMatch(u, d.hosts)
	if !ok {
		return platformIdent{}, false
	}
	pid := u.Query().Get("persistentId")
	_, err := ParsePersistentID(pid)
	return identOf(u, prefix, pid), err == nil
}

// dvVersion is the part of a Dataverse dataset version we read.
type dvVersion struct {
	VersionNumber      *int   `json:"versionNumber"`
	VersionMinorNumber *int   `json:"versionMinorNumber"`
	VersionState       string `json:"versionState"`
	Files              []struct {
		Label          string `json:"label"`
		DirectoryLabel string `json:"directoryLabel"`
		Description    string `json:"description"`
		Restricted     bool   `json:"restricted"`
		DataFile       struct {
			ID               int64  `json:"id"`
			PersistentID     string `json:"persistentId"`
			Filename         string `json:"filename"`
			OriginalFileName string `json:"originalFileName"`
			Filesize         *int64 `json:"filesize"`
			OriginalFileSize *int64 `json:"originalFileSize"`
			MD5              string `json:"md5"`
			ContentType      string `json:"contentType"`
			OriginalFormat   string `json:"originalFileFormat"`
		} `json:"dataFile"`
	} `json:"files"`
}

func (d dataverse) process(ctx context.Context, f *fetcher, u *url.URL) (*PlatformItem, error) {
	pid, err := ParsePersistentID(u.Query().Get("persistentId"))
	if err != nil {
		return nil, errNotHandled("dataverse", u)
	}
	if pid.FileID != "" {
		return nil, failWith(StatusPlatformScope, "persistentId %s names a file, not a dataset", u.Query().Get("persistentId"))
	}
	ident, ok := d.match(u)
	if !ok {
		return nil, errNotHandled("dataverse", u)
	}
	// The API is on the landing site: its host, under its path prefix.
	base := ident.BaseURL
	dsPID := pid.Dataset()
	version := u.Query().Get("version")
	var v dvVersion
	if version == "" {
		var ds struct {
			Status string `json:"status"`
			Data   struct {
				LatestVersion *dvVersion `json:"latestVersion"`
			} `json:"data"`
		}
		if _, err := apiGet(ctx, f, base+"/api/datasets/:persistentId/?persistentId="+url.QueryEscape(dsPID), &ds); err != nil {
			return nil, err
		}
		if ds.Data.LatestVersion == nil {
			return nil, failWith(StatusPlatformError, "dataset %s has no latestVersion", dsPID)
		}
		v = *ds.Data.LatestVersion
	} else {
		var ds struct {
			Data dvVersion `json:"data"`
		}
		if _, err := apiGet(ctx, f, base+"/api/datasets/:persistentId/versions/"+url.PathEscape(version)+"?persistentId="+url.QueryEscape(dsPID), &ds); err != nil {
			return nil, err
		}
		v = ds.Data
	}
	if v.VersionNumber == nil {
		return nil, failWith(StatusPlatformError, "dataset %s: version without a versionNumber", dsPID)
	}
	ver := fmt.Sprintf("%d.%d", *v.VersionNumber, deref(v.VersionMinorNumber))
	item := &PlatformItem{
		PlatformName:       "dataverse",
		PlatformStatus:     "success",
		PlatformDomain:     ident.Domain,
		PlatformID:         dsPID,
		PlatformBaseURL:    base,
		ArchiveorgItemName: fmt.Sprintf("%s-%s-v%s", ident.Domain, pid.DatasetID, ver),
		WebBundleURL:       base + "/api/access/dataset/:persistentId/?persistentId=" + url.QueryEscape(dsPID) + "&format=original",
	}
	for _, fl := range v.Files {
		df := fl.DataFile
		mf := ManifestFile{Path: df.Filename, Size: df.Filesize, MD5: df.MD5, Mimetype: df.ContentType,
			Extra: map[string]any{"version": ver}}
		if fl.Description != "" {
			mf.Extra["description"] = fl.Description
		}
		access := base + "/api/access/datafile/" + fmt.Sprint(df.ID)
		if df.PersistentID != "" {
			access = base + "/api/access/datafile/:persistentId/?persistentId=" + url.QueryEscape(df.PersistentID)
		}
		if df.OriginalFileName != "" {
			// The original upload, not Dataverse's tabular derivative (whose md5 is the original's).
			mf.Path, mf.Size, mf.Mimetype = df.OriginalFileName, df.OriginalFileSize, df.OriginalFormat
			if strings.Contains(access, "?") {
				access += "&format=original"
			} else {
				access += "?format=original"
			}
		}
		if fl.DirectoryLabel != "" {
			mf.Path = fl.DirectoryLabel + "/" + mf.Path
		}
		mf.PlatformURL = access
		item.Manifest = append(item.Manifest, mf)
	}
	return item, nil
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
