package convertertest

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Canary is what a hostile document tries to reach: a file holding a random token, readable by
// every user (so only the sandbox keeps it out, not file permissions), an image file beside it,
// and an HTTP server on loopback that counts the requests it gets.
type Canary struct {
	Token string
	// File holds the token; Image is a PNG, for documents that link images.
	File, Image string
	// URL is the canary server's base URL, such as http://127.0.0.1:34567.
	URL string

	mu   sync.Mutex
	hits []string
}

// NewCanary writes the canary files in a world-readable directory and starts the server.
func NewCanary(t testing.TB) *Canary {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	c := &Canary{Token: "CANARY" + strings.ToUpper(hex.EncodeToString(b))}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.File = filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(c.File, []byte("the secret is "+c.Token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Image = filepath.Join(dir, "secret.png")
	if err := os.WriteFile(c.Image, canaryPNG(), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.hits = append(c.hits, r.Method+" "+r.URL.String())
		c.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, ".png") {
			w.Header().Set("Content-Type", "image/png")
			w.Write(canaryPNG())
			return
		}
		fmt.Fprintf(w, "<p>fetched %s</p>", c.Token)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Hits returns the requests the canary server received.
func (c *Canary) Hits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.hits...)
}

// The canary image's odd size tells it from anything else in a PDF (a broken-image icon).
const canaryW, canaryH = 97, 61

func canaryPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, canaryW, canaryH))
	for x := range canaryW {
		for y := range canaryH {
			img.Set(x, y, color.RGBA{R: uint8(4 * x), G: 200, B: uint8(4 * y), A: 255})
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// HostileHTML returns HTML documents, by name, that try to put the canary into their PDF: an
// iframe, an object and an image of file:// URLs, a meta refresh and a JavaScript redirect to
// the file, a fetch and subresources to the loopback server.
func (c *Canary) HostileHTML() map[string]string {
	f := "file://" + c.File
	return map[string]string{
		"iframe.html":   `<html><body><p>iframe page</p><iframe src="` + f + `" width=800 height=400></iframe><iframe src="file:///etc/passwd"></iframe></body></html>`,
		"object.html":   `<html><body><p>object page</p><object data="` + f + `" type="text/plain" width=800 height=400></object><embed src="` + f + `"><img src="file://` + c.Image + `"></body></html>`,
		"refresh.html":  `<html><head><meta http-equiv="refresh" content="0; url=` + f + `"></head><body><p>refresh page</p></body></html>`,
		"redirect.html": `<html><body><p>redirect page</p><script>location.href = "` + f + `"; document.write("<p>script ran</p>")</script></body></html>`,
		"fetch.html": `<html><head><link rel="stylesheet" href="` + c.URL + `/style.css"><base href="` + c.URL + `/"></head><body><p>fetch page</p>
<img src="` + c.URL + `/img.png"><img src="img2.png"><iframe src="` + c.URL + `/frame"></iframe>
<script>fetch("` + c.URL + `/fetch").then(r => r.text()).then(t => document.body.append(t))</script></body></html>`,
	}
}

// LinkedDOCX returns a Word document whose only image is linked (not embedded) from target, an
// http:// or file:// URL.
func LinkedDOCX(t testing.TB, target string) []byte {
	t.Helper()
	return zipOf(t, [][2]string{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		{"word/_rels/document.xml.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rIdImg" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="` + target + `" TargetMode="External"/></Relationships>`},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><w:body>
<w:p><w:r><w:t>Linked image document</w:t></w:r></w:p>
<w:p><w:r><w:drawing><wp:inline><wp:extent cx="1828800" cy="1828800"/><wp:docPr id="1" name="Picture 1"/><a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:pic><pic:nvPicPr><pic:cNvPr id="1" name="linked.png"/><pic:cNvPicPr/></pic:nvPicPr><pic:blipFill><a:blip r:link="rIdImg"/><a:stretch><a:fillRect/></a:stretch></pic:blipFill><pic:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="1828800" cy="1828800"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></pic:spPr></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>
</w:body></w:document>`},
	})
}

// LinkedODT returns an OpenDocument text whose only image is linked from target.
func LinkedODT(t testing.TB, target string) []byte {
	t.Helper()
	return zipOf(t, [][2]string{
		{"mimetype", "application/vnd.oasis.opendocument.text"},
		{"META-INF/manifest.xml", `<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>`},
		{"content.xml", `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2"><office:body><office:text>
<text:p>Linked image document</text:p>
<text:p><draw:frame draw:name="img" svg:width="5cm" svg:height="5cm" text:anchor-type="as-char"><draw:image xlink:href="` + target + `" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p>
<text:p><text:a xlink:type="simple" xlink:href="` + target + `">link</text:a></text:p>
</office:text></office:body></office:document-content>`},
	})
}

func zipOf(t testing.TB, files [][2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range files {
		method := zip.Deflate
		if f[0] == "mimetype" {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f[0], Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// CheckNoLeak fails the test when a PDF (its raw bytes and the text pdftotext extracts from
// it), or a text, holds the canary's token, when the PDF holds an image (a linked image that
// was loaded), or when the canary server was reached.
func (c *Canary) CheckNoLeak(t testing.TB, name string, pdf []byte, texts ...string) {
	t.Helper()
	if bytes.Contains(pdf, []byte(c.Token)) {
		t.Errorf("%s: the PDF's bytes hold the canary token", name)
	}
	if len(pdf) > 0 {
		if txt := PDFText(t, pdf); strings.Contains(txt, c.Token) {
			t.Errorf("%s: the PDF's text holds the canary token: %q", name, txt)
		}
		for _, im := range PDFImages(t, pdf) {
			if im == [2]int{canaryW, canaryH} {
				t.Errorf("%s: the PDF holds the canary image: a linked image was loaded", name)
			}
		}
	}
	for _, s := range texts {
		if strings.Contains(s, c.Token) {
			t.Errorf("%s: the text holds the canary token: %q", name, s)
		}
	}
	if h := c.Hits(); len(h) > 0 {
		t.Errorf("%s: the canary server was reached: %v", name, h)
	}
}

// PDFText returns the text of a PDF, extracted with pdftotext.
func PDFText(t testing.TB, pdf []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "doc.pdf")
	if err := os.WriteFile(f, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", f, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return string(out)
}

// PDFImages returns the width and height of each image of a PDF, listed by pdfimages -list.
func PDFImages(t testing.TB, pdf []byte) [][2]int {
	t.Helper()
	f := filepath.Join(t.TempDir(), "doc.pdf")
	if err := os.WriteFile(f, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfimages", "-list", f).Output()
	if err != nil {
		t.Fatalf("pdfimages: %v", err)
	}
	var sizes [][2]int
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if i < 2 || len(f) < 5 { // a header line and a rule
			continue
		}
		var w, h int
		fmt.Sscan(f[3], &w)
		fmt.Sscan(f[4], &h)
		sizes = append(sizes, [2]int{w, h})
	}
	return sizes
}
