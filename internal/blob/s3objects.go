package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
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

// ObjectInfo is one object as a listing shows it: its key relative to the store's prefix, its
// size and its ETag (quotes removed), which changes when the object is replaced.
type ObjectInfo struct {
	Key  string
	Size int64
	ETag string
}

// ListObjectsAfter returns up to limit objects (1,000 when limit is 0) whose key starts with
// the prefix followed by under and sorts after startAfter (relative to the prefix; "" for the
// first), in key order, with one ListObjectsV2 request, and whether more follow. Directory
// markers (keys ending in "/") are left out.
func (s *S3) ListObjectsAfter(ctx context.Context, under, startAfter string, limit int) ([]ObjectInfo, bool, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix + under), MaxKeys: aws.Int32(int32(limit))}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	out, err := s.client.ListObjectsV2(ctx, in)
	if err != nil {
		return nil, false, locationError("s3://"+s.bucket+"/"+s.prefix+under, false, err)
	}
	var objs []ObjectInfo
	for _, obj := range out.Contents {
		key, ok := strings.CutPrefix(aws.ToString(obj.Key), s.prefix)
		if !ok || strings.HasSuffix(key, "/") {
			continue
		}
		objs = append(objs, ObjectInfo{Key: key, Size: aws.ToInt64(obj.Size), ETag: strings.Trim(aws.ToString(obj.ETag), `"`)})
	}
	return objs, aws.ToBool(out.IsTruncated), nil
}

// TagObject sets the tags of the object at key (relative to the prefix), replacing its others.
func (s *S3) TagObject(ctx context.Context, key string, tags map[string]string) error {
	full := s.prefix + key
	var set []types.Tag
	for k, v := range tags {
		set = append(set, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	if _, err := s.client.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: &s.bucket, Key: &full,
		Tagging: &types.Tagging{TagSet: set}}); err != nil {
		return locationError("s3://"+s.bucket+"/"+full, true, s.mapErr(err))
	}
	return nil
}

// ObjectTags returns the tags of the object at key (relative to the prefix).
func (s *S3) ObjectTags(ctx context.Context, key string) (map[string]string, error) {
	full := s.prefix + key
	out, err := s.client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: &s.bucket, Key: &full})
	if err != nil {
		return nil, locationError("s3://"+s.bucket+"/"+full, true, s.mapErr(err))
	}
	tags := map[string]string{}
	for _, t := range out.TagSet {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return tags, nil
}

// MoveObject moves the object at key to the key to (both relative to the prefix): a
// server-side copy, then a delete of the original. An original already gone is not an error
// when the copy exists (a move that was interrupted, or made by another process).
func (s *S3) MoveObject(ctx context.Context, key, to string) error {
	from, dst := s.prefix+key, s.prefix+to
	src := (&url.URL{Path: s.bucket + "/" + from}).EscapedPath()
	if _, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: &dst, CopySource: &src}); err != nil {
		err = s.mapErr(err)
		if !errors.Is(err, ErrNotFound) {
			return locationError("s3://"+s.bucket+"/"+from, true, err)
		}
		if _, herr := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &dst}); herr != nil {
			return locationError("s3://"+s.bucket+"/"+from, true, err)
		}
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &from}); err != nil && !isNotFound(err) {
		return locationError("s3://"+s.bucket+"/"+from, true, err)
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
