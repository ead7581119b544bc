package text

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
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
	img := image.NewGray(image.Rect(0, 0, int(pageW*scale+0.5), thumbHeight))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.Gray{Y: 0x20}), Face: face}
	lines := r.layout(text)
	for j := 0; j < min(len(lines), linesPerPage); j++ {
		y := (margin + float64(j)*lineHeight + fontSize) * scale
		for _, c := range lines[j] {
			if c.r == ' ' || c.face != 0 {
				continue
			}
			d.Dot = fixed.Point26_6{X: fixed.Int26_6((margin + float64(c.col)*r.charW) * scale * 64), Y: fixed.Int26_6(y * 64)}
			d.DrawString(string(c.r))
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("thumbnail: %w", err)
	}
	return buf.Bytes(), nil
}
