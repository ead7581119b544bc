package text

import (
	"bytes"
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
	if bd.Dy() != 700 || bd.Dx() > 700 || bd.Dx() < 400 {
		t.Fatalf("thumbnail is %v, want 700 px tall", bd)
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
