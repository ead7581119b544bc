package workerproto_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/enginetest/testdomain"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})

	t.Run("head and fragment", func(t *testing.T) {
		job := b.job(t, "input")
		th := b.poll(t)
		if err := th.Post(t.Context(), "0.json", str(childJSON("a"))); err != nil {
			t.Fatal(err)
		}
		if err := b.e.Cancel(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		if err := th.Alive(t.Context()); !errors.Is(err, workerproto.ErrGone) {
			t.Errorf("HEAD after cancel: %v", err)
		}
		if err := th.Post(t.Context(), "heartbeat", nil); !errors.Is(err, workerproto.ErrGone) {
			t.Errorf("heartbeat after cancel: %v", err)
		}
		waitFor(t, 5*time.Second, "task canceled", func() bool {
			ts, _ := b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, State: record.TaskCanceled})
			return len(ts) == 1
		})
	})

	// An unmodified Overview converter pipes its output into one multipart POST: cutting that
	// request on cancel broke the converter's pipe and ended the worker process. The POST is let
	// finish (its parts dropped) and answered 404; HEAD says 404 at once, and the task is
	// canceled while the POST goes on.
	t.Run("open multipart let finish", func(t *testing.T) {
		job := b.job(t, "input")
		th := b.poll(t)
		s := th.Stream(t.Context())
		if err := s.Part("0.json", str(childJSON("a"))); err != nil {
			t.Fatal(err)
		}
		if err := s.Part("progress", str("0.1")); err != nil {
			t.Fatal(err)
		}
		if err := b.e.Cancel(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		if err := th.Alive(t.Context()); !errors.Is(err, workerproto.ErrGone) {
			t.Errorf("HEAD after cancel: %v", err)
		}
		var ts []*record.Task
		waitFor(t, 5*time.Second, "task canceled while its POST is open", func() bool {
			// The server reads on: the next part lets it see the cancel.
			if err := s.Part("heartbeat", nil); err != nil {
				t.Fatalf("heartbeat after cancel: %v (the POST was cut)", err)
			}
			ts, _ = b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, State: record.TaskCanceled})
			return len(ts) == 1
		})
		// The converter goes on writing, unaware: far more than any buffer holds.
		for i := 0; i < 2000; i++ {
			if err := s.Part("heartbeat", strings.NewReader(strings.Repeat("h", 1024))); err != nil {
				t.Fatalf("part %d after cancel: %v (the POST was cut)", i, err)
			}
		}
		if err := s.Part("0.blob", strings.NewReader(strings.Repeat("b", 1<<20))); err != nil {
			t.Fatalf("blob after cancel: %v (the POST was cut)", err)
		}
		if err := s.Part("done", nil); err != nil {
			t.Fatalf("done after cancel: %v", err)
		}
		if err := s.Close(); !errors.Is(err, workerproto.ErrGone) {
			t.Fatalf("the finished POST of a canceled task: %v, want 404", err)
		}
		if kids := b.children(t, b.root(t, job)); len(kids) != 0 {
			t.Errorf("a canceled task's dropped parts made children: %+v", kids)
		}
	})
}

// TestTruncatedBody: a worker killed mid-part keeps the fragments already applied; the task times
// out and is handed out again, and the replay does not duplicate the kept child.
func TestTruncatedBody(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: time.Second})
	job := b.job(t, "input")
	th := b.poll(t)
	s := th.Stream(t.Context())
	for _, f := range [][2]string{{"0.json", childJSON("a")}, {"0.blob", "A"}, {"1.json", childJSON("b")}} {
		if err := s.Part(f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	// Half of 1.blob, then the connection dies.
	s.Part("1.blob", io.MultiReader(strings.NewReader("half of B"), errReader{}))
	s.Abort()
	root := b.root(t, job)
	waitFor(t, 5*time.Second, "child 0 kept", func() bool { return len(b.children(t, root)) == 1 })
	th2 := b.poll(t)
	for _, f := range [][2]string{{"0.json", childJSON("a")}, {"0.blob", "A"}, {"1.json", childJSON("b")}, {"1.blob", "B"}, {"done", ""}} {
		if err := th2.Post(t.Context(), f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
	kids := b.children(t, root)
	if len(kids) != 2 || b.blobText(t, kids[1].BlobSHA256) != "B" {
		t.Errorf("children %+v", kids)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("killed") }

// TestHundredThousandParts streams one multipart request of 100,000 parts: 2,000 children
// (header, blob, text, progress) and heartbeats.
func TestHundredThousandParts(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "input")
	th := b.poll(t)
	s := th.Stream(t.Context())
	const children = 2000
	parts := 0
	part := func(name, body string) {
		parts++
		if err := s.Part(name, str(body)); err != nil {
			t.Fatalf("part %d (%s): %v", parts, name, err)
		}
	}
	for i := range children {
		part(fmt.Sprintf("%d.json", i), childJSON(fmt.Sprintf("in0.pdf/%05d", i)))
		part(fmt.Sprintf("%d.blob", i), fmt.Sprint(i))
		part(fmt.Sprintf("%d.txt", i), fmt.Sprint("text ", i))
		for range 46 {
			part("heartbeat", "")
		}
		if i < children-1 {
			part("progress", fmt.Sprintf(`{"children":{"nProcessed":%d,"nTotal":%d}}`, i+1, children))
		}
	}
	part("done", "")
	if parts != 100000 {
		t.Fatalf("sent %d parts", parts)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 3*time.Minute); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	root := b.root(t, job)
	if root.NChildren != children {
		t.Errorf("n_children %d", root.NChildren)
	}
	p, _ := b.e.Progress(t.Context(), job.ID)
	if p.Items[record.ItemIngested] != children+1 {
		t.Errorf("progress %+v", p)
	}
}

// endless is an n-byte reader that allocates nothing per read.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	for i := range p {
		p[i] = byte(e.n + int64(i))
	}
	e.n -= int64(len(p))
	return len(p), nil
}

// TestMemoryFlat streams 20 MB from each of 50 concurrent workers and checks the heap stays flat:
// blob parts go straight into the blob store, never into memory.
func TestMemoryFlat(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("streams 1 GB")
	}
	// The idle timeout is generous: 50 streams share two cores here.
	b := setup(t, opts{idle: 2 * time.Minute})
	const workers = 50
	size := int64(20 << 20)
	if raceEnabled {
		size = 2 << 20 // the race detector makes 1 GB take minutes; the heap bound still applies
	}
	contents := make([]string, workers)
	for i := range contents {
		contents[i] = fmt.Sprint("root ", i)
	}
	job := b.job(t, contents...)
	tasks := make([]*workerproto.TaskHandle, workers)
	for i := range tasks {
		tasks[i] = b.poll(t)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i, th := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := th.Stream(t.Context())
			if err := s.Part("0.json", str(childJSON(fmt.Sprintf("big%d", i)))); err != nil {
				errs <- err
				return
			}
			if err := s.Part("0.blob", &endless{n: size + int64(i)}); err != nil {
				errs <- err
				return
			}
			s.Part("done", nil)
			errs <- s.Close()
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	growth := int64(peak.Load()) - int64(before.HeapAlloc)
	t.Logf("heap before %d MB, peak %d MB", before.HeapAlloc>>20, peak.Load()>>20)
	if growth > 100<<20 {
		t.Errorf("heap grew by %d MB streaming %d × %d MB", growth>>20, workers, size>>20)
	}
	enginetest.WaitJob(t, b.e, job.ID, time.Minute)
	for _, it := range mustItems(t, b, job) {
		if it.ParentID != 0 && it.Size < size {
			t.Errorf("child %s has %d bytes", it.Name, it.Size)
		}
	}
}

func mustItems(t *testing.T, b *bundle, job *record.Job) []*record.Item {
	items, err := b.db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// TestShellWorker converts tasks end to end with a worker written in sh and curl.
func TestShellWorker(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required")
	}
	b := setup(t, opts{longPoll: 300 * time.Millisecond})
	job := b.job(t, "first input", "second input")
	dir := t.TempDir()
	script := filepath.Join(dir, "worker.sh")
	// One iteration per run: poll, download, upload the upper-cased input as child 0.
	os.WriteFile(script, []byte(`#!/bin/sh
set -e
cd "$(dirname "$0")"
code=$(curl -s -o task.json -w '%{http_code}' -X POST -H 'Content-Type: text/plain' --data-binary '' "$1/Pdf")
[ "$code" = 201 ] || exit 3
url=$(grep -o '"url":"[^"]*"' task.json | head -n 1 | cut -d'"' -f4)
name=$(grep -o '"filename":"[^"]*"' task.json | cut -d'"' -f4)
curl -sf -o input.blob "$url/blob"
tr a-z A-Z < input.blob > out.blob
printf '{"filename":"%s.upper","contentType":"text/plain","languageCode":"en","metadata":{},"wantOcr":false,"wantSplitByPage":false}' "$name" > 0.json
curl -sf -X POST --data-binary '{"children":{"nProcessed":0,"nTotal":1}}' "$url/progress"
curl -sf -F '0.json=<0.json' -F '0.blob=@out.blob' -F '0.txt=<out.blob' -F 'done=' "$url" -o /dev/null -w '%{http_code}' > status
[ "$(cat status)" = 202 ]
`), 0o755)
	for i := 0; i < 2; i++ {
		out, err := exec.CommandContext(t.Context(), "sh", script, b.base).CombinedOutput()
		if err != nil {
			t.Fatalf("worker run %d: %v: %s", i, err, out)
		}
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	var got []string
	for _, it := range mustItems(t, b, job) {
		if it.ParentID != 0 {
			got = append(got, it.Name+"="+b.blobText(t, it.BlobSHA256))
		}
	}
	if strings.Join(got, ",") != "in0.pdf.upper=FIRST INPUT,in1.pdf.upper=SECOND INPUT" {
		t.Errorf("children %v", got)
	}
}

// goWorker converts one task with the Go client; it streams a child per 64 KiB of input.
func goWorker(ctx context.Context, th *workerproto.TaskHandle, slow chan struct{}) error {
	rc, err := th.OpenBlob(ctx)
	if err != nil {
		return err
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	s := th.Stream(ctx)
	for i := 0; i < 3; i++ {
		if err := s.Part(fmt.Sprintf("%d.json", i), str(childJSON(fmt.Sprintf("%s/%d", th.Filename, i)))); err != nil {
			return err
		}
		if err := s.Part(fmt.Sprintf("%d.blob", i), str(fmt.Sprintf("%s #%d", data, i))); err != nil {
			return err
		}
		if i == 1 && slow != nil {
			slow <- struct{}{}
			<-ctx.Done() // killed here
			s.Abort()
			return ctx.Err()
		}
		s.Part("progress", str(fmt.Sprintf("0.%d", i+3)))
	}
	s.Part("done", nil)
	return s.Close()
}

// TestGoWorkerKilled: a Go worker killed mid-task leaves the task to be handed out again after the
// idle timeout, and the final state equals that of an undisturbed run.
func TestGoWorkerKilled(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: time.Second})
	calm := b.job(t, "same input")
	if err := goWorker(t.Context(), b.poll(t), nil); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitJob(t, b.e, calm.ID, 10*time.Second)

	killed := b.job(t, "same input")
	ctx, kill := context.WithCancel(t.Context())
	slow := make(chan struct{})
	done := make(chan error)
	th := b.poll(t)
	go func() { done <- goWorker(ctx, th, slow) }()
	<-slow
	kill()
	<-done
	if err := goWorker(t.Context(), b.poll(t), nil); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitJob(t, b.e, killed.ID, 10*time.Second)

	summary := func(job *record.Job) string {
		var out []string
		for _, it := range mustItems(t, b, job) {
			out = append(out, fmt.Sprintf("%s %s %s %q %d", it.Name, it.State, it.BlobSHA256, it.Error, it.NChildren))
		}
		return strings.Join(out, "\n")
	}
	if a, k := summary(calm), summary(killed); a != k {
		t.Errorf("undisturbed run:\n%s\nkilled run:\n%s", a, k)
	}
	tasks, _ := b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: killed.ID, State: record.TaskComplete})
	for _, tk := range tasks {
		if tk.Step == "convert" && tk.Attempt != 2 {
			t.Errorf("convert completed at attempt %d, want 2", tk.Attempt)
		}
	}
}

func TestRunCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{longPoll: 300 * time.Millisecond, testDomain: true})
	job := b.job(t, "convert me")
	dir := t.TempDir()
	script := filepath.Join(dir, "do-convert")
	// The single-file contract: input on stdin and in input.blob, task JSON as the last argument,
	// progress on stdout, outputs named as fragments.
	os.WriteFile(script, []byte(`#!/bin/sh
set -e
echo c0/1
cat > stdin.copy
cmp -s stdin.copy input.blob
echo b5/10
echo "$1" | grep -q '"filename":"in0.pdf"'
printf '{"filename":"in0.pdf/out.pdf","contentType":"application/pdf","languageCode":"en","metadata":{},"wantOcr":false,"wantSplitByPage":false}' > 0.json
tr a-z A-Z < input.blob > 0.blob
printf 'converted text' > 0.txt
printf 'PNG' > 0-thumbnail.png
printf '{"domain":"test","key":"k1","payload":1}' > 1.write.json
printf '{"domain":"test","key":"k0","payload":0}' > 0.write.json
echo 0.9
`), 0o755)
	err := workerproto.RunCommand(t.Context(), workerproto.CommandConfig{Server: b.base, Action: "Pdf", Argv: []string{script},
		TempDir: dir, Once: true})
	if err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	kids := b.children(t, b.root(t, job))
	if len(kids) != 1 || b.blobText(t, kids[0].BlobSHA256) != "CONVERT ME" || kids[0].Text != "converted text" || kids[0].ThumbnailType != "image/png" {
		t.Fatalf("children %+v", kids)
	}
	// Its N.write.json files are the task's domain writes.
	rows, err := testdomain.Rows(t.Context(), b.db, job.ID)
	if err != nil || len(rows) != 2 || rows[0].Key != "k0" || rows[0].Payload != "0" || rows[1].Key != "k1" {
		t.Fatalf("domain rows %+v %v", rows, err)
	}

	// A line that is not progress is the error; a failing command reports its status.
	for _, tt := range []struct{ body, want string }{
		{"echo 'file is encrypted'\nsleep 5\n", "file is encrypted"},
		{"exit 7\n", "exited with status code 7"},
	} {
		job := b.job(t, "x")
		os.WriteFile(script, []byte("#!/bin/sh\n"+tt.body), 0o755)
		err := workerproto.RunCommand(t.Context(), workerproto.CommandConfig{Server: b.base, Action: "Pdf", Argv: []string{script},
			TempDir: dir, Once: true})
		if err != nil {
			t.Fatal(err)
		}
		enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
		if root := b.root(t, job); !strings.Contains(root.Error, tt.want) {
			t.Errorf("error %q, want %q", root.Error, tt.want)
		}
	}
}

func TestPollAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	srv := workerproto.New(workerproto.Config{Backend: workerproto.NewBackend(b.e, b.blobs, b.w), LongPoll: 50 * time.Millisecond,
		Auth: func(token string) (string, error) {
			switch token {
			case "":
				return "", workerproto.ErrNoToken
			case "worker":
				return "w1", nil
			case "reader":
				return "", workerproto.ErrForbidden
			}
			return "", workerproto.ErrBadToken
		}})
	h := srv.Handler()
	for _, tt := range []struct {
		name, auth, query string
		want              int
	}{
		{"missing", "", "", 401},
		{"wrong", "Bearer nope", "", 401},
		{"reader", "Bearer reader", "", 403},
		{"bearer", "Bearer worker", "", 204},
		{"query", "", "?token=worker", 204},
	} {
		req, _ := http.NewRequest(http.MethodPost, "/v1/workers/Pdf"+tt.query, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		rec := &recorder{h: http.Header{}}
		h.ServeHTTP(rec, req)
		if rec.code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, rec.code, tt.want)
		}
	}
}

type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return len(b), nil
}
func (r *recorder) WriteHeader(c int) { r.code = c }

// TestSingleChildProgress: a converter making one child (the usual PDF) reports progress while it
// works. Before, nothing of it reached the job's fraction until the task ended; each progress
// fragment must now move it, and the fraction must never pass 1.
func TestSingleChildProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "input")
	th := b.poll(t)
	fraction := func() float64 {
		p, err := b.e.Progress(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return p.Fraction
	}
	if err := th.Post(t.Context(), "0.json", str(childJSON("a.pdf"))); err != nil {
		t.Fatal(err)
	}
	last := fraction()
	for _, p := range []string{"0.25", `{"bytes":{"nProcessed":1,"nTotal":2}}`, "0.9"} {
		if err := th.Post(t.Context(), "progress", str(p)); err != nil {
			t.Fatal(err)
		}
		f := fraction()
		if f <= last || f > 1 {
			t.Errorf("after progress %s the job's fraction is %.3f, before %.3f: want it to grow, up to 1", p, f, last)
		}
		last = f
	}
	for _, f := range [][2]string{{"0.blob", "A"}, {"done", ""}} {
		if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
	if f := fraction(); f != 1 {
		t.Errorf("finished job's fraction %.3f", f)
	}
}

// TestProgressNeverBacksUp: a remote converter reports half its work done and then creates
// children from it. The job's fraction must not move back when the reported progress turns into
// children (it did: 0.5 → 0.075), nor at any later fragment, and it reaches 1 at the end only.
func TestProgressNeverBacksUp(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "input")
	th := b.poll(t)
	last := 0.0
	step := func(name, body string) {
		t.Helper()
		if err := th.Post(t.Context(), name, str(body)); err != nil {
			t.Fatal(err)
		}
		p, err := b.e.Progress(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Fraction < last || (p.State == "running" && p.Fraction >= 1) {
			t.Errorf("after %s: fraction %.3f (%s), before %.3f", name, p.Fraction, p.State, last)
		}
		last = p.Fraction
	}
	step("progress", "0.5")
	step("0.json", childJSON("a.pdf"))
	step("0.blob", "A")
	step("progress", "0.6")
	step("1.json", childJSON("b.pdf"))
	step("1.blob", "B")
	step("progress", "0.9")
	step("done", "")
	enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
	if p, _ := b.e.Progress(t.Context(), job.ID); p.Fraction != 1 {
		t.Errorf("finished job's fraction %.3f", p.Fraction)
	}
}
