package fileset

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
)

// ItemFile is one file of an archive.org item folder that an archiveorg-* strategy wrote: its
// name in the item, the blob holding its bytes, and how _files.xml lists it.
type ItemFile struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Source is archive.org's: original for the dataset's files, metadata for the item's own.
	Source string `json:"source"`
	Format string `json:"format,omitempty"`
}

// ItemFolder is the archive.org item an archiveorg-* strategy wrote: the dataset's files (or
// its bundle) and the item's ITEM_meta.xml and ITEM_files.xml, each a blob of the blob store.
type ItemFolder struct {
	Name  string     `json:"name"`
	Files []ItemFile `json:"files"`
}

// maxMetaValue caps each value written to _meta.xml (a description can be long; archive.org's
// own metadata fields are short).
const maxMetaValue = 64 << 10

// itemMetadata is the metadata an item's _meta.xml carries, as Sandcrawler uploads it: the
// collection "datasets", mediatype data, the dataset's landing page as its source, and the
// landing page's title, creators, date and DOI — each overridden by the platform's own item
// metadata where it has the field (archive.org's item's).
func itemMetadata(res *Result, item *PlatformItem) map[string]any {
	md := map[string]any{"collection": "datasets", "mediatype": "data"}
	if res.PlatformBaseURL != "" {
		md["source"] = res.PlatformBaseURL
	}
	if b := res.HTMLBiblio; b != nil {
		if b.Title != "" {
			md["title"] = b.Title
		}
		if len(b.ContribNames) > 0 {
			creators := make([]any, len(b.ContribNames))
			for i, c := range b.ContribNames {
				creators[i] = c
			}
			md["creator"] = creators
		}
		if b.ReleaseDate != "" {
			md["date"] = b.ReleaseDate
		}
		if b.DOI != "" {
			md["doi"] = b.DOI
		}
	}
	for k, v := range item.ArchiveorgItemMeta {
		md[k] = v
	}
	return md
}

// metaXML writes an item's ITEM_meta.xml, archive.org's form: <metadata> with an element per
// field, one per value of a field of several, in key order, <identifier> first. Keys that are
// not XML names, and values that are not text, numbers or booleans, are left out.
func metaXML(name string, md map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	enc.Indent("", "  ")
	start := xml.StartElement{Name: xml.Name{Local: "metadata"}}
	if err := enc.EncodeToken(start); err != nil {
		return nil, err
	}
	field := func(key, v string) error {
		if len(v) > maxMetaValue {
			v = strings.ToValidUTF8(v[:maxMetaValue], "")
		}
		return enc.EncodeElement(v, xml.StartElement{Name: xml.Name{Local: key}})
	}
	if err := field("identifier", name); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		if k != "identifier" && xmlName(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		vals, ok := md[k].([]any)
		if !ok {
			vals = []any{md[k]}
		}
		for _, v := range vals {
			s, ok := metaText(v)
			if !ok {
				continue
			}
			if err := field(k, s); err != nil {
				return nil, err
			}
		}
	}
	if err := enc.EncodeToken(start.End()); err != nil {
		return nil, err
	}
	if err := enc.Flush(); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// metaText is a metadata value as _meta.xml writes it.
func metaText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// xmlName reports whether s is a plain XML element name: an ASCII letter or '_', then letters,
// digits, '_', '-' or '.' (archive.org's metadata keys are such).
func xmlName(s string) bool {
	if s == "" || len(s) > 128 || strings.HasPrefix(strings.ToLower(s), "xml") {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}

// filesXMLEntry is a <file> of _files.xml.
type filesXMLEntry struct {
	XMLName xml.Name `xml:"file"`
	Name    string   `xml:"name,attr"`
	Source  string   `xml:"source,attr"`
	MTime   int64    `xml:"mtime"`
	Size    int64    `xml:"size"`
	MD5     string   `xml:"md5,omitempty"`
	SHA1    string   `xml:"sha1,omitempty"`
	Format  string   `xml:"format,omitempty"`
}

// itemFileDigests are what _files.xml lists of a file beside its ItemFile.
type itemFileDigests struct{ md5, sha1 string }

// filesXML writes an item's ITEM_files.xml, archive.org's form: <files> with a <file name=…
// source=…> per file, its mtime (Unix seconds), size, md5, sha1 and format.
func filesXML(files []ItemFile, digests []itemFileDigests, mtime time.Time) ([]byte, error) {
	entries := make([]filesXMLEntry, len(files))
	for i, f := range files {
		entries[i] = filesXMLEntry{Name: f.Name, Source: f.Source, MTime: mtime.Unix(), Size: f.Size,
			MD5: digests[i].md5, SHA1: digests[i].sha1, Format: f.Format}
	}
	b, err := xml.MarshalIndent(struct {
		XMLName xml.Name `xml:"files"`
		Files   []filesXMLEntry
	}{Files: entries}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(append([]byte(xml.Header), b...), '\n'), nil
}

// iaFormatOf is archive.org's format name of a MIME type ("" when it has none for it).
func iaFormatOf(mimetype string) string {
	mimetype, _, _ = strings.Cut(mimetype, ";")
	best := ""
	for format, m := range iaFormats {
		// Several formats share a type (PDFs): the shortest name, then the first in order.
		if m == mimetype && (best == "" || len(format) < len(best) || len(format) == len(best) && format < best) {
			best = format
		}
	}
	return best
}

// writeItemFolder writes the item folder of an archiveorg-* strategy's success: ITEM_meta.xml
// and ITEM_files.xml into the blob store, beside the dataset's files (or its bundle), which are
// there already. It returns the folder, every file named with its blob.
func writeItemFolder(ctx context.Context, blobs blob.Store, res *Result, item *PlatformItem, now time.Time) (*ItemFolder, error) {
	name := res.ArchiveorgItemName
	folder := &ItemFolder{Name: name}
	var digests []itemFileDigests
	if b := res.FilesetBundle; b != nil {
		path := b.ArchiveorgBundlePath[strings.LastIndexByte(b.ArchiveorgBundlePath, '/')+1:]
		folder.Files = append(folder.Files, ItemFile{Name: path, SHA256: b.FileMeta.SHA256, Size: b.FileMeta.Size,
			Source: "original", Format: iaFormatOf(b.FileMeta.Mimetype)})
		digests = append(digests, itemFileDigests{b.FileMeta.MD5, b.FileMeta.SHA1})
	} else {
		for _, f := range res.Manifest {
			if f.Size == nil || f.SHA256 == "" {
				return nil, fmt.Errorf("item %s: file %q has no stored blob", name, f.Path)
			}
			folder.Files = append(folder.Files, ItemFile{Name: f.Path, SHA256: f.SHA256, Size: *f.Size,
				Source: "original", Format: iaFormatOf(f.Mimetype)})
			digests = append(digests, itemFileDigests{f.MD5, f.SHA1})
		}
	}
	meta, err := metaXML(name, itemMetadata(res, item))
	if err != nil {
		return nil, fmt.Errorf("item %s: _meta.xml: %w", name, err)
	}
	metaFile, metaDigests, err := putItemFile(ctx, blobs, name+"_meta.xml", meta)
	if err != nil {
		return nil, err
	}
	// _files.xml lists the item's files and its _meta.xml, not itself (as archive.org's do).
	listed := append(slices.Clone(folder.Files), metaFile)
	files, err := filesXML(listed, append(digests, metaDigests), now)
	if err != nil {
		return nil, fmt.Errorf("item %s: _files.xml: %w", name, err)
	}
	filesFile, _, err := putItemFile(ctx, blobs, name+"_files.xml", files)
	if err != nil {
		return nil, err
	}
	folder.Files = append(listed, filesFile)
	return folder, nil
}

// putItemFile stores one of an item's own files, format Metadata, in the blob store.
func putItemFile(ctx context.Context, blobs blob.Store, name string, body []byte) (ItemFile, itemFileDigests, error) {
	sum, size, err := blobs.Put(ctx, bytes.NewReader(body))
	if err != nil {
		return ItemFile{}, itemFileDigests{}, fmt.Errorf("store %s: %w", name, err)
	}
	m, s1 := md5.Sum(body), sha1.Sum(body)
	return ItemFile{Name: name, SHA256: sum, Size: size, Source: "metadata", Format: "Metadata"},
		itemFileDigests{hex.EncodeToString(m[:]), hex.EncodeToString(s1[:])}, nil
}
