package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// The methods below read any object under the store's prefix, not only its blobs: files that
// something else put in the bucket (an ingest sheet's files, which the objects workflow reads
// from an s3://bucket/prefix location). Keys are relative to the prefix.

// ListObjects calls fn with the key (relative to the prefix) and size of every object whose key
// starts with the prefix followed by under, in key order: one ListObjectsV2 request per 1,000
// objects, whatever fn does with them.
func (s *S3) ListObjects(ctx context.Context, under string, fn func(key string, size int64) error) error {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: &s.bucket,
		Prefix: aws.String(s.prefix + under),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return locationError("s3://"+s.bucket+"/"+s.prefix+under, false, err)
		}
		for _, obj := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(obj.Key), s.prefix)
			if !ok || strings.HasSuffix(key, "/") { // a "directory" marker
				continue
			}
			if err := fn(key, aws.ToInt64(obj.Size)); err != nil {
				return err
			}
		}
	}
	return nil
}

// OpenObject opens the object at key (relative to the prefix) for a streamed read, its first
// n bytes only when n > 0. Reading the body fails once ctx is done. Its errors are
// [*LocationError]s; an absent object's wraps [ErrNotFound].
func (s *S3) OpenObject(ctx context.Context, key string, n int64) (io.ReadCloser, error) {
	full := s.prefix + key
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &full}
	if n > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=0-%d", n-1))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isRangeNotSatisfiable(err) { // an empty object has no first byte
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, locationError("s3://"+s.bucket+"/"+full, true, s.mapErr(err))
	}
	return out.Body, nil
}

// URL returns the s3:// URL of the object at key (relative to the prefix).
func (s *S3) URL(key string) string { return "s3://" + s.bucket + "/" + s.prefix + key }

// isRangeNotSatisfiable reports whether err is S3's answer to a range past the object's end.
func isRangeNotSatisfiable(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidRange" {
		return true
	}
	var resp *awshttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == 416
}
