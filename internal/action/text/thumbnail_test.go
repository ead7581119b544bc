package text

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"
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
