package blobtest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-project/sluice/internal/blob"
)

// S3Client is a plain S3 client of endpoint (path-style, region us-east-1) with the keys access
// and secret, for a test's own look at a bucket behind Sluice's back.
func S3Client(endpoint, access, secret string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")})
}

// S3Opener opens s3://bucket/prefix locations as the CLI does for --files and --blobs:
// endpoint, region and keys as the AWS_* variables would give them (here the arguments, not the
// process's environment), the spool in the system's temporary directory.
func S3Opener(endpoint, access, secret string) func(ctx context.Context, raw string) (*blob.S3, error) {
	vars := map[string]string{"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1",
		"AWS_ENDPOINT_URL_S3": endpoint}
	return func(ctx context.Context, raw string) (*blob.S3, error) {
		cfg := blob.S3ConfigFromEnv(func(k string) string { return vars[k] })
		bucket, prefix, err := blob.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		cfg.Bucket, cfg.Prefix, cfg.SpoolDir = bucket, prefix, os.TempDir()
		return blob.NewS3(ctx, cfg)
	}
}

// PutObjects creates bucket on the server c talks to and puts each of objects (key → content)
// in it.
func PutObjects(t testing.TB, c *s3.Client, bucket string, objects map[string]string) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	for key, content := range objects {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: strings.NewReader(content)}); err != nil {
			t.Fatalf("put %s/%s: %v", bucket, key, err)
		}
	}
}
