package text

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/klauspost/compress/zlib"
	"image"
	"image/color"
	"image/draw"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"

	"github.com/sluice-project/sluice/internal/pngenc"
)

// thumbHeight is the thumbnail's longest side: the height the web UI's document grid shows a
// page at, at twice the pixel density, in its narrowest card (10rem wide, a 3:4 box: 213 CSS
// pixels of an A4 page's height). A larger one is never seen whole: 700 px (the PDF thumbnails'
// size) made 5.9 KB for a page of 1 KB of text, 420 px makes 2.2 KB.
const thumbHeight = 420

// thumbFonts holds the parsed monospace font for thumbnails and a pool of faces (a face is not
// safe for concurrent use; parsing is done once).
type thumbFonts struct {
	once   sync.Once
	err    error
	font   *opentype.Font
	faces  sync.Pool
	glyphs glyphCache
}

// Thumbnail draws page 1 of the text's layout as a PNG in Go — the same lines, columns and
// margins as [Renderer.Render]'s PDF — so a text document gets its thumbnail in about a
// millisecond instead of a pdftoppm subprocess. Characters the monospace font lacks are left blank.
func (r *Renderer) Thumbnail(text string) ([]byte, error) {
	if err := r.load(); err != nil {
		return nil, err
	}
	tf := &r.thumb
	tf.once.Do(func() {
		for _, path := range r.fontList() {
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			f, err := opentype.Parse(b)
			if err != nil {
				continue
			}
			tf.font = f
			return
		}
		tf.err = fmt.Errorf("thumbnail: no usable font")
	})
	if tf.err != nil {
		return nil, tf.err
	}
	scale := float64(thumbHeight) / pageH
	face, _ := tf.faces.Get().(font.Face)
	if face == nil {
		var err error
		face, err = opentype.NewFace(tf.font, &opentype.FaceOptions{Size: fontSize * scale, DPI: 72, Hinting: font.HintingNone})
		if err != nil {
			return nil, fmt.Errorf("thumbnail: %w", err)
		}
	}
	defer tf.faces.Put(face)
	img := thumbCanvases.Get().(*image.Gray)
	defer thumbCanvases.Put(img)
	// White, every pixel (the canvas is reused): one byte, then doubling copies.
	img.Pix[0] = 0xff
	for n := 1; n < len(img.Pix); n *= 2 {
		copy(img.Pix[n:], img.Pix[:n])
	}
	lines := r.layout(text, linesPerPage)
	for j := 0; j < min(len(lines), linesPerPage); j++ {
		y := (margin + float64(j)*lineHeight + fontSize) * scale
		for _, c := range lines[j] {
			if c.r == ' ' || c.face != 0 {
				continue
			}
			dot := fixed.Point26_6{X: fixed.Int26_6((margin + float64(c.col)*r.charW) * scale * 64), Y: fixed.Int26_6(y * 64)}
			tf.glyphs.draw(img, face, dot, c.r)
		}
	}
	return encodeThumb(img)
}

// ink is the gray of the thumbnail's text.
const ink = 0x20

// thumbPalette holds the thumbnail's four grays, from ink to white; grayLevel maps an 8-bit gray
// to the nearest of them.
var (
	thumbPalette = color.Palette{color.Gray{ink}, color.Gray{ink + (0xff-ink)/3}, color.Gray{ink + 2*(0xff-ink)/3}, color.Gray{0xff}}
	grayLevel    = func() (m [256]uint8) {
		for v := range m {
			m[v] = uint8(thumbPalette.Index(color.Gray{uint8(v)}))
		}
		return m
	}()
)

// draw draws rune r at dot in ink over img, dot rounded to a quarter of a pixel, from the
// cache (face must be of the cache's font and size). A glyph mask of the usual kind (*image.Alpha) is blended here, byte by byte:
// image/draw has no fast path for a gray destination, and its general one (per pixel, through
// color interfaces) took most of a text document's CPU.
func (c *glyphCache) draw(img *image.Gray, face font.Face, dot fixed.Point26_6, r rune) {
	// A quarter of a pixel is 16 in 26.6 fixed point.
	dot.X, dot.Y = (dot.X+8)&^15, (dot.Y+8)&^15
	g := c.glyph(face, glyphKey{r: r, x: uint8(dot.X & 63), y: uint8(dot.Y & 63)})
	if g.mask == nil {
		return
	}
	dr := g.mask.Rect.Add(g.off).Add(image.Pt(dot.X.Floor(), dot.Y.Floor()))
	clip := dr.Intersect(img.Bounds())
	for y := clip.Min.Y; y < clip.Max.Y; y++ {
		mrow := g.mask.Pix[g.mask.PixOffset(clip.Min.X-dr.Min.X, y-dr.Min.Y):]
		drow := img.Pix[img.PixOffset(clip.Min.X, y):]
		for x := 0; x < clip.Dx(); x++ {
			m := uint32(mrow[x])
			if m == 0 {
				continue
			}
			// Over with an opaque source: d' = d·(1−m) + ink·m, rounded.
			drow[x] = uint8((uint32(drow[x])*(255-m) + ink*m + 127) / 255)
		}
	}
}

// The glyph cache. A page of text draws a thousand glyphs of a few dozen runes, and
// rasterising each one (opentype's Face.Glyph) was half of a text document's CPU. Glyphs are
// drawn at a quarter of a pixel's precision, so a rune has at most 16 masks; a renderer's faces
// all have its font at one size, so its masks are shared by all of them. The cache stops growing
// at glyphCacheMax masks (a text of many scripts draws the rest uncached).
type glyphKey struct {
	r    rune
	x, y uint8 // the dot's fraction of a pixel, in 64ths (multiples of 16)
}

type glyphMask struct {
	off  image.Point  // where the mask's origin goes, from the dot's whole pixel
	mask *image.Alpha // nil: the rune draws nothing
}

const glyphCacheMax = 16384

// glyphCache holds one renderer's glyph masks; the zero value is ready and safe for concurrent
// use.
type glyphCache struct {
	masks sync.Map // glyphKey → glyphMask
	n     atomic.Int32
}

// glyph returns the mask of k's rune drawn at k's fraction of a pixel.
func (c *glyphCache) glyph(face font.Face, k glyphKey) glyphMask {
	if g, ok := c.masks.Load(k); ok {
		return g.(glyphMask)
	}
	var g glyphMask
	dr, mask, mp, _, ok := face.Glyph(fixed.Point26_6{X: fixed.Int26_6(k.x), Y: fixed.Int26_6(k.y)}, k.r)
	if ok && !dr.Empty() {
		// A copy: the face reuses its mask for the next glyph.
		a := image.NewAlpha(image.Rect(0, 0, dr.Dx(), dr.Dy()))
		draw.Draw(a, a.Rect, mask, mp, draw.Src)
		g = glyphMask{off: dr.Min, mask: a}
	}
	if c.n.Load() < glyphCacheMax {
		if _, loaded := c.masks.LoadOrStore(k, g); !loaded {
			c.n.Add(1)
		}
	}
	return g
}

// thumbCanvases recycles thumbnail canvases (350 KB each): allocating one per document made the
// collector run far more often. thumbWidth is the page's width at the thumbnail's scale.
var (
	thumbWidth    = int(math.Round(pageW * thumbHeight / pageH))
	thumbCanvases = sync.Pool{New: func() any { return image.NewGray(image.Rect(0, 0, thumbWidth, thumbHeight)) }}
)

// encodeThumb writes img as a 2-bit paletted PNG of thumbPalette's four grays, from the ink to
// white: a quarter of the 8-bit one's bytes (10 KB against 40 KB for a page of text), which at
// thumbnail size still draws antialiased glyphs. It packs the rows itself: image/png reads a
// paletted image of less than 8 bits pixel by pixel through ColorIndexAt, which took about a
// third of a small text document's CPU. Like image/png for a paletted image, it filters no row
// (the Up filter made a page of text a third larger). It deflates at the default level: 2.16 KB
// for a page of 1 KB of text against 2.44 KB at the fastest, for about 0.2 ms more a document.
func encodeThumb(img *image.Gray) ([]byte, error) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	rowLen := 1 + (2*w+7)/8
	e := thumbEncoders.Get().(*thumbEncoder)
	defer thumbEncoders.Put(e)
	raw := e.raw[:0]
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+w]
		raw = append(raw, 0) // filter: none
		if white := e.white(w); bytes.Equal(row, white) {
			raw = append(raw, e.whiteRow...)
			continue
		}
		var b byte
		for x, v := range row {
			b = b<<2 | grayLevel[v]
			if x&3 == 3 {
				raw = append(raw, b)
				b = 0
			}
		}
		if r := w & 3; r != 0 {
			raw = append(raw, b<<(2*(4-r)))
		}
	}
	e.raw = raw
	if len(raw) != rowLen*h {
		return nil, fmt.Errorf("thumbnail: packed %d bytes, want %d", len(raw), rowLen*h)
	}
	e.idat.Reset()
	e.z.Reset(&e.idat)
	if _, err := e.z.Write(raw); err != nil {
		return nil, fmt.Errorf("thumbnail: %w", err)
	}
	if err := e.z.Close(); err != nil {
		return nil, fmt.Errorf("thumbnail: %w", err)
	}
	var out bytes.Buffer
	out.Grow(e.idat.Len() + 100)
	out.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 2, 3 // bit depth 2, colour type 3 (paletted); compression, filter, interlace 0
	pngenc.WriteChunk(&out, "IHDR", ihdr[:])
	var plte []byte
	for _, c := range thumbPalette {
		g := c.(color.Gray).Y
		plte = append(plte, g, g, g)
	}
	pngenc.WriteChunk(&out, "PLTE", plte)
	pngenc.WriteChunk(&out, "IDAT", e.idat.Bytes())
	pngenc.WriteChunk(&out, "IEND", nil)
	return out.Bytes(), nil
}

// thumbEncoder is encodeThumb's reusable state: the packed rows, the compressor and its output.
type thumbEncoder struct {
	raw      []byte
	idat     bytes.Buffer
	z        *zlib.Writer
	whiteW   int
	whiteIn  []byte // a row of white gray pixels, whiteW wide
	whiteRow []byte // the same row packed
}

// white returns a row of w white gray pixels, making it and its packed form on first use.
func (e *thumbEncoder) white(w int) []byte {
	if e.whiteW != w || e.whiteIn == nil {
		e.whiteW = w
		e.whiteIn = bytes.Repeat([]byte{0xff}, w)
		e.whiteRow = nil
		var b byte
		for x := range w {
			b = b<<2 | grayLevel[0xff]
			if x&3 == 3 {
				e.whiteRow = append(e.whiteRow, b)
				b = 0
			}
		}
		if r := w & 3; r != 0 {
			e.whiteRow = append(e.whiteRow, b<<(2*(4-r)))
		}
	}
	return e.whiteIn
}

var thumbEncoders = sync.Pool{New: func() any {
	z, _ := zlib.NewWriterLevel(io.Discard, zlib.DefaultCompression)
	return &thumbEncoder{z: z}
}}
