package fileset

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
)

// TestItemFolderBundle writes the item folder of an archiveorg-fileset-bundled success: the
// bundle under its path in the item, then ITEM_meta.xml and ITEM_files.xml, whose metadata
// keeps what a platform gave that XML can hold — no key that is not an XML name, no value that
// is not text, a number (as written) or a boolean, a long value cut, control characters replaced — with
// Sandcrawler's defaults under it.
func TestItemFolderBundle(t *testing.T) {
	t.Parallel()
	blobs, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{ArchiveorgItemName: "zenodo.org-130", PlatformBaseURL: "https://zenodo.org/record/130",
		HTMLBiblio: &HTMLBiblio{Title: "A dataset", ContribNames: []string{"Ada", "Grace"}, ReleaseDate: "2021-03-04"},
		FilesetBundle: &FilesetBundle{ArchiveorgBundlePath: "zenodo.org-130/files-archive", FileMeta: FileMeta{Size: 1234,
			MD5: strings.Repeat("a", 32), SHA1: strings.Repeat("b", 40), SHA256: strings.Repeat("c", 64), Mimetype: "application/zip"}}}
	item := &PlatformItem{ArchiveorgItemMeta: map[string]any{"title": "The platform's title", "bad key": "x", "1st": "x",
		"nested": map[string]any{"a": "b"}, "year": float64(2021), "big": json.Number("12345678901234567890"), "subject": []any{"a", "b\x01c", 7.5},
		"description": strings.Repeat("é", maxMetaValue)}}
	now := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)
	folder, err := writeItemFolder(t.Context(), blobs, res, item, now)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range folder.Files {
		names = append(names, f.Name+" "+f.Source)
		if size, err := blobs.Stat(t.Context(), f.SHA256); f.Source == "metadata" && (err != nil || size != f.Size) {
			t.Errorf("%s: blob %d bytes, %v; want %d", f.Name, size, err, f.Size)
		}
	}
	if got := strings.Join(names, ", "); got != "files-archive original, zenodo.org-130_meta.xml metadata, zenodo.org-130_files.xml metadata" ||
		folder.Files[0].SHA256 != res.FilesetBundle.FileMeta.SHA256 || folder.Files[0].Format != "ZIP" {
		t.Fatalf("folder %s: %+v", got, folder.Files)
	}
	read := func(f ItemFile) []byte {
		rc, err := blobs.Open(t.Context(), f.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return b
	}
	var meta struct {
		Fields []struct {
			XMLName xml.Name
			Value   string `xml:",chardata"`
		} `xml:",any"`
	}
	raw := read(folder.Files[1])
	if err := xml.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("_meta.xml: %v\n%s", err, raw)
	}
	var got []string
	for _, f := range meta.Fields {
		v := f.Value
		if len(v) > 40 {
			v = v[:4] + "…" + strings.Repeat("?", len(v)/1000)
		}
		got = append(got, f.XMLName.Local+"="+v)
	}
	// The description is cut at 64 KiB, on a rune boundary (32,768 two-byte runes).
	want := "identifier=zenodo.org-130 big=12345678901234567890 collection=datasets creator=Ada creator=Grace date=2021-03-04 " +
		"description=éé…" + strings.Repeat("?", 65) + " mediatype=data source=https://zenodo.org/record/130 subject=a subject=b\uFFFDc subject=7.5 " +
		"title=The platform's title year=2021"
	if strings.Join(got, " ") != want {
		t.Errorf("_meta.xml fields:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	var files struct {
		Files []struct {
			Name  string `xml:"name,attr"`
			MTime int64  `xml:"mtime"`
			Size  int64  `xml:"size"`
			MD5   string `xml:"md5"`
		} `xml:"file"`
	}
	if err := xml.Unmarshal(read(folder.Files[2]), &files); err != nil || len(files.Files) != 2 ||
		files.Files[0].Name != "files-archive" || files.Files[0].Size != 1234 || files.Files[0].MD5 != res.FilesetBundle.FileMeta.MD5 ||
		files.Files[0].MTime != now.Unix() || files.Files[1].Name != "zenodo.org-130_meta.xml" {
		t.Errorf("_files.xml: %+v, %v", files, err)
	}
}
