package blob

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sluice-project/sluice/internal/redact"
)

// S3 multipart tuning.
const (
	// s3PartSize is the size of each part of a multipart upload; blobs up to
	// this size go up in one PutObject. S3 allows 5 MiB to 5 GiB per part and
	// 10,000 parts, so this covers blobs up to 78 GiB.
	s3PartSize = 8 << 20
	// s3PartConcurrency bounds the parts in flight for one Put.
	s3PartConcurrency = 4
	s3MaxParts        = 10000
	// s3MaxCopy is the largest object CopyObject can copy, which Put uses to
	// refresh the modification time of content that already exists.
	s3MaxCopy = 5 << 30
	// s3FreshWindow is how old an existing object may be for a Put of the
	// same content to leave its LastModified alone. It allows for clock skew
	// and saves work on bursts of identical Puts; GC's grace period must
	// exceed it.
	s3FreshWindow = time.Minute
	// s3MaxPresign is the longest validity of a SigV4 presigned URL.
	s3MaxPresign = 7 * 24 * time.Hour
)

// S3Config configures an [S3] store. The zero value is not valid: Bucket,
// AccessKey and SecretKey are required.
type S3Config struct {
	// Bucket is the name of an existing bucket. Required.
	Bucket string
	// Prefix is prepended to every object key, so several stores can share a
	// bucket; a trailing slash is added if missing. Defaults to "" (keys start
	// at the bucket root).
	Prefix string
	// Endpoint is the base URL of an S3-compatible server, such as
	// "http://127.0.0.1:7070". Defaults to "" (AWS S3 for Region).
	Endpoint string
	// Region is the signing region. Defaults to "us-east-1".
	Region string
	// AccessKey and SecretKey are static credentials. Required.
	AccessKey string
	SecretKey string
	// SessionToken accompanies temporary credentials. Defaults to "" (none).
	SessionToken string
	// PathStyle addresses buckets as Endpoint/bucket/key rather than
	// bucket.Endpoint/key, which most self-hosted servers need. Defaults to
	// false.
	PathStyle bool
	// SpoolDir is where Put spools a blob while hashing it, before the upload
	// (the object key is the hash, so it must be known first); it needs room
	// for the largest blob. Defaults to [os.TempDir].
	SpoolDir string
	// RequestTimeout bounds the wait for a response's headers, and each write of
	// a request body: a server that hangs, or stops reading an upload, is given
	// up on and the request retried. Bodies may stream for longer. Defaults to 60 s.
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of each request the server fails with a
	// 5xx, a throttle or a broken connection, retried with jittered backoff.
	// Defaults to 8.
	MaxAttempts int
	// MaxBackoff bounds the jittered wait before each retry. Defaults to 5 s.
	MaxBackoff time.Duration
}

// ParseURL splits a store URL of the form s3://bucket/prefix into the bucket
// and the prefix (which may be empty), for [S3Config]. It returns an error for
// any other scheme, a missing bucket, or a URL with user info, a port, a query
// or a fragment.
func ParseURL(raw string) (bucket, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("parse blob store url %s: %w", redact.URL(raw), errors.Unwrap(err))
	}
	switch {
	case u.Scheme != "s3":
		return "", "", fmt.Errorf("parse blob store url %q: want scheme s3://", redact.URL(raw))
	case u.Host == "" || u.Port() != "" || u.User != nil:
		return "", "", fmt.Errorf("parse blob store url %q: want s3://bucket/prefix", redact.URL(raw))
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", "", fmt.Errorf("parse blob store url %q: query and fragment are not supported", redact.URL(raw))
	}
	return u.Host, strings.Trim(u.Path, "/"), nil
}

// S3ConfigFromEnv returns an S3Config filled from the standard AWS
// environment variables, read through getenv (normally [os.Getenv]; this
// package never reads the environment itself): AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or
// AWS_DEFAULT_REGION) and AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL). When an
// endpoint is set, PathStyle is true, as self-hosted servers expect. Bucket
// and Prefix are left empty; set them from [ParseURL].
func S3ConfigFromEnv(getenv func(string) string) S3Config {
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	cfg := S3Config{
		AccessKey:    getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:    getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: getenv("AWS_SESSION_TOKEN"),
		Region:       first("AWS_REGION", "AWS_DEFAULT_REGION"),
		Endpoint:     first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
	}
	cfg.PathStyle = cfg.Endpoint != ""
	return cfg
}

// S3 is a [Store] that keeps blobs as objects in an S3-compatible bucket,
// under keys prefix/sha256/ab/cd/<hex>. It is safe for concurrent use,
// including by many processes sharing the bucket.
//
// Put spools the stream to a temporary file while hashing it, then uploads it
// in one PutObject (up to 8 MiB, with its SHA-256 for the server to verify)
// or as a multipart upload of 8 MiB parts, so memory use does not depend on
// blob size. An object becomes visible only once complete, so a failed or
// cancelled Put leaves no partial blob; an interrupted multipart upload is
// aborted, and one orphaned by a crash is aborted by [GC].
//
// A Put of content that is already stored uploads nothing if the object was
// written within the last minute; otherwise it refreshes LastModified by
// copying the object onto itself (server-side), or, on servers where that
// does not refresh it (versitygw) or for objects over 5 GiB, uploads it again.
type S3 struct {
	client   *s3.Client
	bucket   string
	prefix   string // "" or ends in "/"
	spoolDir string
	health   *health
}

var (
	_ Store     = (*S3)(nil)
	_ Presigner = (*S3)(nil)
	_ Watched   = (*S3)(nil)
)

// NewS3 returns an S3 store for cfg after checking that the bucket is
// reachable with the credentials, so that a misconfiguration fails at start
// rather than at the first Put.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("open s3 blob store: bucket is required")
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, fmt.Errorf("open s3 blob store for bucket %q: access key and secret key are required (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)", cfg.Bucket)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = time.Minute
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	h := &health{}
	opts := s3.Options{
		Region:       cfg.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		UsePathStyle: cfg.PathStyle,
		HTTPClient: watchedClient{health: h, next: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.ResponseHeaderTimeout = cfg.RequestTimeout
			tr.DialContext = stallDial(tr.DialContext, cfg.RequestTimeout)
		})},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = cfg.MaxAttempts
			o.MaxBackoff = cfg.MaxBackoff
			// No client-side retry quota: a server failing one request in five would
			// drain it and turn retryable errors into failures.
			o.RateLimiter = ratelimit.None
		}),
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("open s3 blob store: endpoint %q: want http:// or https:// URL", redact.URL(cfg.Endpoint))
		}
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	s := &S3{
		client:   s3.New(opts),
		bucket:   cfg.Bucket,
		prefix:   strings.Trim(cfg.Prefix, "/"),
		spoolDir: cfg.SpoolDir,
		health:   h,
	}
	if s.prefix != "" {
		s.prefix += "/"
	}
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket}); err != nil {
		where := "AWS"
		if cfg.Endpoint != "" {
			where = cfg.Endpoint
		}
		return nil, fmt.Errorf("open s3 blob store at %s: %w", where, locationError("s3://"+s.bucket, false, err))
	}
	return s, nil
}

// Outage implements [Watched]: the outage under way, from the outcome of the store's latest
// requests.
func (s *S3) Outage() (Outage, bool) { return s.health.current() }

func (s *S3) key(sum string) string { return s.prefix + blobPath(sum) }

// Put implements [Store.Put].
func (s *S3) Put(ctx context.Context, r io.Reader) (string, int64, error) {
	f, err := os.CreateTemp(s.spoolDir, "sluice-blob-*.spool")
	if err != nil {
		return "", 0, fmt.Errorf("put blob: spool: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	sum, n, err := hashCopy(ctx, f, r)
	if err != nil {
		return "", 0, fmt.Errorf("put blob: spool to %s: %w", f.Name(), err)
	}
	key := s.key(sum)

	start := time.Now()
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	switch {
	case err == nil && aws.ToInt64(head.ContentLength) == n:
		// Already stored. GC's grace period must count from this Put, so
		// an object that is not fresh gets its LastModified refreshed.
		if aws.ToTime(head.LastModified).After(start.Add(-s3FreshWindow)) {
			return sum, n, nil
		}
		if n <= s3MaxCopy {
			refreshed, err := s.touch(ctx, key, start)
			if err != nil {
				return "", 0, fmt.Errorf("put blob %s: %w", sum, unavailable(err))
			}
			if refreshed {
				return sum, n, nil
			}
		}
	case err != nil && !isNotFound(err):
		return "", 0, fmt.Errorf("put blob %s: head %s: %w", sum, key, unavailable(err))
	}
	// Absent, not refreshable in place, or of the wrong size (written by
	// something other than this package): upload, replacing it.
	if n <= s3PartSize {
		err = s.putSingle(ctx, f, key, sum, n)
	} else {
		err = s.putMultipart(ctx, f, key, n)
	}
	if err != nil {
		return "", 0, fmt.Errorf("put blob %s: %w", sum, unavailable(err))
	}
	return sum, n, nil
}

// touch copies the object onto itself, which on AWS S3 gives it a new
// LastModified without moving its bytes over the network, and reports whether
// the server did refresh it: some servers (versitygw) only rewrite metadata,
// and then Put uploads the bytes again.
func (s *S3) touch(ctx context.Context, key string, since time.Time) (bool, error) {
	src := (&url.URL{Path: s.bucket + "/" + key}).EscapedPath()
	out, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            &s.bucket,
		Key:               &key,
		CopySource:        &src,
		MetadataDirective: types.MetadataDirectiveReplace,
	})
	if err != nil {
		return false, fmt.Errorf("refresh modification time of %s: %w", key, err)
	}
	if out.CopyObjectResult == nil {
		return false, nil
	}
	return aws.ToTime(out.CopyObjectResult.LastModified).After(since.Add(-s3FreshWindow)), nil
}

func (s *S3) putSingle(ctx context.Context, f *os.File, key, sum string, n int64) error {
	raw, _ := hex.DecodeString(sum) // valid: we computed it
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         &s.bucket,
		Key:            &key,
		Body:           io.NewSectionReader(f, 0, n),
		ContentLength:  aws.Int64(n),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}

func (s *S3) putMultipart(ctx context.Context, f *os.File, key string, n int64) (err error) {
	nParts := int((n + s3PartSize - 1) / s3PartSize)
	if nParts > s3MaxParts {
		return fmt.Errorf("upload %s: %d bytes is more than %d parts of %d bytes", key, n, s3MaxParts, s3PartSize)
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:            &s.bucket,
		Key:               &key,
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
	})
	if err != nil {
		return fmt.Errorf("start multipart upload of %s: %w", key, err)
	}
	defer func() {
		if err == nil {
			return
		}
		// Abort even if ctx is cancelled, so the parts do not linger until GC.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: &key, UploadId: created.UploadId,
		}); aerr != nil {
			err = fmt.Errorf("%w (abort multipart upload: %v)", err, aerr)
		}
	}()

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := make([]types.CompletedPart, nParts)
	errs := make([]error, nParts)
	sem := make(chan struct{}, s3PartConcurrency)
	var wg sync.WaitGroup
	for i := range nParts {
		select {
		case sem <- struct{}{}:
		case <-pctx.Done():
		}
		if pctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			off := int64(i) * s3PartSize
			size := min(s3PartSize, n-off)
			num := int32(i + 1)
			out, err := s.client.UploadPart(pctx, &s3.UploadPartInput{
				Bucket:            &s.bucket,
				Key:               &key,
				UploadId:          created.UploadId,
				PartNumber:        aws.Int32(num),
				Body:              io.NewSectionReader(f, off, size),
				ContentLength:     aws.Int64(size),
				ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
			})
			if err != nil {
				errs[i] = fmt.Errorf("upload part %d of %s: %w", num, key, err)
				cancel()
				return
			}
			parts[i] = types.CompletedPart{PartNumber: aws.Int32(num), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          &s.bucket,
		Key:             &key,
		UploadId:        created.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return fmt.Errorf("complete multipart upload of %s: %w", key, err)
	}
	return nil
}

// Open implements [Store.Open]. Reading the returned body fails once ctx is
// done.
func (s *S3) Open(ctx context.Context, sum string) (io.ReadCloser, error) {
	if err := checkKey(sum); err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	key := s.key(sum)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", sum, unavailable(s.mapErr(err)))
	}
	return out.Body, nil
}

// Stat implements [Store.Stat].
func (s *S3) Stat(ctx context.Context, sum string) (int64, error) {
	size, _, err := s.head(ctx, sum)
	if err != nil {
		return 0, fmt.Errorf("stat blob: %w", err)
	}
	return size, nil
}

func (s *S3) head(ctx context.Context, sum string) (int64, time.Time, error) {
	if err := checkKey(sum); err != nil {
		return 0, time.Time{}, err
	}
	key := s.key(sum)
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("%s: %w", sum, unavailable(s.mapErr(err)))
	}
	return aws.ToInt64(out.ContentLength), aws.ToTime(out.LastModified), nil
}

func (s *S3) blobModTime(ctx context.Context, sum string) (time.Time, error) {
	_, t, err := s.head(ctx, sum)
	return t, err
}

// Delete implements [Store.Delete].
func (s *S3) Delete(ctx context.Context, sum string) error {
	if err := checkKey(sum); err != nil {
		return fmt.Errorf("delete blob: %w", err)
	}
	key := s.key(sum)
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete blob %s: %w", sum, unavailable(err))
	}
	return nil
}

// Walk implements [Store.Walk]. Objects under the prefix whose key does not
// match the layout for their name are skipped.
func (s *S3) Walk(ctx context.Context, fn func(sum string, size int64, modTime time.Time) error) error {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: &s.bucket,
		Prefix: aws.String(s.prefix + "sha256/"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("walk blobs in s3://%s/%s: %w", s.bucket, s.prefix, unavailable(err))
		}
		for _, obj := range page.Contents {
			key := aws.ToString(obj.Key)
			sum := key[strings.LastIndexByte(key, '/')+1:]
			if checkKey(sum) != nil || s.key(sum) != key {
				continue
			}
			if err := fn(sum, aws.ToInt64(obj.Size), aws.ToTime(obj.LastModified)); err != nil {
				return fmt.Errorf("walk blobs in s3://%s/%s: %w", s.bucket, s.prefix, err)
			}
		}
	}
	return nil
}

// PresignGet implements [Presigner]. It signs locally without checking that
// the blob exists; a GET of an absent blob's URL gets 404. ttl must be
// positive and at most 7 days.
func (s *S3) PresignGet(ctx context.Context, sum string, ttl time.Duration) (string, error) {
	if err := checkKey(sum); err != nil {
		return "", fmt.Errorf("presign blob: %w", err)
	}
	if ttl <= 0 || ttl > s3MaxPresign {
		return "", fmt.Errorf("presign blob %s: ttl %s out of range (0, %s]", sum, ttl, s3MaxPresign)
	}
	key := s.key(sum)
	req, err := s3.NewPresignClient(s.client).PresignGetObject(ctx,
		&s3.GetObjectInput{Bucket: &s.bucket, Key: &key}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign blob %s: %w", sum, err)
	}
	return req.URL, nil
}

// cleanStale aborts multipart uploads under the prefix started before before,
// left by Puts whose process died. It cannot tell their size, so it reports
// no bytes freed.
func (s *S3) cleanStale(ctx context.Context, before time.Time) (int64, error) {
	p := s3.NewListMultipartUploadsPaginator(s.client, &s3.ListMultipartUploadsInput{
		Bucket: &s.bucket,
		Prefix: aws.String(s.prefix + "sha256/"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("list multipart uploads: %w", err)
		}
		for _, u := range page.Uploads {
			if !aws.ToTime(u.Initiated).Before(before) {
				continue
			}
			if _, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
				Bucket: &s.bucket, Key: u.Key, UploadId: u.UploadId,
			}); err != nil && !isNotFound(err) {
				return 0, fmt.Errorf("abort stale multipart upload of %s: %w", aws.ToString(u.Key), err)
			}
		}
	}
	return 0, nil
}

// mapErr adds ErrNotFound to err's chain when S3 says the object is absent.
func (s *S3) mapErr(err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// isNotFound reports whether err means the object (not the bucket) is absent.
// HEAD responses have no body, so only the status code tells.
func isNotFound(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound", "NoSuchUpload":
			return true
		case "NoSuchBucket":
			return false
		}
	}
	var resp *awshttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == 404
}

// stallDial wraps dial so that a write to the connection that makes no
// progress for timeout fails. ResponseHeaderTimeout starts only once the
// request body is sent: a server that stopped reading an upload part would
// otherwise hold the Put forever (seen with a proxy that never answered).
func stallDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, timeout: timeout}, nil
	}
}

// stallConn fails a Write that does not finish within timeout.
type stallConn struct {
	net.Conn
	timeout time.Duration
}

func (c *stallConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
