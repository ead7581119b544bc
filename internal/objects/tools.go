package objects

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/metadata"
)

// runner returns a converter runner for the call's task (sandboxed, in its temp dir) and the
// file set's file staged inside it (an S3 object streamed there).
func (c *call) runner(ctx context.Context) (*converter.Runner, string, error) {
	p, err := c.local(ctx, c.md("location"), c.t.TempDir)
	if err != nil {
		return nil, "", err
	}
	r := &converter.Runner{Dir: c.t.TempDir, Heartbeat: c.out.Heartbeat}
	src, err := r.Stage(p)
	return r, src, err
}

// volatileExif are the tags exiftool reports about the file rather than its content: where and
// when it was read. They are dropped so that the metadata is the same however often it is read.
var volatileExif = []string{"SourceFile", "FileName", "Directory", "FileModifyDate", "FileAccessDate",
	"FileInodeChangeDate", "FilePermissions"}

func exif(ctx context.Context, c *call) error {
	r, src, err := c.runner(ctx)
	if err != nil {
		return err
	}
	b, err := r.Output(ctx, "exiftool", 16<<20, "-json", "-n", src)
	if err != nil {
		return converter.Failure("extract exif metadata", err)
	}
	var all []map[string]any
	if err := metadata.Unmarshal(b, &all); err != nil || len(all) == 0 {
		return action.Permanentf("extract exif metadata: exiftool printed no metadata")
	}
	md := all[0]
	for _, k := range volatileExif {
		delete(md, k)
	}
	return c.core("exif", md)
}

func mediaMetadata(ctx context.Context, c *call) error {
	r, src, err := c.runner(ctx)
	if err != nil {
		return err
	}
	b, err := r.Output(ctx, "ffprobe", 16<<20, "-v", "error", "-print_format", "json", "-show_format", "-show_streams", src)
	if err != nil {
		return converter.Failure("extract media metadata", err)
	}
	var info map[string]any
	if err := metadata.Unmarshal(b, &info); err != nil {
		return action.Permanentf("extract media metadata: ffprobe printed no JSON: %v", err)
	}
	if f, ok := info["format"].(map[string]any); ok {
		delete(f, "filename") // the staged copy's path
	}
	return c.core("mediainfo", info)
}

func pyramidTIFF(ctx context.Context, c *call) error {
	r, src, err := c.runner(ctx)
	if err != nil {
		return err
	}
	dst := filepath.Join(r.Dir, "pyramid.tif")
	if err := r.Run(ctx, "vips", []string{"tiffsave", src, dst, "--tile", "--pyramid", "--compression", "jpeg", "--Q", "90",
		"--tile-width", "256", "--tile-height", "256"}, nil); err != nil {
		return converter.Failure("create pyramid tiff", err)
	}
	// The tool's own output, in the task's directory: not a file set's file, so not read inside
	// the files directory as putFile reads those.
	pyr, err := os.Open(dst)
	if err != nil {
		return fmt.Errorf("read pyramid tiff: %w", err)
	}
	sum, size, err := c.blobs.Put(ctx, pyr)
	pyr.Close()
	if err != nil {
		return err
	}
	thumb := filepath.Join(r.Dir, "thumbnail.jpg")
	if err := r.Run(ctx, "vipsthumbnail", []string{src, "--size", "300x300", "-o", thumb + "[Q=85,strip]"}, nil); err != nil {
		return converter.Failure("create thumbnail", err)
	}
	f, err := os.Open(thumb)
	if err != nil {
		return fmt.Errorf("read thumbnail: %w", err)
	}
	defer f.Close()
	if err := c.out.SetThumbnail(ctx, f, "image/jpeg"); err != nil {
		return err
	}
	c.notes = "sha256:" + sum
	if err := c.blob("pyramid_tiff", sum); err != nil {
		return err
	}
	return c.derivative("pyramid_tiff", map[string]any{"sha256": sum, "size": size})
}
