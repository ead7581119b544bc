package objects_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/blob/blobtest"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

const (
	s3Access = "objectskey"
	s3Secret = "objectssecret"
)

// s3Server is a real S3 server (versitygw) behind a proxy that counts the requests Sluice
// makes to it.
type s3Server struct {
	endpoint string // the server's, for the test's own client
	proxy    string // the proxy's, for Sluice
	mu       sync.Mutex
	requests []string // "METHOD path?query" through the proxy
}

func startS3(t *testing.T) *s3Server {
	t.Helper()
	endpoint, _ := blobtest.VersityGW(t, s3Access, s3Secret)
	u, _ := url.Parse(endpoint)
	srv := &s3Server{endpoint: endpoint}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.mu.Lock()
		srv.requests = append(srv.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		srv.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	srv.proxy = p.URL
	return srv
}

func (s *s3Server) client() *s3.Client { return blobtest.S3Client(s.endpoint, s3Access, s3Secret) }

// opener opens s3:// locations as the CLI does for --files and --blobs, through the proxy.
func (s *s3Server) opener() objects.S3Opener { return blobtest.S3Opener(s.proxy, s3Access, s3Secret) }

// count returns how many requests through the proxy since mark satisfy match, and the new mark.
func (s *s3Server) count(mark int, match func(string) bool) (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests[mark:] {
		if match(r) {
			n++
		}
	}
	return n, len(s.requests)
}

// putTree creates the bucket and puts every file under dir in it under prefix, returning
// the location s3://bucket/prefix.
func (s *s3Server) putTree(t *testing.T, bucket, prefix, dir string) string {
	t.Helper()
	ctx := t.Context()
	c := s.client()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".v") {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + "/" + filepath.ToSlash(rel)), Body: f})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return "s3://" + bucket + "/" + prefix
}

// startObjectsS3 is [startObjects] with s3:// files locations opened by opener.
func startObjectsS3(t testing.TB, open enginetest.Open, opener objects.S3Opener) *enginetest.Kit {
	t.Helper()
	svc := &objects.Service{S3: opener}
	kit := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{objects.Name: objects.Domain{}}},
		append(svc.Actions(), basic.NewPass())...)
	if err := builtin.Apply(t.Context(), kit.Engine, objects.Name); err != nil {
		t.Fatal(err)
	}
	return kit
}

// TestSheetFromS3 runs the canonical sheet end to end with its files in a bucket of a real S3
// server (versitygw), on each driver: uploaded with files_dir s3://bucket/prefix, validated
// from one listing of the prefix, each file set's chain exactly as with a directory (from the
// action-state history), the video paused until COMPLETE, every preservation copy the bytes
// of its S3 object. A sheet naming keys that are missing gets "File not Found" naming each
// key, and unsafe names are refused as with a directory.
func TestSheetFromS3(t *testing.T) {
	t.Parallel()
	dir := canonicalMedia(t)
	srv := startS3(t)
	files := srv.putTree(t, "ingest", "batch-1", dir)
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjectsS3(t, open, srv.opener())
		ctx := t.Context()
		x := kit.Store.DomainSQL()

		bad := upload(t, kit, "missing.csv", strings.Join(objects.Headers, ",")+"\n"+
			"IMAGE,m-img,m-img-a,img/not-there.tif,a description,A,a label,,\n"+
			"VIDEO,m-vid,m-vid-a,video/reel.mp4,a description,A,a label,,video/no-chapters.vtt\n"+
			"IMAGE,m-img,m-img-x,img/scan#1?.tif,a description,X,a label,,\n"+
			"IMAGE,m-img,m-img-p,../batch-2/front.tif,a description,P,a label,,\n", files)
		if s := waitSheet(t, kit, bad, objects.StatusRowFail, objects.StatusAwaitingApproval); s.Status != objects.StatusRowFail {
			t.Fatalf("sheet naming missing keys is %s", s.Status)
		}
		rows, err := objects.NewStore(x).ListRows(ctx, bad, true)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			for _, e := range r.Errors {
				got = append(got, fmt.Sprintf("%d %s", r.Row, e.Message))
			}
		}
		want := []string{
			"1 filename: File not Found: s3://ingest/batch-1/img/not-there.tif",
			"2 structure: Structure file video/no-chapters.vtt not found in the ingest bucket",
			"3 filename: img/scan#1?.tif contains characters that are not safe for S3 object keys: #, ?",
			"4 filename: ../batch-2/front.tif points outside the files directory",
		}
		if !slices.Equal(got, want) {
			t.Errorf("row errors:\n got %q\nwant %q", got, want)
		}

		id := upload(t, kit, "canonical.csv", fmt.Sprintf(canonicalSheet, "c"), files+"/")
		s := waitSheet(t, kit, id, objects.StatusAwaitingApproval, objects.StatusRowFail, objects.StatusFileFail)
		if s.Status != objects.StatusAwaitingApproval {
			rows, _ := objects.NewStore(x).ListRows(ctx, id, true)
			t.Fatalf("sheet %+v, failed rows %+v", s, rows)
		}
		if err := objects.Approve(ctx, kit.Engine, id); err != nil {
			t.Fatal(err)
		}
		video := objects.FileSetID("c-vid-a")
		waitTranscodePending(t, kit, video)
		if f, err := objects.FireTranscoded(ctx, kit.Engine, transcodeEvent(video, "COMPLETE"), ""); err != nil || f.Fired != 1 {
			t.Fatalf("COMPLETE: %+v, %v", f, err)
		}
		if s := waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError); s.Status != objects.StatusCompleted {
			t.Fatalf("sheet %s", s.Status)
		}
		for suffix, want := range wantChains {
			fid := objects.FileSetID("c-" + suffix)
			if got := okHistory(t, kit, fid); !slices.Equal(got, want) {
				t.Errorf("%s chain:\n got %v\nwant %v", suffix, got, want)
			}
			f, err := objects.NewStore(x).GetFileSet(ctx, fid)
			if err != nil {
				t.Fatal(err)
			}
			if f.State != objects.StateComplete || !strings.HasPrefix(f.Location, "s3://ingest/batch-1/") {
				t.Errorf("%s: state %s, location %s", suffix, f.State, f.Location)
			}
			local, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(f.Location, "s3://ingest/batch-1/")))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(local)
			d, _ := f.Core["digests"].(map[string]any)
			if f.Core["preservation_sha256"] != hex.EncodeToString(sum[:]) || d["sha256"] != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: preservation %v, digests %v, want the object's sha256 %x", suffix, f.Core["preservation_sha256"], d, sum)
			}
			if _, err := kit.Blobs.Stat(ctx, hex.EncodeToString(sum[:])); err != nil {
				t.Errorf("%s: preservation copy: %v", suffix, err)
			}
		}
		img, _ := objects.NewStore(x).GetFileSet(ctx, objects.FileSetID("c-img-a"))
		if img.Derivatives["pyramid_tiff"] == nil || img.Core["exif"] == nil || img.Core["mime_type"] != "image/tiff" {
			t.Errorf("access image: %+v", img)
		}
		vid, _ := objects.NewStore(x).GetFileSet(ctx, video)
		if vid.Core["mediainfo"] == nil || vid.Core["mime_type"] != "video/mp4" {
			t.Errorf("video: core %v", vid.Core)
		}
	})
}

// TestValidationFromS3 validates a sheet of 1,500 rows whose files are in a bucket: every
// row's file is checked against one listing of the prefix (two pages of keys), with no request
// per row, and every missing key is reported.
func TestValidationFromS3(t *testing.T) {
	t.Parallel()
	srv := startS3(t)
	c := srv.client()
	ctx := t.Context()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("many")}); err != nil {
		t.Fatal(err)
	}
	const objectsN, rowsN = 1100, 1500
	var wg sync.WaitGroup
	var failed atomic.Value
	sem := make(chan struct{}, 16)
	for i := range objectsN {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			key := fmt.Sprintf("batch/page-%04d.tif", i)
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("many"), Key: aws.String(key),
				Body: strings.NewReader("II*\x00 page")}); err != nil {
				failed.Store(err)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(err)
	}
	var sheet strings.Builder
	sheet.WriteString(strings.Join(objects.Headers, ",") + "\n")
	for i := range rowsN { // rows past the 1,100 objects name keys that are missing
		fmt.Fprintf(&sheet, "IMAGE,w-%d,f-%d,page-%04d.tif,a description,A,a label,,\n", i/10, i, i)
	}
	opener := srv.opener()
	_, mark := srv.count(0, func(string) bool { return false })
	v, err := objects.Validate(ctx, strings.NewReader(sheet.String()), objects.Env{FilesDir: "s3://many/batch", OpenS3: opener})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != objects.StatusRowFail || len(v.Rows) != rowsN {
		t.Fatalf("status %s, %d rows", v.Status, len(v.Rows))
	}
	for i, r := range v.Rows {
		want := 0
		if i >= objectsN {
			want = 1
		}
		if len(r.Errors) != want {
			t.Fatalf("row %d: errors %+v, want %d", r.Row, r.Errors, want)
		}
		if want == 1 && r.Errors[0] != (objects.FieldError{Field: "filename", Message: fmt.Sprintf("filename: File not Found: s3://many/batch/page-%04d.tif", i)}) {
			t.Fatalf("row %d: %+v", r.Row, r.Errors[0])
		}
		if want == 0 && r.Fields["mime_type"] != "image/tiff" {
			t.Fatalf("row %d: MIME type %q", r.Row, r.Fields["mime_type"])
		}
	}
	lists, _ := srv.count(mark, func(r string) bool { return strings.HasPrefix(r, "GET /many?") && strings.Contains(r, "list-type=2") })
	perObject, _ := srv.count(mark, func(r string) bool { return strings.HasPrefix(r, "GET /many/") || strings.HasPrefix(r, "HEAD /many/") })
	if lists != 2 || perObject != 0 {
		srv.mu.Lock()
		t.Errorf("validation made %d list requests (want 2 pages of one listing) and %d object requests (want none): %v", lists, perObject, srv.requests[mark:])
		srv.mu.Unlock()
	}
}

// TestS3NotConfigured uploads a sheet whose files are in S3 to a service that opens no S3
// locations: its validation fails at once, naming the location, rather than retrying.
func TestS3NotConfigured(t *testing.T) {
	t.Parallel()
	kit := startObjects(t, drivertest.OpenSQLite)
	id := upload(t, kit, "s3.csv", strings.Join(objects.Headers, ",")+"\nIMAGE,w-1,f-1,a.txt,a description,S,a label,,\n", "s3://ingest/batch-1")
	kit.WaitJob(t, id, time.Minute)
	roots, err := kit.Store.ItemList(t.Context(), store.ItemListParams{JobID: id, Limit: 1})
	if err != nil || len(roots) != 1 {
		t.Fatalf("roots %v, %v", roots, err)
	}
	if want := "s3://ingest/batch-1: " + objects.ErrNoS3.Error(); !strings.Contains(roots[0].Error, want) {
		t.Errorf("the sheet's item failed with %q, want it to name %q", roots[0].Error, want)
	}
	for _, tk := range kit.Tasks(t, id) {
		if tk.Step == "validate-sheet" && tk.Attempt != 1 {
			t.Errorf("validation ran %d times, want once (the error is permanent)", tk.Attempt)
		}
	}
}

// BenchmarkValidationFromS3 validates a 10,000-row sheet whose 10,000 files are in a bucket
// of versitygw on loopback, and, as the baseline of the same run, the same sheet from a
// directory: ns/op of each sub-benchmark, to be read as a ratio.
//
//	go test -run '^$' -bench BenchmarkValidationFromS3 -benchtime 3x ./internal/objects
func BenchmarkValidationFromS3(b *testing.B) {
	const rows = 10_000
	endpoint, data := blobtest.VersityGW(b, s3Access, s3Secret)
	dir := filepath.Join(data, "bench", "batch") // the posix backend serves the files under a bucket's directory as objects
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var sheet strings.Builder
	sheet.WriteString(strings.Join(objects.Headers, ",") + "\n")
	for i := range rows {
		name := fmt.Sprintf("page-%05d.tif", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("II*\x00 page"), 0o644); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&sheet, "IMAGE,w-%d,f-%d,%s,a description,A,a label,,\n", i/10, i, name)
	}
	srv := &s3Server{endpoint: endpoint, proxy: endpoint}
	for _, bc := range []struct{ name, files string }{{"dir", dir}, {"s3", "s3://bench/batch"}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				v, err := objects.Validate(b.Context(), strings.NewReader(sheet.String()), objects.Env{FilesDir: bc.files, OpenS3: srv.opener()})
				if err != nil || v.Status != objects.StatusValid {
					b.Fatalf("%v: %+v", err, v.FileErrors)
				}
			}
		})
	}
}
