package workerproto_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/sqlite"
	"github.com/sluice-project/sluice/internal/worker"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// serverEnv carries the server child process its data dir.
const serverEnv = "SLUICE_BACKLOG_SERVER_CHILD"

const (
	killServerBound = 100
	killServerJob   = "backlog-remote-kill"
)

// killServerChildren is how many children TestBacklogRemoteServerKilled's worker streams:
// SLUICE_TEST_BACKLOG_KILL_CHILDREN sets it (100000 for the measured run in
// docs/performance.md). Defaults to 1200.
func killServerChildren(t *testing.T) int {
	return sizeFromEnv(t, "SLUICE_TEST_BACKLOG_KILL_CHILDREN", 1200, 12)
}

// TestBacklogRemoteServerKilled: a remote worker streams 1,200 children (see
// [killServerChildren]) to a server (a child process) whose backlog bound is 100 and whose
// downstream step is always behind, so the server holds the POST unread most of the time. The
// server is SIGKILLed three times in that state (once 5/24, 10/24 and 15/24 of the children are
// committed), restarted, and the worker polls the task again and replays its children from the
// first; a last run ends the job. The children committed before each kill stay, the replays
// make none twice, none is lost: the set an uninterrupted run makes.
func TestBacklogRemoteServerKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	n := killServerChildren(t)
	// The waits grow with the children: 2 and 3 minutes per 1,200.
	scale := time.Duration(max(1, n/1200))
	start := time.Now()
	committed := func() int {
		db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "sluice.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		job, err := db.JobGetByKey(ctx, killServerJob)
		if err != nil {
			return 0
		}
		zero := int64(0)
		roots, err := db.ItemList(ctx, store.ItemListParams{JobID: job.ID, ParentID: &zero, Limit: 1})
		if err != nil || len(roots) == 0 {
			return 0
		}
		return roots[0].NChildren
	}
	for round := range 4 {
		cmd, base, ended := startServerChild(t, dir)
		th := pollServer(t, base)
		sctx, cancel := context.WithCancel(ctx)
		sent := make(chan error, 1)
		go func() { sent <- streamChildren(sctx, th, n) }()
		if round < 3 {
			want := (round + 1) * n * 5 / 24
			poll.Until(t, scale*2*time.Minute, fmt.Sprintf("%d children committed", want), func() (bool, string) {
				n := committed()
				return n >= want, fmt.Sprintf("%d committed", n)
			})
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			cancel()
			<-sent // cut off with the server
			t.Logf("kill %d: %d of %d children committed (%s)", round+1, committed(), n, time.Since(start).Round(time.Second))
			continue
		}
		if err := <-sent; err != nil {
			t.Fatalf("the last run's stream: %v", err)
		}
		select {
		case <-ended:
		case <-time.After(scale * 3 * time.Minute):
			t.Fatal("the job did not end")
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		cancel()
	}
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "sluice.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	job, err := db.JobGetByKey(ctx, killServerJob)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != record.JobComplete {
		t.Fatalf("job %s (%s), want complete", job.State, job.Error)
	}
	zero := int64(0)
	roots, err := db.ItemList(ctx, store.ItemListParams{JobID: job.ID, ParentID: &zero, Limit: 1})
	if err != nil || len(roots) != 1 {
		t.Fatalf("roots %v, %v", roots, err)
	}
	kids, err := db.ItemList(ctx, store.ItemListParams{JobID: job.ID, ParentID: &roots[0].ID, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != n || roots[0].NChildren != n || roots[0].Error != "" {
		t.Fatalf("%d children, n_children %d, error %q; want %d", len(kids), roots[0].NChildren, roots[0].Error, n)
	}
	for i, k := range kids {
		if k.Ordinal != i || k.Name != fmt.Sprintf("c%06d", i) || k.State != record.ItemIngested {
			t.Fatalf("child %d: ordinal %d %q %s", i, k.Ordinal, k.Name, k.State)
		}
	}
	took := time.Since(start)
	t.Logf("%d children, each once, in %s (%.0f children/s, three kills included)", n, took.Round(time.Second), float64(n)/took.Seconds())
}

// streamChildren sends n children (the same each run) and done in one multipart POST.
func streamChildren(ctx context.Context, th *workerproto.TaskHandle, n int) error {
	s := th.Stream(ctx)
	for i := range n {
		if err := s.Part(fmt.Sprintf("%d.json", i), str(childJSON(fmt.Sprintf("c%06d", i)))); err != nil {
			return err
		}
		if err := s.Part(fmt.Sprintf("%d.blob", i), str(fmt.Sprintf("%06d", i))); err != nil {
			return err
		}
	}
	if err := s.Part("done", str("")); err != nil {
		return err
	}
	return s.Close()
}

// pollServer polls base until it hands out the task.
func pollServer(t *testing.T, base string) *workerproto.TaskHandle {
	t.Helper()
	c := &workerproto.Client{Server: base}
	var th *workerproto.TaskHandle
	poll.Until(t, time.Minute, "the task handed out", func() (bool, string) {
		var err error
		th, err = c.Poll(t.Context(), "Pdf")
		if err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatal(err)
		}
		return th != nil, fmt.Sprint(err)
	})
	return th
}

// startServerChild starts the server child on dir and returns it, its poll URL base, and a
// channel closed when it prints that the job ended.
func startServerChild(t *testing.T, dir string) (*exec.Cmd, string, <-chan struct{}) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "url ") {
		t.Fatalf("server child: %q, %v", sc.Text(), sc.Err())
	}
	base := strings.TrimPrefix(sc.Text(), "url ")
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
			if sc.Text() == "done" {
				close(ended)
			}
		}
	}()
	return cmd, base, ended
}

// runServerChild is the server child process: an engine, a worker and the worker protocol's
// server on the data dir, the job created (or found), its address printed, "done" printed once
// the job ended; it runs until it is killed.
func runServerChild() int {
	if err := serverChild(context.Background(), os.Getenv(serverEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "server child:", err)
		return 1
	}
	select {}
}

func serverChild(ctx context.Context, dir string) error {
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "sluice.db")})
	if err != nil {
		return err
	}
	blobs, err := blob.OpenDir(filepath.Join(dir, "blobs"), blob.DirOptions{SmallMax: blob.DefaultSmallMax})
	if err != nil {
		return err
	}
	downstream := enginetest.Func("route", func(ctx context.Context, t *action.Task, out action.Output) error {
		if t.Item.ParentID == 0 {
			out.Emit("root")
			return nil
		}
		sum := sha256.Sum256([]byte(t.Item.Name))
		for range 5000 {
			sum = sha256.Sum256(sum[:])
		}
		return nil
	}).WithSpec(func(s *action.Spec) { s.Outcomes = []string{"root"} })
	cat := &action.Catalog{}
	cat.Register(downstream, workerproto.RemoteAction())
	var w *worker.Worker
	var srv *workerproto.Server
	ended := make(chan struct{}, 1)
	e := engine.New(engine.Config{Store: db, Catalog: cat, MaxBacklog: killServerBound,
		OnReady:  func(qs []string) { w.Ready(qs); srv.Wake() },
		OnJobEnd: func(int64, record.JobState) { ended <- struct{}{} }})
	w = worker.New(worker.Config{Engine: e, Blobs: blobs, TempDir: dir, PollInterval: 20 * time.Millisecond,
		Concurrency: map[string]int{"route": 2}})
	srv = workerproto.New(workerproto.Config{Backend: workerproto.NewBackend(e, blobs, w), IdleTimeout: time.Minute,
		LongPoll: time.Second, PollInterval: 20 * time.Millisecond})
	if _, err := e.Reclaim(ctx, engine.ReclaimParams{All: true}); err != nil {
		return err
	}
	w.Start(ctx)
	srv.Start(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, srv.Handler()) }()
	if _, _, err := e.ApplyWorkflow(ctx, fmt.Appendf(nil, workflowTmpl, 10), "conv.yaml"); err != nil {
		return err
	}
	job, _, err := e.CreateJob(ctx, engine.CreateJobParams{Workflow: "conv", Key: killServerJob, Open: true})
	if err != nil {
		return err
	}
	sha, size, err := blobs.Put(ctx, strings.NewReader("archive"))
	if err != nil {
		return err
	}
	if err := e.AddRoots(ctx, job, []engine.Root{{Name: "archive", ContentType: "application/zip", BlobSHA256: sha, Size: size}}); err != nil {
		return err
	}
	if err := e.Seal(ctx, job.ID); err != nil {
		return err
	}
	fmt.Printf("url http://%s/v1/workers\n", ln.Addr())
	go func() {
		for {
			j, err := db.JobGet(ctx, job.ID)
			if err == nil && j.State != record.JobRunning {
				fmt.Println("done")
				return
			}
			select {
			case <-ended:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return nil
}
