package blob_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/blob/blobtest"
)

const (
	testAccess = "sluicetest"
	testSecret = "sluicetestsecret"
	testBucket = "sluice-blobs"
)

// TestS3 runs the conformance suite against a real versitygw S3 gateway on
// loopback. Install it with
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//
// or point SLUICE_TEST_VERSITYGW at the binary. Without it the test skips,
// unless SLUICE_TEST_REQUIRE_S3=1 (as in CI), where it fails.
func TestS3(t *testing.T) {
	t.Parallel()
	endpoint, data := startVersityGW(t)
	createBucket(t, endpoint, testBucket)

	var n atomic.Int64
	newStoreAt := func(t *testing.T, prefix string) *blob.S3 {
		t.Helper()
		s, err := blob.NewS3(t.Context(), blob.S3Config{
			Bucket:    testBucket,
			Prefix:    prefix,
			Endpoint:  endpoint,
			AccessKey: testAccess,
			SecretKey: testSecret,
			PathStyle: true,
			SpoolDir:  t.TempDir(),
		})
		if err != nil {
			t.Fatalf("NewS3: %v", err)
		}
		return s
	}
	newStore := func(t *testing.T) *blob.S3 {
		return newStoreAt(t, fmt.Sprintf("test-%d/", n.Add(1)))
	}

	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		blobtest.Exercise(t, func(t *testing.T) blob.Store { return newStore(t) })
	})

	t.Run("CopyFromDir", func(t *testing.T) {
		// What `sluice migrate copy --blobs s3://…` does: every blob of a data dir to the
		// bucket, verified, and nothing twice on a re-run.
		t.Parallel()
		s := newStore(t)
		d, err := blob.NewDir(filepath.Join(t.TempDir(), "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		want := putN(t, d, 12)
		st, err := blob.Copy(t.Context(), s, d, blob.CopyOptions{Parallel: 4})
		if err != nil || st.Copied != 12 || st.Skipped != 0 {
			t.Fatalf("copy: %+v, %v; want 12 copied", st, err)
		}
		for key := range want {
			if got := readAll(t, s, key); sha256.Sum256(got) != sha256.Sum256(readAll(t, d, key)) {
				t.Errorf("blob %s differs in the bucket", key)
			}
		}
		if st, err := blob.Copy(t.Context(), s, d, blob.CopyOptions{}); err != nil || st.Copied != 0 || st.Skipped != 12 {
			t.Errorf("re-run: %+v, %v; want all 12 skipped", st, err)
		}
	})

	t.Run("PrefixesAreIsolated", func(t *testing.T) {
		t.Parallel()
		a, b := newStore(t), newStore(t)
		sum, _, err := a.Put(t.Context(), strings.NewReader("only in a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(t.Context(), sum); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Stat in another prefix = %v, want ErrNotFound", err)
		}
	})

	t.Run("PresignedURLOfAbsentBlob", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		u, err := s.PresignGet(t.Context(), strings.Repeat("0", 64), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET presigned URL of absent blob = %d, want 404", resp.StatusCode)
		}
	})

	t.Run("GCAbortsStaleMultipartUploads", func(t *testing.T) {
		t.Parallel()
		prefix := "gc-multipart/"
		s, client := newStoreAt(t, prefix), testClient(endpoint)
		orphan := prefix + "sha256/12/34/" + "1234" + strings.Repeat("0", 60)
		if _, err := client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{
			Bucket: aws.String(testBucket), Key: aws.String(orphan),
		}); err != nil {
			t.Fatal(err)
		}
		keep := func(string) (bool, error) { return true, nil }
		// Within grace the upload may still be running: leave it.
		if _, _, err := blob.GC(t.Context(), s, keep, time.Hour, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := countUploads(t, client, prefix); got != 1 {
			t.Fatalf("uploads after GC within grace = %d, want 1", got)
		}
		if _, _, err := blob.GC(t.Context(), s, keep, time.Hour, time.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := countUploads(t, client, prefix); got != 0 {
			t.Fatalf("uploads after GC past grace = %d, want 0", got)
		}
	})

	// Re-Putting old content must refresh LastModified, or GC could delete a
	// blob that a row is about to reference. versitygw keeps objects as
	// plain files, so the test can age one.
	t.Run("PutRefreshesModTime", func(t *testing.T) {
		t.Parallel()
		prefix := "refresh/"
		s, ctx := newStoreAt(t, prefix), t.Context()
		sum, _, err := s.Put(ctx, strings.NewReader("old content"))
		if err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-48 * time.Hour)
		file := filepath.Join(data, testBucket, filepath.FromSlash(prefix+"sha256/"+sum[:2]+"/"+sum[2:4]+"/"+sum))
		if err := os.Chtimes(file, old, old); err != nil {
			t.Fatal(err)
		}
		nothing := func(string) (bool, error) { return false, nil }
		if _, _, err := s.Put(ctx, strings.NewReader("old content")); err != nil {
			t.Fatal(err)
		}
		deleted, _, err := blob.GC(ctx, s, nothing, time.Hour, time.Now())
		if err != nil || deleted != 0 {
			t.Fatalf("GC after re-Put = %d, %v; want 0 deleted", deleted, err)
		}
		// And without the re-Put the aged blob does go.
		if err := os.Chtimes(file, old, old); err != nil {
			t.Fatal(err)
		}
		deleted, _, err = blob.GC(ctx, s, nothing, time.Hour, time.Now())
		if err != nil || deleted != 1 {
			t.Fatalf("GC of aged blob = %d, %v; want 1 deleted", deleted, err)
		}
	})

	t.Run("NewS3Errors", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, want string
			cfg        blob.S3Config
		}{
			{name: "no bucket", want: "bucket is required", cfg: blob.S3Config{AccessKey: "a", SecretKey: "b"}},
			{name: "no credentials", want: "access key", cfg: blob.S3Config{Bucket: testBucket}},
			{name: "bad endpoint", want: "endpoint", cfg: blob.S3Config{Bucket: testBucket, AccessKey: "a", SecretKey: "b", Endpoint: "127.0.0.1:1"}},
			{name: "missing bucket", want: "s3://no-such-bucket: no such bucket", cfg: blob.S3Config{
				Bucket: "no-such-bucket", AccessKey: testAccess, SecretKey: testSecret, Endpoint: endpoint, PathStyle: true,
			}},
			{name: "wrong secret", want: "s3://" + testBucket + ": access denied", cfg: blob.S3Config{
				Bucket: testBucket, AccessKey: testAccess, SecretKey: "wrong", Endpoint: endpoint, PathStyle: true,
			}},
		} {
			_, err := blob.NewS3(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: NewS3 error = %v, want one mentioning %q", tc.name, err, tc.want)
			}
		}
	})

	t.Run("MultipartContent", func(t *testing.T) {
		t.Parallel()
		// A size that is not a multiple of the part size, so the last part is short.
		s := newStore(t)
		const size = 17<<20 + 3
		gen := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{7}), size) }
		sum, n, err := s.Put(t.Context(), gen())
		if err != nil || n != size {
			t.Fatalf("Put = %d, %v; want %d bytes", n, err, size)
		}
		rc, err := s.Open(t.Context(), sum)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got, want := sha256.New(), sha256.New()
		io.Copy(want, gen())
		if m, err := io.Copy(got, rc); err != nil || m != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Fatalf("read back %d bytes (%v) with another hash, want the %d put", m, err, size)
		}
	})
}

func countUploads(t *testing.T, c *s3.Client, prefix string) int {
	t.Helper()
	out, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{
		Bucket: aws.String(testBucket), Prefix: aws.String(prefix),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

func testClient(endpoint string) *s3.Client {
	return blobtest.S3Client(endpoint, testAccess, testSecret)
}

func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	if _, err := testClient(endpoint).CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// startVersityGW starts a real S3 server ([blobtest.VersityGW]) with the test's credentials.
func startVersityGW(t *testing.T) (endpoint, dataDir string) {
	t.Helper()
	return blobtest.VersityGW(t, testAccess, testSecret)
}
