package image

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/pngenc"
)

func TestCorpus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file, ct  string
		pages     int
		thumbType string
	}{
		{"testPNG.png", "image/png", 1, "image/png"},
		{"testJPEG_EXIF.jpg", "image/jpeg", 1, "image/jpeg"},
		{"testTIFF_multipage.tif", "image/tiff", 2, "image/png"},
		{"testGIF.gif", "image/gif", 1, "image/png"},
		{"testBMP.bmp", "image/bmp", 1, "image/png"},
		{"testWEBP.webp", "image/webp", 1, "image/png"},
		{"testHEIF.heic", "image/heic", 1, "image/jpeg"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			convertertest.RequireTools(t, "vips", "vipsheader", "vipsthumbnail", "pdfinfo")
			task := actiontest.NewFileTask(t, convertertest.File(t, tt.file), tt.ct, nil, nil)
			rec := &actiontest.Recorder{}
			if err := New().Run(t.Context(), task, rec); err != nil {
				t.Fatalf("run: %v", err)
			}
			c := checkChild(t, rec, tt.file)
			if c.Metadata["page_count"] != tt.pages {
				t.Errorf("page_count = %v, want %d", c.Metadata["page_count"], tt.pages)
			}
			if got := pdfPages(t, c.Data); got != tt.pages {
				t.Errorf("pdf has %d pages, want %d", got, tt.pages)
			}
			if c.ThumbnailType != tt.thumbType {
				t.Errorf("thumbnail type %s, want %s", c.ThumbnailType, tt.thumbType)
			}
		})
	}
}

func checkChild(t *testing.T, rec *actiontest.Recorder, name string) actiontest.RecordedChild {
	t.Helper()
	if len(rec.Children) != 1 {
		t.Fatalf("%d children, want 1", len(rec.Children))
	}
	c := rec.Children[0]
	if c.Name != name || c.ContentType != "application/pdf" || c.Text == nil {
		t.Fatalf("child %q %q text set %v", c.Name, c.ContentType, c.Text != nil)
	}
	if !strings.HasPrefix(string(c.Data), "%PDF-") {
		t.Fatalf("child blob is not a PDF: %q", c.Data[:min(len(c.Data), 20)])
	}
	convertertest.CheckThumbnail(t, c.ThumbnailData, c.ThumbnailType)
	return c
}

// pdfPages counts the PDF's pages with pdfinfo, which also proves poppler can read it.
func pdfPages(t *testing.T, data []byte) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.pdf")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfinfo", p).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo: %v: %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Pages:"); ok {
			var n int
			for _, c := range strings.TrimSpace(v) {
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

func TestOCR(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "vips", "vipsheader", "vipsthumbnail", "tesseract", "pdftoppm")
	// Render the scanned page of testOCR.pdf to a PNG and OCR it as an image.
	dir := t.TempDir()
	prefix := filepath.Join(dir, "scan")
	if out, err := exec.Command("pdftoppm", "-r", "200", "-png", "-singlefile", convertertest.File(t, "testOCR.pdf"), prefix).CombinedOutput(); err != nil {
		t.Fatalf("pdftoppm: %v: %s", err, out)
	}
	task := actiontest.NewFileTask(t, prefix+".png", "image/png", nil, map[string]any{"ocr": true})
	rec := &actiontest.Recorder{}
	if err := New().Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	c := checkChild(t, rec, "scan.png")
	convertertest.CheckPhrases(t, *c.Text, convertertest.Expectations(t)["testOCR.pdf"].OCRPhrases)
	if c.Metadata["is_from_ocr"] != true {
		t.Errorf("is_from_ocr = %v", c.Metadata["is_from_ocr"])
	}
	if _, ok := c.Metadata["truncated"]; ok {
		t.Errorf("the whole text kept, but metadata %v", c.Metadata)
	}
	// Capped: the cap's worth of the OCR text, and the metadata says so.
	task = actiontest.NewFileTask(t, prefix+".png", "image/png", map[string]any{"max_text_chars": 10}, map[string]any{"ocr": true})
	rec = &actiontest.Recorder{}
	if err := New().Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	capped := checkChild(t, rec, "scan.png")
	if n := utf8.RuneCountInString(*capped.Text); n != 10 || !strings.HasPrefix(*c.Text, *capped.Text) || capped.Metadata["truncated"] != true {
		t.Errorf("max_text_chars 10: %q (%d characters), metadata %v; want the text's first 10, truncated", *capped.Text, n, capped.Metadata)
	}
}

func TestCorrupt(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "vips", "vipsheader", "vipsthumbnail")
	task := actiontest.NewTask(t, "broken.png", "image/png", []byte("\x89PNG\r\n\x1a\nnot really"), nil, nil)
	err := New().Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) {
		t.Fatalf("err = %v, want permanent", err)
	}
	t.Logf("error: %v", err)
}

func TestGoFallback(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ file, ct string }{
		{"testPNG.png", "image/png"}, {"testJPEG_EXIF.jpg", "image/jpeg"},
		{"testGIF.gif", "image/gif"}, {"testBMP.bmp", "image/bmp"}, {"testWEBP.webp", "image/webp"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pages, err := goPages(convertertest.File(t, tt.file), tt.ct, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := writePDF(filepath.Join(dir, "x.pdf"), pages); err != nil {
				t.Fatal(err)
			}
			thumb, typ, err := thumbnail(t.Context(), nil, "", tt.ct, pages[0], false)
			if err != nil {
				t.Fatal(err)
			}
			convertertest.CheckThumbnail(t, thumb, typ)
		})
	}
	// x/image/tiff cannot read JPEG-compressed TIFFs: a clear error, not a crash.
	if _, err := goPages(convertertest.File(t, "testTIFF_multipage.tif"), "image/tiff", t.TempDir()); !action.IsPermanent(err) {
		t.Errorf("jpeg tiff without vips: err = %v", err)
	}
	if _, err := goPages("x.heic", "image/heic", t.TempDir()); !action.IsPermanent(err) {
		t.Errorf("heic without vips: err = %v", err)
	}
}

func TestShrink(t *testing.T) {
	t.Parallel()
	img := image.NewGray(image.Rect(0, 0, 2000, 500))
	img.Set(0, 0, color.White)
	if b := shrink(img, 700).Bounds(); b.Dx() != 700 || b.Dy() != 175 {
		t.Errorf("shrunk to %v", b)
	}
	if shrink(img, 3000) != image.Image(img) {
		t.Error("small image was scaled")
	}
}

// TestPlainPNG: an 8-bit gray or RGB PNG, not interlaced and without transparency, goes into the
// PDF as it is — its pixels come back out of the PDF unchanged (pdfimages) — and every other
// kind still goes through libvips.
func TestPlainPNG(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rgb := image.NewRGBA(image.Rect(0, 0, 37, 23))
	gray := image.NewGray(rgb.Rect)
	nrgba := image.NewNRGBA(rgb.Rect)
	for y := range 23 {
		for x := range 37 {
			rgb.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 11), uint8(x + y), 0xff})
			gray.Set(x, y, color.Gray{uint8(x * y)})
			nrgba.Set(x, y, color.NRGBA{uint8(x), 0, 0, uint8(y * 10)})
		}
	}
	write := func(name string, img image.Image) string {
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rgbPath, grayPath := write("rgb.png", rgb), write("gray.png", gray)
	// The same RGB PNG with a tRNS chunk (a colour key) before its IDAT, and marked interlaced.
	b, _ := os.ReadFile(rgbPath)
	trns := append(append(append([]byte(nil), b[:33]...), 0, 0, 0, 6, 't', 'R', 'N', 'S', 0, 1, 0, 2, 0, 3, 0, 0, 0, 0), b[33:]...)
	laced := append([]byte(nil), b...)
	laced[28] = 1
	for name, want := range map[string]bool{
		rgbPath: true, grayPath: true, write("alpha.png", nrgba): false,
		write("16bit.png", image.NewGray16(rgb.Rect)):                                              false,
		write("palette.png", image.NewPaletted(rgb.Rect, color.Palette{color.Black, color.White})): false,
	} {
		if w, h, ok := plainPNG(name); ok != want || ok && (w != 37 || h != 23) {
			t.Errorf("%s: plainPNG = %d, %d, %v; want %v", filepath.Base(name), w, h, ok, want)
		}
	}
	// Damaged rows: a PNG cut inside its IDAT, one with a byte of its IDAT changed, and ones made
	// whole but with a row's filter byte unknown, a row short, a row more than its height.
	cut := b[:len(b)-40]
	flipped := append([]byte(nil), b...)
	flipped[len(b)-30] ^= 0xff
	rows := func(n, stride int, filter byte) []byte {
		var raw bytes.Buffer
		for i := range n {
			raw.WriteByte(filter * byte(i%2))
			raw.Write(bytes.Repeat([]byte{byte(i)}, stride))
		}
		return makePNG(t, 37, 23, 2, raw.Bytes())
	}
	// A plain PNG followed by more bytes than its pixels justify goes through libvips.
	padded := append(append([]byte(nil), b...), make([]byte, 2<<20)...)
	for name, data := range map[string][]byte{"trns.png": trns, "interlaced.png": laced, "short.png": b[:40], "not.png": []byte("GIF89a"),
		"empty.png": nil, "cut.png": cut, "flipped.png": flipped, "filter7.png": rows(23, 37*3, 7),
		"shortrow.png": rows(23, 37*3-1, 1), "extrarow.png": rows(24, 37*3, 1), "padded.png": padded} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := plainPNG(p); ok {
			t.Errorf("%s: plainPNG = true", name)
		}
	}

	made := filepath.Join(dir, "whole.png")
	if err := os.WriteFile(made, rows(23, 37*3, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := plainPNG(made); !ok {
		t.Error("a whole PNG made of rows with known filters is not a plain PNG")
	}

	convertertest.RequireTools(t, "vips", "vipsheader", "vipsthumbnail", "pdfimages")
	for _, tc := range []struct {
		path string
		img  image.Image
	}{{rgbPath, rgb}, {grayPath, gray}} {
		task := actiontest.NewFileTask(t, tc.path, "image/png", nil, nil)
		rec := &actiontest.Recorder{}
		if err := New().Run(t.Context(), task, rec); err != nil {
			t.Fatalf("run: %v", err)
		}
		c := checkChild(t, rec, task.Item.Name)
		pdf := filepath.Join(t.TempDir(), "x.pdf")
		if err := os.WriteFile(pdf, c.Data, 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(filepath.Dir(pdf), "img")
		if msg, err := exec.Command("pdfimages", "-png", pdf, out).CombinedOutput(); err != nil {
			t.Fatalf("pdfimages: %v: %s", err, msg)
		}
		f, err := os.Open(out + "-000.png")
		if err != nil {
			t.Fatal(err)
		}
		got, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got.Bounds() != tc.img.Bounds() {
			t.Fatalf("%s: the PDF's image is %v", filepath.Base(tc.path), got.Bounds())
		}
		for y := range 23 {
			for x := range 37 {
				r1, g1, b1, _ := got.At(x, y).RGBA()
				r2, g2, b2, _ := tc.img.At(x, y).RGBA()
				if r1>>8 != r2>>8 || g1>>8 != g2>>8 || b1>>8 != b2>>8 {
					t.Fatalf("%s: pixel (%d, %d) of the PDF's image differs", filepath.Base(tc.path), x, y)
				}
			}
		}
	}
}

// makePNG returns a PNG of w×h pixels of colour type ct (8 bits a sample) whose IDAT holds raw,
// the rows with their filter bytes, deflated.
func makePNG(t *testing.T, w, h int, ct byte, raw []byte) []byte {
	t.Helper()
	var idat bytes.Buffer
	z := zlib.NewWriter(&idat)
	z.Write(raw)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, ct
	pngenc.WriteChunk(&out, "IHDR", ihdr[:])
	pngenc.WriteChunk(&out, "IDAT", idat.Bytes())
	pngenc.WriteChunk(&out, "IEND", nil)
	return out.Bytes()
}

// TestWritePDFErrors: a PDF that cannot be written is an error to retry (gopdf drops the errors
// of its writes), and pages past maxPDFImages are refused by their size before any is read.
func TestWritePDFErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	small := filepath.Join(dir, "small.png")
	if err := writePNG(small, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	pages := []page{{path: small, width: 8, height: 8}}
	if err := writePDF(filepath.Join(dir, "ok.pdf"), pages); err != nil {
		t.Fatalf("small page: %v", err)
	}
	if runtime.GOOS == "linux" {
		err := writePDF("/dev/full", pages)
		if err == nil || action.IsPermanent(err) {
			t.Errorf("writing to a full disk: err = %v, want an error to retry", err)
		}
	}

	// A page file of maxPDFImages bytes after an 8×8 one: sparse, and never read.
	huge := filepath.Join(dir, "huge.png")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxPDFImages); err != nil {
		t.Fatal(err)
	}
	pages = append(pages, page{path: huge, width: 8, height: 8}, page{path: small, width: 8, height: 8})
	err := writePDF(filepath.Join(dir, "big.pdf"), pages)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "first 2 of 3 pages") {
		t.Fatalf("pages past the bound: err = %v", err)
	}
	t.Logf("error: %v", err)
}

// paddedJPEG writes a 64×64 JPEG followed by pad zero bytes (a sparse file: the test holds none
// of them) and returns its path.
func paddedJPEG(t *testing.T, dir string, pad int64) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	for y := range 64 {
		for x := range 64 {
			img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 4), 0x80, 0xff})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "padded.jpg")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(buf.Len())+pad); err != nil {
		t.Fatal(err)
	}
	return p
}

// allocated returns the bytes the Go heap allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestPaddedJPEG: a 64×64 JPEG followed by 64 MiB of padding — embedded as it is, the whole file
// would be read into memory several times and copied into the PDF — makes a PDF of the JPEG
// alone, with and without libvips, allocating a small part of the padding. Not parallel, so that
// the heap's allocation count is this test's alone.
func TestPaddedJPEG(t *testing.T) {
	const pad = 64 << 20
	check := func(t *testing.T, pdf []byte, alloc uint64) {
		t.Helper()
		t.Logf("allocated %d KiB, pdf of %d bytes", alloc>>10, len(pdf))
		if alloc > pad/4 {
			t.Errorf("allocated %d MiB for a 64×64 JPEG with %d MiB of padding", alloc>>20, pad>>20)
		}
		if len(pdf) > 64<<10 {
			t.Errorf("the PDF of a 64×64 JPEG has %d bytes", len(pdf))
		}
		if n := pdfPages(t, pdf); n != 1 {
			t.Errorf("pdf has %d pages, want 1", n)
		}
	}
	t.Run("go", func(t *testing.T) {
		dir := t.TempDir()
		src := paddedJPEG(t, dir, pad)
		out := filepath.Join(dir, "x.pdf")
		var err error
		alloc := allocated(func() {
			var pages []page
			if pages, err = goPages(src, "image/jpeg", dir); err == nil {
				err = writePDF(out, pages)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		pdf, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		check(t, pdf, alloc)
	})
	t.Run("vips", func(t *testing.T) {
		convertertest.RequireTools(t, "vips", "vipsheader", "vipsthumbnail", "pdfinfo")
		dir := t.TempDir()
		b, err := os.ReadFile(paddedJPEG(t, dir, 0))
		if err != nil {
			t.Fatal(err)
		}
		task := actiontest.NewTask(t, "padded.jpg", "image/jpeg", b, nil, nil)
		blob, err := task.BlobPath(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(blob, int64(len(b))+pad); err != nil {
			t.Fatal(err)
		}
		rec := &actiontest.Recorder{}
		alloc := allocated(func() { err = New().Run(t.Context(), task, rec) })
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		c := checkChild(t, rec, "padded.jpg")
		check(t, c.Data, alloc)
		if c.Metadata["width"] != 64 || c.Metadata["height"] != 64 {
			t.Errorf("size %v×%v, want 64×64", c.Metadata["width"], c.Metadata["height"])
		}
	})
}

// TestJPEGEnd: jpegEnd finds the end of baseline JPEGs (colour and grey, with stuffed 0xFF bytes
// in their scans), of progressive ones (many scans, tables between them) and of ones with restart
// markers, whatever follows; a JPEG cut before its EOI has no end.
func TestJPEGEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noise := image.NewRGBA(image.Rect(0, 0, 97, 61))
	for i := range noise.Pix {
		noise.Pix[i] = byte(i * 7919 >> 3)
	}
	var rgb, gray bytes.Buffer
	if err := jpeg.Encode(&rgb, noise, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	g := image.NewGray(noise.Rect)
	copy(g.Pix, noise.Pix)
	if err := jpeg.Encode(&gray, g, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rgb.Bytes(), []byte{0xFF, 0x00}) {
		t.Fatal("the test JPEG has no stuffed 0xFF byte")
	}
	check := func(name string, b []byte) {
		t.Helper()
		for _, tail := range [][]byte{nil, []byte("\xff\xd8\xff\xe0 more"), bytes.Repeat([]byte{0xFF}, 100), make([]byte, 1<<20)} {
			data := append(append([]byte(nil), b...), tail...)
			if n, ok := jpegEnd(bufio.NewReaderSize(bytes.NewReader(data), 16)); !ok || n != int64(len(b)) {
				t.Errorf("%s with %d bytes after it: jpegEnd = %d, %v; want %d", name, len(tail), n, ok, len(b))
			}
		}
		for _, cut := range []int{len(b) - 1, len(b) / 2, 2, 0} {
			if n, ok := jpegEnd(bufio.NewReader(bytes.NewReader(b[:cut]))); ok {
				t.Errorf("%s cut to %d bytes: jpegEnd = %d, true", name, cut, n)
			}
		}
	}
	check("baseline", rgb.Bytes())
	check("grey", gray.Bytes())

	convertertest.RequireTools(t, "vips")
	src := filepath.Join(dir, "noise.jpg")
	if err := os.WriteFile(src, rgb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]string{"progressive": "[interlace]", "restart markers": "[restart-interval=1]"} {
		dst := filepath.Join(dir, "out.jpg")
		if out, err := exec.Command("vips", "copy", src, dst+opts).CombinedOutput(); err != nil {
			t.Fatalf("vips: %v: %s", err, out)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		check(name, b)
	}
}

// TestJPEGPage: a JPEG goes into the PDF as it is when its size is justified by its pixels, cut
// at its end when what follows it is not, and through re-encoding when the JPEG itself is not
// (here 2 MiB of comment segments in a 64×64 image).
func TestJPEGPage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := paddedJPEG(t, dir, 0)
	b, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok, err := jpegPage(plain, dir); err != nil || !ok || p.path != plain || p.width != 64 || p.height != 64 {
		t.Errorf("plain JPEG: jpegPage = %+v, %v, %v", p, ok, err)
	}

	padded := filepath.Join(dir, "tail.jpg")
	if err := os.WriteFile(padded, append(append([]byte(nil), b...), make([]byte, 3<<20)...), 0o600); err != nil {
		t.Fatal(err)
	}
	p, ok, err := jpegPage(padded, dir)
	if err != nil || !ok || p.path == padded {
		t.Fatalf("padded JPEG: jpegPage = %+v, %v, %v", p, ok, err)
	}
	if cut, err := os.ReadFile(p.path); err != nil || !bytes.Equal(cut, b) {
		t.Errorf("padded JPEG cut to %d bytes (%v), want the %d of the JPEG", len(cut), err, len(b))
	}

	var com bytes.Buffer
	com.Write(b[:2]) // SOI
	for range 40 {
		com.Write([]byte{0xFF, 0xFE, 0xFF, 0xFF})
		com.Write(make([]byte, 0xFFFD))
	}
	com.Write(b[2:])
	commented := filepath.Join(dir, "commented.jpg")
	if err := os.WriteFile(commented, com.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := jpeg.Decode(bytes.NewReader(com.Bytes())); err != nil {
		t.Fatalf("the commented JPEG does not decode: %v", err)
	}
	if p, ok, err := jpegPage(commented, dir); err != nil || ok {
		t.Errorf("JPEG with 2.5 MiB of comments: jpegPage = %+v, %v, %v; want re-encoding", p, ok, err)
	}
}

// TestGoFallbackPixels: without libvips, a PNG or JPEG whose header claims 30000×30000 pixels
// (3.6 GB as RGBA) gets a plain error naming its size, before anything that size is allocated.
// Not parallel, so that the heap's allocation count is this test's alone.
func TestGoFallbackPixels(t *testing.T) {
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewGray(image.Rect(0, 0, 16, 16)), nil); err != nil {
		t.Fatal(err)
	}
	big := jpg.Bytes()
	sof := bytes.Index(big, []byte{0xFF, 0xC0})
	if sof < 0 {
		t.Fatal("no SOF0 in the test JPEG")
	}
	binary.BigEndian.PutUint16(big[sof+5:], 30000) // height, then width
	binary.BigEndian.PutUint16(big[sof+7:], 30000)
	for _, tc := range []struct {
		name, ct string
		data     []byte
	}{
		{"big.png", "image/png", makePNG(t, 30000, 30000, 2, make([]byte, 1<<20))},
		{"big.jpg", "image/jpeg", big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, tc.name)
			if err := os.WriteFile(src, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			alloc := allocated(func() { _, err = goPages(src, tc.ct, dir) })
			if !action.IsPermanent(err) || !strings.Contains(err.Error(), "30000×30000 pixels") {
				t.Fatalf("err = %v, want a permanent error naming the size", err)
			}
			if alloc > 16<<20 {
				t.Errorf("allocated %d MiB", alloc>>20)
			}
			t.Logf("error: %v; allocated %d KiB", err, alloc>>10)
		})
	}
}

// FuzzJPEGEnd: jpegEnd on any bytes ends, and an end it reports lies within the input and is
// the end of an EOI marker; bytes after it never move it.
func FuzzJPEGEnd(f *testing.F) {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 16, 16)), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("\xff\xd8\xff\xd9"))
	f.Add([]byte("\xff\xd8\xff\xda\x00\x02\xff\x00\xff\xd0\xff\xd9trailing"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ok := jpegEnd(bufio.NewReader(bytes.NewReader(data)))
		if !ok {
			return
		}
		if n < 4 || n > int64(len(data)) || data[n-2] != 0xFF || data[n-1] != 0xD9 {
			t.Fatalf("end %d of %d bytes is not after an EOI marker", n, len(data))
		}
		m, ok := jpegEnd(bufio.NewReader(io.MultiReader(bytes.NewReader(data[:n]), strings.NewReader("\xff\xd9more"))))
		if !ok || m != n {
			t.Fatalf("with bytes after its end: %d, %v; want %d", m, ok, n)
		}
	})
}
