package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/blob/blobtest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// faultProxy stands in front of an S3 server and fails a share of the calls: 500, 503
// (SlowDown) or no answer at all until the client gives up. It is safe for concurrent use.
type faultProxy struct {
	rate   float64
	mu     sync.Mutex
	rng    *rand.Rand
	stop   chan struct{} // closed first on shutdown: held requests return at once
	counts [4]atomic.Int64
	srv    *httptest.Server
}

// Fault kinds, indexes of faultProxy.counts.
const (
	passed = iota
	failed500
	failed503
	held
)

// startFaultProxy proxies to target, failing rate of the calls. Its shutdown is bounded: held
// requests are released and idle connections closed before the server waits for its handlers.
func startFaultProxy(t *testing.T, target string, rate float64, seed uint64) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{rate: rate, rng: rand.New(rand.NewPCG(seed, 16)), stop: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = nil
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		x := p.rng.Float64()
		p.mu.Unlock()
		switch {
		case x < rate/3:
			p.counts[failed500].Add(1)
			s3Error(w, http.StatusInternalServerError, "InternalError")
		case x < 2*rate/3:
			p.counts[failed503].Add(1)
			s3Error(w, http.StatusServiceUnavailable, "SlowDown")
		case x < rate:
			// A timeout: nothing comes back until the client gives up.
			p.counts[held].Add(1)
			select {
			case <-r.Context().Done():
			case <-p.stop:
			}
		default:
			p.counts[passed].Add(1)
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	p.srv.CloseClientConnections()
	p.srv.Close()
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the test</Message></Error>`, code)
}

// TestS3Faults runs a job whose blobs live on a real S3 server (versitygw) behind a proxy that
// fails one call in five: 500, 503, or no answer (the client's 1 s response timeout ends the
// wait; shorter, an 8 MiB part's honest answer on a loaded machine looks like no answer, and
// the eight attempts of the test's own put of a root failed once in CI). Every call is retried: the job completes with every item and document, every blob the
// database references is in the bucket with the bytes its name promises, and after gc the bucket
// holds nothing unreferenced and no unfinished multipart upload.
func TestS3Faults(t *testing.T) {
	if testing.Short() {
		t.Skip("S3 faults: skipped in -short")
	}
	t.Parallel()
	endpoint := versityGW(t, "sluice")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	proxy := startFaultProxy(t, endpoint, 0.2, seed)
	open := func(at string, timeout time.Duration) *blob.S3 {
		s, err := blob.NewS3(t.Context(), blob.S3Config{Bucket: "sluice", Prefix: "faults", Endpoint: at, Region: "us-east-1",
			AccessKey: "sluicekey", SecretKey: "sluicesecret", PathStyle: true, RequestTimeout: timeout, SpoolDir: t.TempDir(),
			MaxBackoff: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	faulty, direct := open(proxy.srv.URL, time.Second), open(endpoint, 30*time.Second)

	ctx := t.Context()
	dir := t.TempDir()
	// A call that fails past the client's retries gives its attempt back for a short wait.
	n, err := node.Open(ctx, node.Config{DataDir: filepath.Join(dir, "data"), Engine: true, Blobs: faulty, UnavailableBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Start(ctx)
	defer n.Stop(10 * time.Second)
	if _, _, err := n.Engine.ApplyWorkflow(ctx, []byte(crashWorkflow), "crash.yaml"); err != nil {
		t.Fatal(err)
	}
	const zips, per = 6, 40
	inputs := filepath.Join(dir, "inputs")
	makeZips(t, inputs, zips, per)
	// One blob large enough for a multipart upload (8 MiB parts).
	big := make([]byte, 20<<20)
	_, _ = rand.NewChaCha8([32]byte{byte(seed)}).Read(big)
	if err := os.WriteFile(filepath.Join(inputs, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	job := jobOfFiles(t, n, "crash", inputs)
	waitFor(t, 3*time.Minute, "the job to end", func() bool {
		j, err := n.Store.JobGet(ctx, job.ID)
		return err == nil && j.State != record.JobRunning
	})
	t.Logf("proxy: %d calls passed, %d answered 500, %d answered 503, %d held until the client gave up",
		proxy.counts[passed].Load(), proxy.counts[failed500].Load(), proxy.counts[failed503].Load(), proxy.counts[held].Load())
	for k := failed500; k <= held; k++ {
		if proxy.counts[k].Load() == 0 {
			t.Errorf("the proxy injected no fault of kind %d: the test tested nothing of it", k)
		}
	}
	if j, _ := n.Store.JobGet(ctx, job.ID); j.State != record.JobComplete {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	items, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if want := zips + zips*per + 1; len(items) != want {
		t.Errorf("%d items, want %d", len(items), want)
	}
	refs := map[string]bool{}
	for _, it := range items {
		wantErr := ""
		if it.Name == "big.bin" {
			wantErr = "unhandled: application/octet-stream" // random bytes: no step takes them
		}
		if it.Error != wantErr || it.State != record.ItemIngested {
			t.Errorf("item %q: %s %q", it.Name, it.State, it.Error)
		}
		for _, sha := range []string{it.BlobSHA256, it.ThumbnailSHA} {
			if sha != "" {
				refs[sha] = true
			}
		}
	}
	outs, err := n.Store.OutputList(ctx, store.OutputListParams{JobID: job.ID, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != zips*per+1 {
		t.Errorf("%d outputs, want %d documents and big.bin's error", len(outs), zips*per)
	}
	checkBlobs(t, direct, refs)
	gcLeavesNoOrphans(t, n, faulty, direct, endpoint)
}

// jobOfFiles creates a sealed job of workflow whose roots are the files in dir, put in the
// node's blob store.
func jobOfFiles(t *testing.T, n *node.Node, workflow, dir string) *record.Job {
	t.Helper()
	ctx := t.Context()
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: workflow, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	var roots []engine.Root
	for i, p := range names {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sha, size, err := n.Blobs.Put(ctx, f)
		f.Close()
		if err != nil {
			t.Fatalf("put %s: %v", p, err)
		}
		roots = append(roots, engine.Root{Ordinal: i, Name: filepath.Base(p), BlobSHA256: sha, Size: size})
	}
	if err := n.Engine.AddRoots(ctx, job, roots); err != nil {
		t.Fatal(err)
	}
	if err := n.Engine.Seal(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	return job
}

// checkBlobs checks that every referenced blob is in the bucket, whole: nothing lost.
func checkBlobs(t *testing.T, direct *blob.S3, refs map[string]bool) {
	t.Helper()
	ctx := t.Context()
	for sha := range refs {
		rc, err := direct.Open(ctx, sha)
		if err != nil {
			t.Errorf("blob %s: %v", sha, err)
			continue
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if got := hex.EncodeToString(h.Sum(nil)); err != nil || got != sha {
			t.Errorf("blob %s reads back as %s (%v)", sha, got, err)
		}
	}
}

// gcLeavesNoOrphans puts an orphan through via, runs gc through via, and checks, asking the
// server directly, that the bucket holds nothing unreferenced and no unfinished multipart upload.
func gcLeavesNoOrphans(t *testing.T, n *node.Node, via, direct *blob.S3, endpoint string) {
	t.Helper()
	ctx := t.Context()
	// A blob nothing references (as a Put whose job was deleted leaves): gc must find and delete
	// it, or the check below would pass on a gc that deletes nothing.
	orphan, _, err := via.Put(ctx, strings.NewReader(fmt.Sprintf("an orphan of %s at %d", t.Name(), time.Now().UnixNano())))
	if err != nil {
		t.Fatalf("put an orphan through the proxy: %v", err)
	}
	// gc through the proxy, then nothing unreferenced is left in the bucket.
	referenced := func(sha string) (bool, error) { return n.Store.BlobIsReferenced(ctx, sha) }
	deleted, _, err := blob.GC(ctx, via, referenced, 0, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("gc through the proxy: %v", err)
	}
	if deleted < 1 {
		t.Errorf("gc deleted nothing; the orphan %s was there to delete", orphan)
	}
	if rc, err := direct.Open(ctx, orphan); err == nil {
		rc.Close()
		t.Errorf("the orphan %s is still in the bucket after gc", orphan)
	}
	var orphans []string
	if err := direct.Walk(ctx, func(sha string, _ int64, _ time.Time) error {
		if ok, err := referenced(sha); err != nil || !ok {
			orphans = append(orphans, sha)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(orphans) > 0 {
		t.Errorf("after gc (which deleted %d), %d unreferenced blobs are left: %v", deleted, len(orphans), orphans)
	}
	if up := directUploads(t, endpoint); up != 0 {
		t.Errorf("%d unfinished multipart uploads left in the bucket", up)
	}
}

// directUploads counts the bucket's unfinished multipart uploads, asking the server directly.
func directUploads(t *testing.T, endpoint string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := blobtest.S3Client(endpoint, "sluicekey", "sluicesecret")
	out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("sluice")})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}
