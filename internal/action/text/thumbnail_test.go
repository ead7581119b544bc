package text

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"

	"golang.org/x/image/font"
	"golang.org/x/image/math/fixed"
)

func TestThumbnailInGo(t *testing.T) {
	t.Parallel()
	r := &Renderer{}
	if err := r.load(); err != nil {
		t.Skip("no fonts: ", err)
	}
	b, err := r.Thumbnail(strings.Repeat("The quick brown fox jumps over the lazy dog.\n", 80))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	bd := img.Bounds()
	if bd.Dy() != thumbHeight || bd.Dx() != thumbWidth || thumbWidth != 297 {
		t.Fatalf("thumbnail is %v, want %d×%d (A4 at %d px tall)", bd, 297, thumbHeight, thumbHeight)
	}
	// Some pixels are ink: the text was drawn.
	dark := 0
	for y := 0; y < bd.Dy(); y += 2 {
		for x := 0; x < bd.Dx(); x += 2 {
			if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
				dark++
			}
		}
	}
	if dark < 100 {
		t.Fatalf("only %d dark pixels: no text drawn", dark)
	}
}

func BenchmarkThumbnail(b *testing.B) {
	r := &Renderer{}
	text := strings.Repeat("tiny entry 19999\n", 3)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Thumbnail(text); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEncodeThumbMatchesImagePNG: the thumbnail's own 2-bit PNG encoding decodes to the same
// palette and the same pixels as image/png's encoding of the same page mapped to the palette,
// for widths that do and do not fill their last byte.
func TestEncodeThumbMatchesImagePNG(t *testing.T) {
	t.Parallel()
	for _, w := range []int{495, 496, 497, 498, 1} {
		img := image.NewGray(image.Rect(0, 0, w, 30))
		for i := range img.Pix {
			img.Pix[i] = 0xff
		}
		for i := 0; i < len(img.Pix); i += 7 {
			img.Pix[i] = uint8(i * 31) // every gray level, spread over the rows, white rows between
			if i/w%3 == 2 {
				img.Pix[i] = 0xff
			}
		}
		got, err := encodeThumb(img)
		if err != nil {
			t.Fatal(err)
		}
		pi := image.NewPaletted(img.Rect, thumbPalette)
		for i, v := range img.Pix {
			pi.Pix[i] = grayLevel[v]
		}
		var want bytes.Buffer
		if err := png.Encode(&want, pi); err != nil {
			t.Fatal(err)
		}
		a, err := png.Decode(bytes.NewReader(got))
		if err != nil {
			t.Fatalf("width %d: %v", w, err)
		}
		b, _ := png.Decode(bytes.NewReader(want.Bytes()))
		ap, ok := a.(*image.Paletted)
		if !ok {
			t.Fatalf("width %d: decoded %T, want a paletted image", w, a)
		}
		bp := b.(*image.Paletted)
		if ap.Rect != bp.Rect || !bytes.Equal(ap.Pix, bp.Pix) || len(ap.Palette) != len(bp.Palette) {
			t.Fatalf("width %d: pixels or palette differ from image/png's", w)
		}
		for i := range ap.Palette {
			if ap.Palette[i] != bp.Palette[i] {
				t.Errorf("width %d: palette %d = %v, want %v", w, i, ap.Palette[i], bp.Palette[i])
			}
		}
	}
}

// BenchmarkThumbnailPage: a thumbnail of 1 KB of prose in lines of about 70 characters, the
// size of sluice-bench ingest --size 1024's files.
func BenchmarkThumbnailPage(b *testing.B) {
	r := &Renderer{}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog, said the report.\n", 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Thumbnail(text); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGlyphCache: a glyph drawn from the cache has the pixels of the same glyph rasterised where
// it is drawn (a mask made at a fraction of a pixel, moved by whole pixels), for every quarter
// pixel and several runes, and a second document draws the same as the first.
func TestGlyphCache(t *testing.T) {
	t.Parallel()
	r := &Renderer{}
	if err := r.load(); err != nil {
		t.Skip("no fonts: ", err)
	}
	text := "Quick brown fox, 0123456789 — éàç ß {}[]|\\@#\n"
	first, err := r.Thumbnail(text)
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.Thumbnail(text)
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("the second thumbnail of the same text differs (err %v)", err)
	}
	face, _ := r.thumb.faces.Get().(font.Face)
	if face == nil {
		t.Fatal("no pooled face after a thumbnail")
	}
	defer r.thumb.faces.Put(face)
	for _, c := range "Qgj@|é0" {
		for q := range 16 {
			dot := fixed.Point26_6{X: fixed.I(20) + fixed.Int26_6(q%4*16), Y: fixed.I(30) + fixed.Int26_6(q/4*16)}
			got := image.NewGray(image.Rect(0, 0, 60, 60))
			want := image.NewGray(got.Rect)
			for i := range got.Pix {
				got.Pix[i], want.Pix[i] = 0xff, 0xff
			}
			r.thumb.glyphs.draw(got, face, dot, c)
			dr, mask, mp, _, ok := face.Glyph(dot, c)
			if !ok {
				t.Fatalf("%q: no glyph", c)
			}
			a := mask.(*image.Alpha)
			for y := dr.Min.Y; y < dr.Max.Y; y++ {
				for x := dr.Min.X; x < dr.Max.X; x++ {
					m := uint32(a.AlphaAt(mp.X+x-dr.Min.X, mp.Y+y-dr.Min.Y).A)
					want.Pix[want.PixOffset(x, y)] = uint8((0xff*(255-m) + ink*m + 127) / 255)
				}
			}
			if !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("%q at %v: the cached glyph's pixels differ from the glyph rasterised there", c, dot)
			}
		}
	}
}
