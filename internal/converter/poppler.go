package converter

import (
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sluice-project/sluice/internal/action"
)

// ThumbnailSize is the longest side of every thumbnail, in pixels.
const ThumbnailSize = 700

// PDFThumbnail renders page (1-based) of the PDF at pdfPath as a PNG whose longest side is
// [ThumbnailSize], using pdftoppm. It writes a scratch file in r.Dir.
func (r *Runner) PDFThumbnail(ctx context.Context, pdfPath string, page int) ([]byte, error) {
	dir, err := os.MkdirTemp(r.Dir, "thumb-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	prefix := filepath.Join(dir, "page")
	p := strconv.Itoa(page)
	args := []string{"-png", "-f", p, "-l", p, "-scale-to", strconv.Itoa(ThumbnailSize), "-singlefile", pdfPath, prefix}
	if err := r.Run(ctx, "pdftoppm", args, nil); err != nil {
		return nil, Failure("render pdf thumbnail", err)
	}
	return os.ReadFile(prefix + ".png")
}

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
