package workerproto_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/enginetest/testdomain"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/sqlite"
	"github.com/sluice-project/sluice/internal/worker"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// route is an in-process action that sends roots to the remote step, so children (which also get
// start) are not converted again. With tokens, it takes one per child before it ends: the
// downstream step the test paces.
type route struct{ tokens chan struct{} }

func (route) Spec() action.Spec { return action.Spec{Name: "route", Outcomes: []string{"root"}} }
func (r route) Run(ctx context.Context, t *action.Task, out action.Output) error {
	if t.Item.ParentID == 0 {
		out.Emit("root")
		return nil
	}
	if r.tokens != nil {
		select {
		case <-r.tokens:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type bundle struct {
	e     *engine.Engine
	w     *worker.Worker
	db    store.Store
	blobs *blob.Dir
	srv   *workerproto.Server
	http  *httptest.Server
	base  string // poll URL base
}

type opts struct {
	idle     time.Duration
	attempts int
	longPoll time.Duration
	// maxText is the server's Config.MaxText.
	maxText int
	// testDomain registers the test domain (package testdomain) before the worker starts.
	testDomain bool
	// maxBacklog is the engine's Config.MaxBacklog.
	maxBacklog int
	// tokens, when set, paces the route step of children (see route).
	tokens chan struct{}
	// open, when set, opens the store (enginetest.ForEachDriver); else it is SQLite.
	open enginetest.Open
	// serverBlobs, when set, wraps the blob store the server is given.
	serverBlobs func(*blob.Dir) blob.Store
}

const workflowTmpl = `name: conv
steps:
  route: {action: route, needs: [start], progress_weight: 0.05}
  convert: {action: remote, needs: [root], attempts: %d, with: {name: Pdf}}
`

func setup(t testing.TB, o opts) *bundle {
	t.Helper()
	if o.idle == 0 {
		o.idle = 10 * time.Second
	}
	if o.attempts == 0 {
		o.attempts = 3
	}
	if o.longPoll == 0 {
		o.longPoll = 5 * time.Second
	}
	dir := t.TempDir()
	var db store.Store
	if o.open != nil {
		db = o.open(t) // closed when the test ends
	} else {
		sdb, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dir, "sluice.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sdb.Close() })
		db = sdb
	}
	// Small blobs in small.db, as a node keeps them (node.go): the server stages a child's blob
	// there and one commit makes many durable.
	blobs, err := blob.OpenDir(filepath.Join(dir, "blobs"), blob.DirOptions{SmallMax: blob.DefaultSmallMax})
	if err != nil {
		t.Fatal(err)
	}
	cat := &action.Catalog{}
	cat.Register(route{tokens: o.tokens}, workerproto.RemoteAction())
	var w *worker.Worker
	var srv *workerproto.Server
	e := engine.New(engine.Config{Store: db, Catalog: cat, MaxBacklog: o.maxBacklog,
		OnReady:  func(qs []string) { w.Ready(qs); srv.Wake() },
		OnCancel: func(ids []int64) { w.CancelTasks(ids); srv.CancelTasks(ids) }})
	w = worker.New(worker.Config{Engine: e, Blobs: blobs, TempDir: dir, PollInterval: 50 * time.Millisecond})
	var sb blob.Store = blobs
	if o.serverBlobs != nil {
		sb = o.serverBlobs(blobs)
	}
	srv = workerproto.New(workerproto.Config{Backend: workerproto.NewBackend(e, sb, w), IdleTimeout: o.idle,
		LongPoll: o.longPoll, PollInterval: 50 * time.Millisecond, MaxText: o.maxText, Logger: testLogger(t)})
	if o.testDomain {
		if err := testdomain.Register(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	srv.Start(ctx)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Stop()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		w.Stop(sctx)
		cancel()
		blobs.Close()
	})
	if _, _, err := e.ApplyWorkflow(t.Context(), fmt.Appendf(nil, workflowTmpl, o.attempts), "conv.yaml"); err != nil {
		t.Fatal(err)
	}
	return &bundle{e: e, w: w, db: db, blobs: blobs, srv: srv, http: hs, base: hs.URL + "/v1/workers"}
}

// job creates a job with one root per content.
func (b *bundle) job(t testing.TB, contents ...string) *record.Job {
	t.Helper()
	job, _, err := b.e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "conv"})
	if err != nil {
		t.Fatal(err)
	}
	var roots []engine.Root
	for i, c := range contents {
		sha, size, err := b.blobs.Put(t.Context(), strings.NewReader(c))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, engine.Root{Ordinal: i, Name: fmt.Sprintf("in%d.pdf", i), ContentType: "application/pdf", BlobSHA256: sha, Size: size})
	}
	if err := b.e.AddRoots(t.Context(), job, roots); err != nil {
		t.Fatal(err)
	}
	return job
}

func (b *bundle) client() *workerproto.Client { return &workerproto.Client{Server: b.base} }

// poll polls until it gets a task.
func (b *bundle) poll(t testing.TB) *workerproto.TaskHandle {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		th, err := b.client().Poll(t.Context(), "Pdf")
		if err != nil {
			t.Fatal(err)
		}
		if th != nil {
			return th
		}
	}
	t.Fatal("no task handed out")
	return nil
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, func() (bool, string) { return cond(), "" })
}

func (b *bundle) root(t *testing.T, job *record.Job) *record.Item {
	t.Helper()
	zero := int64(0)
	items, err := b.db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, ParentID: &zero, WithText: true})
	if err != nil || len(items) == 0 {
		t.Fatalf("roots: %v %v", items, err)
	}
	return items[0]
}

func (b *bundle) children(t *testing.T, parent *record.Item) []*record.Item {
	t.Helper()
	items, err := b.db.ItemList(t.Context(), store.ItemListParams{JobID: parent.JobID, ParentID: &parent.ID, WithText: true, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Ordinal < items[j].Ordinal })
	return items
}

func (b *bundle) blobText(t *testing.T, sha string) string {
	t.Helper()
	rc, err := b.blobs.Open(t.Context(), sha)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	return string(data)
}

func childJSON(name string) string {
	return fmt.Sprintf(`{"filename":%q,"contentType":"application/pdf","languageCode":"en","metadata":{"k":"v"},"wantOcr":false,"wantSplitByPage":false}`, name)
}

// rawPost posts body to url with a content type and returns the status.
func rawPost(t *testing.T, url, contentType string, body io.Reader) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func status(t *testing.T, method, url string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func str(s string) io.Reader { return bytes.NewBufferString(s) }
