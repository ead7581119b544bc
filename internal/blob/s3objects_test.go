package blob_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-project/sluice/internal/blob"
)

// TestS3Objects reads objects something else put in the bucket, on a real S3 server: a listing
// of the prefix (keys relative to it, over several pages), a streamed read, the first bytes
// only, an empty object, and an absent one.
func TestS3Objects(t *testing.T) {
	t.Parallel()
	endpoint, _ := startVersityGW(t)
	createBucket(t, endpoint, testBucket)
	ctx := t.Context()
	c := testClient(endpoint)
	put := func(key, body string) {
		t.Helper()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{}
	for i := range 1005 { // more than one page of 1,000
		k := fmt.Sprintf("files/batch/%s%c-%04d.tif", strings.Repeat("x", i%7), 'a'+i%26, i)
		put(k, strings.Repeat("b", i%5))
		want[strings.TrimPrefix(k, "files/")] = int64(i % 5)
	}
	put("files/batch/doc.txt", "hello, world")
	want["batch/doc.txt"] = 12
	put("elsewhere/doc.txt", "not under the prefix")

	s, err := blob.NewS3(ctx, blob.S3Config{Bucket: testBucket, Prefix: "files", Endpoint: endpoint, AccessKey: testAccess,
		SecretKey: testSecret, PathStyle: true, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	if err := s.ListObjects(ctx, "", func(key string, size int64) error { got[key] = size; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d objects, want %d", len(got), len(want))
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: listed size %d (present %v), want %d", k, got[k], k, n)
		}
	}
	read := func(key string, n int64) (string, error) {
		rc, err := s.OpenObject(ctx, key, n)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if b, err := read("batch/doc.txt", 0); err != nil || b != "hello, world" {
		t.Errorf("whole object: %q, %v", b, err)
	}
	if b, err := read("batch/doc.txt", 5); err != nil || b != "hello" {
		t.Errorf("first 5 bytes: %q, %v", b, err)
	}
	if b, err := read("batch/a-0000.tif", 16); err != nil || b != "" {
		t.Errorf("first bytes of an empty object: %q, %v", b, err)
	}
	if _, err := read("batch/missing.tif", 0); !errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), "s3://"+testBucket+"/files/batch/missing.tif") {
		t.Errorf("absent object: %v, want ErrNotFound naming its key", err)
	}
	if u := s.URL("batch/doc.txt"); u != "s3://"+testBucket+"/files/batch/doc.txt" {
		t.Errorf("URL = %s", u)
	}
}
