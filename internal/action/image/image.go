// Package image provides the "image" action of the documents workflow: it turns a PNG, JPEG,
// GIF, TIFF (every page), BMP, WebP or HEIC image into a PDF with one page per image page, a
// thumbnail, and — with the item option ocr — tesseract's text, all as one final child.
//
// libvips (vips, vipsthumbnail) does the decoding and resizing; without it a pure-Go fallback
// handles PNG, JPEG, GIF, BMP, WebP and the first page of a TIFF, and HEIC is unhandled.
package image

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	_ "image/gif" // decoders for the pure-Go fallback

	_ "golang.org/x/image/bmp"
	"golang.org/x/image/draw"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"

	"github.com/signintech/gopdf"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/textclean"
)

// Name is the action's name in workflows.
const Name = "image"

// maxPages bounds the pages read from one multi-page image.
const maxPages = 10_000

// Action is the "image" action. The zero value is ready to use and safe for concurrent use.
type Action struct{}

// New returns the "image" action.
func New() *Action { return &Action{} }

// Spec describes the action.
func (a *Action) Spec() action.Spec {
	w := 1.0
	return action.Spec{
		Name:    Name,
		Version: "1",
		Doc: "Make a PDF (one page per image page) and a thumbnail of an image, OCR it with the item option ocr; " +
			"one final child.",
		Settings:       converter.Settings(),
		Validate:       converter.ValidateSettings,
		Concurrency:    2,
		Timeout:        30 * time.Minute,
		ProgressWeight: &w,
	}
}

// Policy caches the action's effects by its input (the conversion cache).
func (a *Action) Policy() action.Policy { return action.Policy{Cacheable: true} }

// page is one image page ready to embed: a PNG or JPEG file and its pixel size.
type page struct {
	path          string
	width, height int
}

// Run converts one image.
func (a *Action) Run(ctx context.Context, t *action.Task, out action.Output) error {
	cfg, err := converter.ParseSettings(t.With)
	if err != nil {
		return err
	}
	src, err := t.BlobPath(ctx)
	if err != nil {
		return fmt.Errorf("get image blob: %w", err)
	}
	ct := strings.ToLower(t.Item.ContentType)
	r := &converter.Runner{Limits: cfg.Limits, Dir: t.TempDir, Heartbeat: out.Heartbeat, Env: vipsEnv(ct)}
	if src, err = r.Stage(src); err != nil {
		return err
	}
	useVips := converter.Installed("vips") && converter.Installed("vipsheader")
	md := map[string]any{}
	var pages []page
	if useVips {
		pages, err = vipsPages(ctx, r, src, ct)
	} else {
		md["degraded"] = true
		pages, err = goPages(src, ct, t.TempDir)
	}
	if err != nil {
		return err
	}
	out.Progress(0.3)
	pdfPath := filepath.Join(t.TempDir, "image.pdf")
	if err := writePDF(pdfPath, pages); err != nil {
		return err
	}
	out.Progress(0.4)

	thumb, thumbType, err := thumbnail(ctx, r, src, ct, pages[0], useVips && converter.Installed("vipsthumbnail"))
	if err != nil {
		return err
	}
	out.Progress(0.5)

	text := ""
	ocr := converter.BoolOption(t.Item.Options, "ocr")
	if ocr {
		lang := converter.TesseractLang(converter.StringOption(t.Item.Options, "lang"))
		// The text kept is what max_text_chars can hold (4 bytes a character at most): the pages
		// after it are not OCRed, and tesseract's output (up to 64 MiB a page) is not kept past it.
		limit := cfg.MaxTextChars*utf8.UTFMax + utf8.UTFMax
		var texts []string
		kept, cut := 0, false
		for i, p := range pages {
			if kept >= limit {
				cut = true
				break
			}
			s, err := r.OCR(ctx, p.path, lang)
			if err != nil {
				return err
			}
			s = strings.TrimRight(s, " \t\n")
			if n := limit - kept; len(s) > n {
				for n > 0 && !utf8.RuneStart(s[n]) { // cut between characters
					n--
				}
				s, cut = s[:n], true
			}
			kept += len(s)
			texts = append(texts, s)
			out.Progress(0.5 + 0.45*float64(i+1)/float64(len(pages)))
		}
		var capped bool
		text, capped = textclean.SanitizeCut(strings.Join(texts, "\n\n"), cfg.MaxTextChars)
		if cut || capped {
			md["truncated"] = true
		}
	}
	md["is_from_ocr"] = ocr
	md["page_count"] = len(pages)
	md["width"], md["height"] = pages[0].width, pages[0].height

	f, err := os.Open(pdfPath)
	if err != nil {
		return err
	}
	defer f.Close()
	return out.CreateChild(ctx, action.Child{
		Name:          t.Item.Name,
		ContentType:   "application/pdf",
		Metadata:      md,
		Blob:          f,
		Text:          &text,
		Thumbnail:     bytes.NewReader(thumb),
		ThumbnailType: thumbType,
	})
}

// vipsEnv is the environment libvips' tools run with for an image of type ct. libvips reads
// JPEG, PNG, GIF, TIFF and WebP itself, and loads its modules — ImageMagick's (BMP and more),
// libheif's (HEIC, AVIF), poppler's, OpenSlide's, JPEG XL's — at every start, whatever the image:
// for those types a prefix with no modules (VIPSHOME) spares each run the loading.
func vipsEnv(ct string) []string {
	switch ct {
	case "image/jpeg", "image/pjpeg", "image/png", "image/gif", "image/tiff", "image/webp":
		return []string{"VIPSHOME=/nonexistent"}
	}
	return nil
}

// isPhoto reports whether thumbnails of the type are JPEG (photographs) rather than PNG.
func isPhoto(ct string) bool {
	switch ct {
	case "image/jpeg", "image/pjpeg", "image/heic", "image/heif", "image/heic-sequence", "image/heif-sequence", "image/avif":
		return true
	}
	return false
}

// vipsPages converts every page of the image to an embeddable file with libvips. Most JPEGs
// and plain PNGs are embedded as they are (jpegPage, plainPNG).
func vipsPages(ctx context.Context, r *converter.Runner, src, ct string) ([]page, error) {
	n := 1
	if ct == "image/tiff" {
		b, err := r.Output(ctx, "vipsheader", 1<<10, "-f", "n-pages", src)
		if err != nil {
			return nil, imageFailure(ct, err)
		}
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 1 {
			n = min(v, maxPages)
		}
	}
	if ct == "image/png" {
		if w, h, ok := plainPNG(src); ok {
			return []page{{path: src, width: w, height: h}}, nil
		}
	}
	if ct == "image/jpeg" {
		p, ok, err := jpegPage(src, r.Dir)
		if err != nil {
			return nil, err
		}
		if ok {
			return []page{p}, nil
		}
	}
	pages := make([]page, 0, n)
	var total int64
	for i := 0; i < n; i++ {
		in := src
		if n > 1 {
			in = fmt.Sprintf("%s[page=%d]", src, i)
		}
		dst := filepath.Join(r.Dir, fmt.Sprintf("page-%05d.png", i+1))
		// colourspace normalises CMYK, 16-bit, LAB and palette images to 8-bit sRGB, which every
		// PDF reader and tesseract understand.
		if err := r.Run(ctx, "vips", []string{"colourspace", in, dst, "srgb"}, nil); err != nil {
			return nil, imageFailure(ct, err)
		}
		cfg, err := decodeConfig(dst)
		if err != nil {
			return nil, fmt.Errorf("read converted page %d: %w", i+1, err)
		}
		// Stop at the page that takes the PDF past its bound, not after converting them all.
		fi, err := os.Stat(dst)
		if err != nil {
			return nil, err
		}
		total += fi.Size()
		if err := checkPDFImages(total, i+1, n); err != nil {
			return nil, err
		}
		pages = append(pages, page{path: dst, width: cfg.Width, height: cfg.Height})
	}
	return pages, nil
}

// jpegPage returns the JPEG at src as a page to embed as it is, or false when libvips must
// re-encode it: when Go does not read its header (gopdf reads it with Go's decoder), when it is
// neither greyscale nor YCbCr (PDF viewers invert Adobe CMYK JPEGs embedded as they are), or
// when it is larger than its pixels justify even cut at its end. A JPEG followed by other data
// beyond that is cut at its EOI marker into a file in dir: the PDF, and gopdf's memory, get the
// image and not what follows it.
func jpegPage(src, dir string) (page, bool, error) {
	f, err := os.Open(src)
	if err != nil {
		return page{}, false, err
	}
	defer f.Close()
	cfg, err := jpeg.DecodeConfig(bufio.NewReader(f))
	if err != nil {
		return page{}, false, nil
	}
	samples := 3
	switch cfg.ColorModel {
	case color.GrayModel:
		samples = 1
	case color.YCbCrModel:
	default:
		return page{}, false, nil
	}
	p := page{path: src, width: cfg.Width, height: cfg.Height}
	fi, err := f.Stat()
	if err != nil {
		return page{}, false, err
	}
	if justified(fi.Size(), p.width, p.height, samples) {
		return p, true, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return page{}, false, err
	}
	n, ok := jpegEnd(bufio.NewReaderSize(f, 64<<10))
	if !ok || !justified(n, p.width, p.height, samples) {
		return page{}, false, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return page{}, false, err
	}
	p.path = filepath.Join(dir, "page-00001.jpg")
	out, err := os.Create(p.path)
	if err != nil {
		return page{}, false, err
	}
	if _, err := io.CopyN(out, f, n); err != nil {
		out.Close()
		return page{}, false, err
	}
	return p, true, out.Close()
}

// justified reports whether an image file of size bytes embedded in a PDF as it is is no
// larger than its w×h pixels of samples bytes each justify: twice their raw size, and 1 MiB
// for metadata (EXIF, ICC profiles). gopdf holds the whole file in memory, and the PDF gets it.
func justified(size int64, w, h, samples int) bool {
	return size <= 2*int64(w)*int64(h)*int64(samples)+1<<20
}

// jpegEnd returns the length of the JPEG at the start of r, up to and with its EOI marker. It
// walks the marker segments and skips each scan's entropy-coded data, which ends at the first
// 0xFF not followed by 0x00 (a stuffed 0xFF) or a restart marker. It reports false when r ends,
// or breaks that syntax, before EOI.
func jpegEnd(r *bufio.Reader) (int64, bool) {
	var n int64
	next := func() (byte, bool) {
		b, err := r.ReadByte()
		if err != nil {
			return 0, false
		}
		n++
		return b, true
	}
	if a, _ := next(); a != 0xFF {
		return 0, false
	}
	if b, _ := next(); b != 0xD8 {
		return 0, false
	}
	marker := false // the 0xFF of the next marker is read already
	for {
		if !marker {
			if b, ok := next(); !ok || b != 0xFF {
				return 0, false
			}
		}
		marker = false
		m, ok := next()
		for ok && m == 0xFF { // fill bytes
			m, ok = next()
		}
		switch {
		case !ok || m == 0x00 || m == 0xD8:
			return 0, false
		case m == 0xD9:
			return n, true
		case m == 0x01 || m >= 0xD0 && m <= 0xD7: // TEM and RSTn have no length
			continue
		}
		hi, ok1 := next()
		lo, ok2 := next()
		length := int(hi)<<8 | int(lo)
		if !ok1 || !ok2 || length < 2 {
			return 0, false
		}
		d, err := r.Discard(length - 2)
		n += int64(d)
		if err != nil {
			return 0, false
		}
		if m != 0xDA { // not SOS
			continue
		}
		for {
			s, err := r.ReadSlice(0xFF)
			n += int64(len(s))
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				return 0, false
			}
			c, err := r.Peek(1)
			if err != nil {
				return 0, false
			}
			if c[0] == 0x00 || c[0] >= 0xD0 && c[0] <= 0xD7 {
				next()
				continue
			}
			if c[0] == 0xFF { // a fill byte; the next ReadSlice returns the 0xFF after it
				continue
			}
			marker = true
			break
		}
	}
}

// imageFailure explains a libvips failure; a missing HEIC decoder gets its own message.
func imageFailure(ct string, err error) error {
	s := converter.Stderr(err)
	if strings.Contains(s, "is not a known file format") || strings.Contains(s, "not a known") {
		if strings.HasPrefix(ct, "image/hei") || ct == "image/avif" {
			return action.Permanentf("unhandled: %s (libvips has no decoder for it: apt-get install libheif1 vips-modules-8.14)", ct)
		}
		return action.Permanentf("read image: libvips does not recognise this %s file", ct)
	}
	return converter.Failure("read image", err)
}

// goPages is the pure-Go fallback: it decodes the image (first page only) and writes it as a
// PNG, or uses a JPEG as it is (jpegPage).
func goPages(src, ct, dir string) ([]page, error) {
	if strings.HasPrefix(ct, "image/hei") || ct == "image/avif" {
		return nil, converter.NotInstalledError("vips")
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Decoding allocates the pixels a header claims (a few bytes can claim gigapixels), and the
	// copy below as many again: refuse what is more than maxPixels first.
	cfg, _, err := image.DecodeConfig(bufio.NewReader(f))
	if err != nil {
		return nil, unreadable(ct)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return nil, action.Permanentf("read image: %d×%d pixels is more than the %d megapixels read without libvips (not installed)", cfg.Width, cfg.Height, maxPixels>>20)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if ct == "image/jpeg" {
		p, ok, err := jpegPage(src, dir)
		if err != nil {
			return nil, err
		}
		if ok {
			return []page{p}, nil
		}
	}
	img, _, err := image.Decode(bufio.NewReader(f))
	if err != nil {
		return nil, unreadable(ct)
	}
	// Re-encode as 8-bit RGBA: gopdf embeds only 8-bit PNGs, and decoders return many layouts.
	rgba := image.NewNRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	dst := filepath.Join(dir, "page-00001.png")
	if err := writePNG(dst, rgba); err != nil {
		return nil, err
	}
	b := img.Bounds()
	return []page{{path: dst, width: b.Dx(), height: b.Dy()}}, nil
}

// unreadable is the error for an image the pure-Go fallback does not decode.
func unreadable(ct string) error {
	return action.Permanentf("read image: this %s file is damaged, or of a kind only libvips reads (not installed)", ct)
}

// writePDF writes one page per image, each page the size of its image at 96 dpi. gopdf holds
// every image in memory until the PDF is written, about twice (its copy of the file, and the
// stream it writes), so the page files may come to at most maxPDFImages bytes. Errors of the
// images are permanent; errors writing the file are not.
func writePDF(path string, pages []page) error {
	var pdf gopdf.GoPdf
	pdf.Start(gopdf.Config{PageSize: *gopdf.PageSizeA4})
	var total int64
	for i, p := range pages {
		fi, err := os.Stat(p.path)
		if err != nil {
			return err
		}
		total += fi.Size()
		if err := checkPDFImages(total, i+1, len(pages)); err != nil {
			return err
		}
		w, h := pageSize(p.width, p.height)
		rect := &gopdf.Rect{W: w, H: h}
		pdf.AddPageWithOption(gopdf.PageOption{PageSize: rect})
		holder, err := gopdf.ImageHolderByPath(p.path)
		if err != nil {
			return err
		}
		if err := pdf.ImageByHolder(holder, 0, 0, rect); err != nil {
			return action.Permanentf("make pdf of image: page %d (%d×%d pixels) is not a JPEG or PNG a PDF can hold", i+1, p.width, p.height)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write pdf of image: %w", err)
	}
	// WriteTo streams the PDF (WritePdf builds it in memory first, and exits the process with
	// log.Fatalf when that fails) but drops the errors of its writes: a bufio.Writer keeps the
	// first, and Flush returns it.
	bw := bufio.NewWriterSize(f, 256<<10)
	if _, err = pdf.WriteTo(bw); err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write pdf of image: %w", err)
	}
	return nil
}

// maxPDFImages bounds the bytes of the image files one PDF holds. gopdf keeps them in memory,
// about twice over, until the PDF is written.
const maxPDFImages = 256 << 20

// checkPDFImages refuses an image whose first n of pages page files come to total bytes, when
// that is more than maxPDFImages.
func checkPDFImages(total int64, n, pages int) error {
	if total <= maxPDFImages {
		return nil
	}
	if pages == 1 {
		return action.Permanentf("make pdf of image: the image is more than the %d MiB one PDF may hold", maxPDFImages>>20)
	}
	return action.Permanentf("make pdf of image: its first %d of %d pages come to more than the %d MiB one PDF may hold", n, pages, maxPDFImages>>20)
}

// pageSize maps pixels to points at 96 dpi, shrunk to fit PDF's 14,400-point page limit.
func pageSize(w, h int) (float64, float64) {
	pw, ph := float64(w)*0.75, float64(h)*0.75
	if m := max(pw, ph); m > 14400 {
		pw, ph = pw*14400/m, ph*14400/m
	}
	return max(pw, 1), max(ph, 1)
}

// thumbnail makes the thumbnail of the first page: JPEG for photographs, PNG otherwise.
func thumbnail(ctx context.Context, r *converter.Runner, src, ct string, first page, useVips bool) ([]byte, string, error) {
	photo := isPhoto(ct)
	if useVips {
		dst := filepath.Join(r.Dir, "thumb.png")
		spec := dst
		if photo {
			dst = filepath.Join(r.Dir, "thumb.jpg")
			spec = dst + "[Q=80,strip]"
		}
		size := fmt.Sprintf("%dx%d>", converter.ThumbnailSize, converter.ThumbnailSize)
		if err := r.Run(ctx, "vipsthumbnail", []string{src, "--size", size, "-o", spec}, nil); err != nil {
			return nil, "", imageFailure(ct, err)
		}
		b, err := os.ReadFile(dst)
		if photo {
			return b, "image/jpeg", err
		}
		return b, "image/png", err
	}
	f, err := os.Open(first.path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	img, _, err := image.Decode(bufio.NewReader(f))
	if err != nil {
		return nil, "", unreadable(ct)
	}
	img = shrink(img, converter.ThumbnailSize)
	var buf bytes.Buffer
	if photo {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80})
		return buf.Bytes(), "image/jpeg", err
	}
	err = png.Encode(&buf, img)
	return buf.Bytes(), "image/png", err
}

// shrink scales img down so its longest side is at most size; smaller images are returned as is.
func shrink(img image.Image, size int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= size && h <= size {
		return img
	}
	if w >= h {
		h, w = max(1, h*size/w), size
	} else {
		w, h = max(1, w*size/h), size
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
	return dst
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func decodeConfig(path string) (image.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return image.Config{}, err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return cfg, errors.New(strings.TrimPrefix(err.Error(), "image: "))
	}
	return cfg, nil
}

// plainPNG reports whether the file at path is a PNG a PDF embeds as it is — 8-bit gray or RGB,
// not interlaced, no transparency, its compressed rows whole — and its size. Such a PNG needs no
// `vips colourspace` (a libvips start, about 40 ms of CPU, and a re-encoding of every pixel):
// gopdf copies its compressed rows into the PDF. So that a damaged PNG never becomes a PDF with a
// broken image (libvips reads what it can and re-encodes that), the rows are inflated and
// counted first: one filter byte each, none unknown, exactly the image's height of them. It reads
// at most plainPNGChunks chunk headers before the first IDAT, and takes no image of more than
// plainPNGMax bytes of rows, nor a file larger than its pixels justify (see justified): libvips
// re-encodes a PNG carrying large chunks or data after its end.
func plainPNG(path string) (w, h int, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var head [33]byte // signature, IHDR's length and type, its 13 bytes, its CRC
	if _, err := io.ReadFull(br, head[:]); err != nil || string(head[:8]) != "\x89PNG\r\n\x1a\n" || string(head[12:16]) != "IHDR" {
		return 0, 0, false
	}
	w, h = int(binary.BigEndian.Uint32(head[16:20])), int(binary.BigEndian.Uint32(head[20:24]))
	depth, colorType, interlace := head[24], head[25], head[28]
	if w <= 0 || h <= 0 || w > 1<<24 || h > 1<<24 || depth != 8 || (colorType != 0 && colorType != 2) || interlace != 0 {
		return 0, 0, false
	}
	stride := w
	if colorType == 2 {
		stride = 3 * w
	}
	if int64(stride+1)*int64(h) > plainPNGMax {
		return 0, 0, false
	}
	if fi, err := f.Stat(); err != nil || !justified(fi.Size(), w, h, stride/w) {
		return 0, 0, false
	}
	for range plainPNGChunks {
		var c [8]byte
		if _, err := io.ReadFull(br, c[:]); err != nil {
			return 0, 0, false
		}
		n := binary.BigEndian.Uint32(c[:4])
		switch string(c[4:]) {
		case "IDAT":
			if !wholeRows(&idatReader{r: br, left: n}, stride, h) {
				return 0, 0, false
			}
			return w, h, true
		case "tRNS", "PLTE", "IEND":
			return 0, 0, false
		}
		if _, err := br.Discard(int(n) + 4); err != nil {
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// wholeRows reports whether r's zlib stream inflates to exactly h rows of a filter byte (0–4)
// and stride bytes.
func wholeRows(r io.Reader, stride, h int) bool {
	z, err := zlib.NewReader(r)
	if err != nil {
		return false
	}
	defer z.Close()
	row := make([]byte, stride+1)
	for range h {
		if _, err := io.ReadFull(z, row); err != nil || row[0] > 4 {
			return false
		}
	}
	n, err := z.Read(row[:1])
	return n == 0 && err == io.EOF
}

// idatReader reads the data of consecutive IDAT chunks, its first chunk's header read already
// (left bytes of data to go): the zlib stream a PNG's rows are in.
type idatReader struct {
	r    *bufio.Reader
	left uint32
}

func (d *idatReader) Read(p []byte) (int, error) {
	for d.left == 0 {
		var c [12]byte // the chunk's CRC, then the next chunk's length and type
		if _, err := io.ReadFull(d.r, c[:]); err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		if string(c[8:]) != "IDAT" {
			return 0, io.EOF
		}
		d.left = binary.BigEndian.Uint32(c[4:8])
	}
	n, err := d.r.Read(p[:min(len(p), int(min(d.left, 1<<30)))])
	d.left -= uint32(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// maxPixels bounds the pixels of an image the pure-Go fallback decodes: 64 megapixels, as many
// as plainPNG inflates. Go's decoders allocate the whole image, and the fallback's 8-bit RGBA
// copy of it as much again: 512 MiB for an 8-bit RGBA image of this size, 768 MiB for a 16-bit one.
const maxPixels = 64 << 20

// plainPNGChunks bounds the chunks plainPNG reads before the first IDAT; plainPNGMax the bytes
// of rows it inflates (a maxPixels RGB image): a larger image goes through libvips.
const (
	plainPNGChunks = 64
	plainPNGMax    = 4 * maxPixels
)
