package converter_test

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

// TestPDFThumbnail: the thumbnail Sluice encodes from pdftoppm's raw image has exactly the pixels
// of the PNG pdftoppm writes itself, a gray page's as an 8-bit gray image — less than half the
// bytes — and a colour page's in colour, at most a third larger (libpng's filters suit a page of
// coloured text a little better, at five times the CPU).
func TestPDFThumbnail(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdftoppm")
	for name, wantGray := range map[string]bool{"testJournalParser.pdf": true, "testPDF_acroform3.pdf": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := &converter.Runner{Dir: t.TempDir()}
			in, err := r.Stage(convertertest.File(t, name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.PDFThumbnail(t.Context(), in, 1)
			if err != nil {
				t.Fatal(err)
			}
			convertertest.CheckThumbnail(t, got, "image/png")
			prefix := filepath.Join(t.TempDir(), "page")
			cmd := exec.CommandContext(t.Context(), "pdftoppm", "-png", "-f", "1", "-l", "1", "-scale-to", "700", "-singlefile", in, prefix)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("pdftoppm -png: %v: %s", err, out)
			}
			ref, err := os.ReadFile(prefix + ".png")
			if err != nil {
				t.Fatal(err)
			}
			a, b := decode(t, got), decode(t, ref)
			if a.Bounds() != b.Bounds() {
				t.Fatalf("thumbnail is %v, pdftoppm's PNG %v", a.Bounds(), b.Bounds())
			}
			for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
				for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
					r1, g1, b1, _ := a.At(x, y).RGBA()
					r2, g2, b2, _ := b.At(x, y).RGBA()
					if r1 != r2 || g1 != g2 || b1 != b2 {
						t.Fatalf("pixel (%d, %d) differs from pdftoppm's PNG", x, y)
					}
				}
			}
			if _, gray := a.(*image.Gray); gray != wantGray {
				t.Errorf("encoded as %T, want gray %v", a, wantGray)
			}
			if wantGray && len(got)*2 > len(ref) || len(got)*3 > len(ref)*4 {
				t.Errorf("thumbnail %d bytes, pdftoppm's PNG %d", len(got), len(ref))
			}
			t.Logf("%s: %d bytes (pdftoppm's PNG %d)", name, len(got), len(ref))
		})
	}
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return img
}
