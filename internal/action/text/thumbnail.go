package text

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// thumbHeight is the thumbnail's longest side (the spec's 700 px).
const thumbHeight = 700

// thumbFonts holds the parsed monospace font for thumbnails and a pool of faces (a face is not
// safe for concurrent use; parsing is done once).
type thumbFonts struct {
	once  sync.Once
	err   error
	font  *opentype.Font
	faces sync.Pool
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
	lines := r.layout(text)
	for j := 0; j < min(len(lines), linesPerPage); j++ {
		y := (margin + float64(j)*lineHeight + fontSize) * scale
		for _, c := range lines[j] {
			if c.r == ' ' || c.face != 0 {
				continue
			}
			dot := fixed.Point26_6{X: fixed.Int26_6((margin + float64(c.col)*r.charW) * scale * 64), Y: fixed.Int26_6(y * 64)}
			drawGlyph(img, face, dot, c.r)
		}
	}
	// Four grays from the ink to white: a 2-bit PNG, a quarter of the 8-bit one's bytes (10 KB
	// against 40 KB for a page of text), which at thumbnail size still draws antialiased glyphs.
	pi := thumbPaletted.Get().(*image.Paletted)
	defer thumbPaletted.Put(pi)
	for i, v := range img.Pix {
		pi.Pix[i] = grayLevel[v]
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngBuffers}
	if err := enc.Encode(&buf, pi); err != nil {
		return nil, fmt.Errorf("thumbnail: %w", err)
	}
	return buf.Bytes(), nil
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
	thumbPaletted = sync.Pool{New: func() any { return image.NewPaletted(image.Rect(0, 0, thumbWidth, thumbHeight), thumbPalette) }}
)

// drawGlyph draws rune r at dot in ink over img. A glyph mask of the usual kind (*image.Alpha)
// is blended here, byte by byte: image/draw has no fast path for a gray destination, and its
// general one (per pixel, through color interfaces) took most of a text document's CPU.
func drawGlyph(img *image.Gray, face font.Face, dot fixed.Point26_6, r rune) {
	dr, mask, mp, _, ok := face.Glyph(dot, r)
	if !ok {
		return
	}
	a, isAlpha := mask.(*image.Alpha)
	if !isAlpha {
		draw.DrawMask(img, dr, image.NewUniform(color.Gray{Y: ink}), image.Point{}, mask, mp, draw.Over)
		return
	}
	clip := dr.Intersect(img.Bounds())
	for y := clip.Min.Y; y < clip.Max.Y; y++ {
		mrow := a.Pix[a.PixOffset(mp.X+clip.Min.X-dr.Min.X, mp.Y+y-dr.Min.Y):]
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

// thumbCanvases recycles thumbnail canvases (350 KB each): allocating one per document made the
// collector run far more often. thumbWidth is the page's width at the thumbnail's scale.
var (
	thumbWidth    = int(math.Round(pageW * thumbHeight / pageH))
	thumbCanvases = sync.Pool{New: func() any { return image.NewGray(image.Rect(0, 0, thumbWidth, thumbHeight)) }}
)

// pngBuffers lets the PNG encoder reuse its buffers and compressor between thumbnails.
var pngBuffers pngPool

type pngPool struct{ p sync.Pool }

func (p *pngPool) Get() *png.EncoderBuffer {
	b, _ := p.p.Get().(*png.EncoderBuffer)
	return b
}

func (p *pngPool) Put(b *png.EncoderBuffer) { p.p.Put(b) }
