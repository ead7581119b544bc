package watch

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
)

// doneUnder is where move-done puts an S3 prefix's taken objects, under the prefix.
const doneUnder = "done/"

// bucket is a watched S3 prefix, listed after its stored cursor.
type bucket struct {
	s3       *blob.S3
	location string
	db       DomainDB
	moveDone bool
	tagDone  bool
	now      func() time.Time
}

// list lists the keys after the cursor (every key when full), page by page.
func (b *bucket) list(ctx context.Context, full bool) ([]file, error) {
	after := ""
	if !full {
		var err error
		if after, err = readCursor(ctx, b.db, b.location); err != nil {
			return nil, err
		}
	}
	var out []file
	for {
		objs, more, err := b.s3.ListObjectsAfter(ctx, "", after, 1000)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if b.moveDone && strings.HasPrefix(o.Key, doneUnder) {
				continue
			}
			out = append(out, file{path: o.Key, size: o.Size, version: o.ETag})
		}
		if !more || len(objs) == 0 {
			return out, nil
		}
		after = objs[len(objs)-1].Key
	}
}

func (b *bucket) open(ctx context.Context, f file) (io.ReadCloser, error) {
	return b.s3.OpenObject(ctx, f.path, 0)
}

// finish tags the object, then moves it: a copy keeps the tags.
func (b *bucket) finish(ctx context.Context, f file, jobID int64) error {
	if b.tagDone {
		if err := b.s3.TagObject(ctx, f.path, map[string]string{"sluice-job": strconv.FormatInt(jobID, 10)}); err != nil {
			return err
		}
	}
	if b.moveDone {
		return b.s3.MoveObject(ctx, f.path, doneUnder+f.path)
	}
	return nil
}

func (b *bucket) passed(ctx context.Context, path string) error {
	return writeCursor(ctx, b.db, b.location, path, b.now())
}

func (b *bucket) metadata(f file) map[string]any {
	return map[string]any{"source_etag": f.version}
}
