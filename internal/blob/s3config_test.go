package blob_test

import (
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/blob"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url, bucket, prefix, err string
	}{
		{name: "bucket only", url: "s3://blobs", bucket: "blobs"},
		{name: "bucket slash", url: "s3://blobs/", bucket: "blobs"},
		{name: "prefix", url: "s3://blobs/sluice/prod", bucket: "blobs", prefix: "sluice/prod"},
		{name: "prefix trailing slash", url: "s3://blobs/sluice/", bucket: "blobs", prefix: "sluice"},
		{name: "wrong scheme", url: "https://blobs/x", err: "want scheme s3://"},
		{name: "no scheme", url: "blobs/x", err: "want scheme s3://"},
		{name: "no bucket", url: "s3:///x", err: "want s3://bucket/prefix"},
		{name: "port", url: "s3://blobs:9000/x", err: "want s3://bucket/prefix"},
		{name: "user", url: "s3://k:s@blobs/x", err: "want s3://bucket/prefix"},
		{name: "user's secret masked", url: "s3://AKIA:wJalr-s3cret@blobs/x", err: `"s3://AKIA:xxxxx@blobs/x"`},
		{name: "query", url: "s3://blobs/x?region=eu", err: "not supported"},
		{name: "query's secret masked", url: "s3://blobs/x?secret_key=wJalr-s3cret", err: `"s3://blobs/x?secret_key=xxxxx"`},
		{name: "bad escape", url: "s3://blobs/%zz", err: "parse blob store url"},
	} {
		bucket, prefix, err := blob.ParseURL(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: ParseURL(%q) error = %v, want one containing %q", tc.name, tc.url, err, tc.err)
			}
			continue
		}
		if err != nil || bucket != tc.bucket || prefix != tc.prefix {
			t.Errorf("%s: ParseURL(%q) = %q, %q, %v; want %q, %q", tc.name, tc.url, bucket, prefix, err, tc.bucket, tc.prefix)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://b", "s3://b/p/q/", "s3://b:1/p", "http://x", "s3:///", "s3://b/../..", "s3://b/%2e%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		bucket, prefix, err := blob.ParseURL(raw)
		if err != nil {
			return
		}
		if bucket == "" || strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") {
			t.Fatalf("ParseURL(%q) = %q, %q", raw, bucket, prefix)
		}
	})
}

func TestS3ConfigFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want blob.S3Config
	}{
		{name: "empty", env: nil, want: blob.S3Config{}},
		{
			name: "aws",
			env: map[string]string{
				"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "TOK",
				"AWS_DEFAULT_REGION": "eu-west-1",
			},
			want: blob.S3Config{AccessKey: "AK", SecretKey: "SK", SessionToken: "TOK", Region: "eu-west-1"},
		},
		{
			name: "self-hosted",
			env: map[string]string{
				"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK",
				"AWS_REGION": "r1", "AWS_DEFAULT_REGION": "r2",
				"AWS_ENDPOINT_URL": "http://generic", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:7070",
			},
			want: blob.S3Config{AccessKey: "AK", SecretKey: "SK", Region: "r1", Endpoint: "http://127.0.0.1:7070", PathStyle: true},
		},
	} {
		got := blob.S3ConfigFromEnv(func(k string) string { return tc.env[k] })
		if got != tc.want {
			t.Errorf("%s: S3ConfigFromEnv = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
