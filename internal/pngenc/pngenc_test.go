package pngenc

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"testing"
)

// pnm returns a binary PPM (ch 3) or PGM (ch 1) of w×h pixels whose samples px gives.
func pnm(w, h, ch int, px func(x, y, c int) byte) []byte {
	magic := "P6"
	if ch == 1 {
		magic = "P5"
	}
	b := fmt.Appendf(nil, "%s\n%d %d\n255\n", magic, w, h)
	for y := range h {
		for x := range w {
			for c := range ch {
				b = append(b, px(x, y, c))
			}
		}
	}
	return b
}

// samePixels fails unless png decodes to the image pnm holds, pixel for pixel.
func samePixels(t *testing.T, pnmData, pngData []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	w, h, ch, pix, err := parsePNM(pnmData, 1<<14)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("PNG is %v, want %d×%d", b, w, h)
	}
	for y := range h {
		for x := range w {
			r, g, b, _ := img.At(x, y).RGBA()
			p := pix[(y*w+x)*ch:]
			want := [3]byte{p[0], p[0], p[0]}
			if ch == 3 {
				want = [3]byte{p[0], p[1], p[2]}
			}
			if got := [3]byte{byte(r >> 8), byte(g >> 8), byte(b >> 8)}; got != want {
				t.Fatalf("pixel (%d, %d) = %v, want %v", x, y, got, want)
			}
		}
	}
	return img
}

func TestEncodeColor(t *testing.T) {
	in := pnm(120, 90, 3, func(x, y, c int) byte { return byte(x*(c+1) + y) })
	out, err := EncodePNM(in, 700)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := samePixels(t, in, out).(*image.RGBA); !ok {
		t.Error("a colour image was not encoded as RGB")
	}
}

// A gray page read as RGB (pdftoppm's output for a page of text) becomes an 8-bit gray PNG, a
// third of the samples.
func TestEncodeGray(t *testing.T) {
	in := pnm(200, 300, 3, func(x, y, c int) byte {
		if (x/7+y/11)%5 == 0 {
			return byte(x)
		}
		return 0xff
	})
	out, err := EncodePNM(in, 700)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := samePixels(t, in, out).(*image.Gray); !ok {
		t.Error("a gray image was not encoded as gray")
	}
	pgm := pnm(200, 300, 1, func(x, y, _ int) byte { return byte(x ^ y) })
	out, err = EncodePNM(pgm, 700)
	if err != nil {
		t.Fatal(err)
	}
	samePixels(t, pgm, out)
}

// A photograph-like image, which DEFLATE alone leaves large, gets filtered rows, and is smaller
// for it than unfiltered.
func TestEncodeFiltersPhotographs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	in := pnm(300, 200, 3, func(x, y, c int) byte { return byte(x+2*y+c*40) + byte(rng.IntN(6)) })
	out, err := EncodePNM(in, 700)
	if err != nil {
		t.Fatal(err)
	}
	samePixels(t, in, out)
	w, h, ch, pix, _ := parsePNM(in, 700)
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	plain, err := e.deflate(w, h, ch, ch, pix, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) >= len(plain) {
		t.Errorf("the PNG is %d bytes, its rows unfiltered %d: the filters were not used", len(out), len(plain))
	}
}

func TestEncodeMalformed(t *testing.T) {
	ok := pnm(4, 3, 3, func(x, y, c int) byte { return 1 })
	for name, in := range map[string][]byte{
		"empty":          nil,
		"ascii ppm":      []byte("P3\n1 1\n255\n0 0 0\n"),
		"not an image":   []byte("%PDF-1.4"),
		"too wide":       pnm(701, 1, 3, func(x, y, c int) byte { return 0 }),
		"16-bit samples": []byte("P6\n1 1\n65535\n\x00\x00\x00\x00\x00\x00"),
		"short":          ok[:len(ok)-1],
		"trailing bytes": append(bytes.Clone(ok), 0),
		"zero width":     []byte("P6\n0 1\n255\n"),
		"huge number":    []byte("P6\n99999999999 1\n255\n"),
		"no pixels":      []byte("P6\n1 1\n255"),
	} {
		if _, err := EncodePNM(in, 700); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	// Comments and any whitespace are allowed in the header.
	in := []byte("P5 # gray\n2\t1 # size\r\n255\n\x00\xff")
	out, err := EncodePNM(in, 700)
	if err != nil {
		t.Fatal(err)
	}
	img := samePixels(t, in, out)
	if img.At(1, 0) != (color.Gray{Y: 0xff}) {
		t.Errorf("pixel (1, 0) = %v", img.At(1, 0))
	}
}

func FuzzEncodePNM(f *testing.F) {
	f.Add(pnm(3, 2, 3, func(x, y, c int) byte { return byte(x + y + c) }))
	f.Add([]byte("P5 # c\n2 1\n255\n\x00\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := EncodePNM(in, 64)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		samePixels(t, in, out)
	})
}
