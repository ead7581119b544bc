package converter

import (
	"bytes"
	"context"
	"strconv"
	"sync"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/pngenc"
)

// ThumbnailSize is the longest side of every thumbnail, in pixels.
const ThumbnailSize = 700

// PDFThumbnail renders page (1-based) of the PDF at pdfPath as a PNG whose longest side is
// [ThumbnailSize]: pdftoppm renders the page to its stdout as a raw image (at most
// [ThumbnailSize] pixels a side, so a bounded read), which [pngenc] encodes — 8-bit gray for a
// gray page — at a tenth of the CPU libpng took for it inside pdftoppm.
func (r *Runner) PDFThumbnail(ctx context.Context, pdfPath string, page int) ([]byte, error) {
	s := ThumbnailStep(pdfPath, page)
	buf := pnmBuffers.Get().(*bytes.Buffer)
	defer pnmBuffers.Put(buf)
	buf.Reset()
	if err := r.OutputTo(ctx, buf, s.Tool, s.MaxStdout, s.Args...); err != nil {
		return nil, Failure("render pdf thumbnail", err)
	}
	return EncodeThumbnail(buf.Bytes())
}

// ThumbnailStep is the step of [Runner.RunSteps] that renders page (1-based) of the PDF at
// pdfPath for a thumbnail, as [Runner.PDFThumbnail] does: its stdout is for [EncodeThumbnail].
func ThumbnailStep(pdfPath string, page int) Step {
	p := strconv.Itoa(page)
	return Step{Tool: "pdftoppm", Args: []string{"-f", p, "-l", p, "-scale-to", strconv.Itoa(ThumbnailSize), "-singlefile", pdfPath},
		MaxStdout: thumbnailPNMMax}
}

// EncodeThumbnail encodes the raw image pdftoppm wrote for a thumbnail (no option but
// -scale-to [ThumbnailSize]) as a PNG, with [pngenc].
func EncodeThumbnail(raw []byte) ([]byte, error) {
	png, err := pngenc.EncodePNM(raw, ThumbnailSize)
	if err != nil {
		return nil, action.Permanentf("render pdf thumbnail: pdftoppm wrote a %v", err)
	}
	return png, nil
}

// ReadThumbnailFile reads a raw image pdftoppm wrote for a thumbnail, refusing one larger than a
// thumbnail's can be.
func ReadThumbnailFile(path string) ([]byte, error) {
	return readAtMost(path, "pdftoppm", thumbnailPNMMax)
}

// thumbnailPNMMax bounds what pdftoppm may write for one thumbnail: an RGB image of
// [ThumbnailSize] pixels a side and its header.
const thumbnailPNMMax = 3*ThumbnailSize*ThumbnailSize + 64

// pnmBuffers recycles the buffers pdftoppm's raw images are read into (1.5 MB each): growing one
// per thumbnail made the collector run far more often.
var pnmBuffers = sync.Pool{New: func() any {
	b := new(bytes.Buffer)
	b.Grow(thumbnailPNMMax)
	return b
}}

// AddedMetadata returns md without the keys the item's metadata already has, so an action adds
// keys but never overwrites a user's.
func AddedMetadata(item action.Item, md map[string]any) map[string]any {
	out := make(map[string]any, len(md))
	for k, v := range md {
		if _, ok := item.Metadata[k]; !ok {
			out[k] = v
		}
	}
	return out
}
