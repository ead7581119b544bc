package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
	"github.com/sluice-project/sluice/remote"
)

// A path is one of the ways a task runs today. Each forces its way through the action's spec or
// the step's action, as a user's workflow would.
type path string

const (
	// local: an ordinary lease by the process's worker.
	local path = "local"
	// inline: the engine runs the action in the transaction that makes its task ready
	// (action.Policy.Inline).
	inline path = "inline"
	// held: a batch of brief tasks run inside the transaction that holds their leases
	// (action.Policy.Brief).
	held path = "held"
	// cached: a replay of the conversion cache (action.Policy.Cacheable): the roots share their
	// content, so one run of the action answers them all.
	cached path = "cached"
	// remote: a worker polling over the HTTP worker protocol (`action: remote`).
	remotePath path = "remote"
)

var paths = []path{local, inline, held, cached, remotePath}

// gated reports whether the path's step cannot itself be held running — it runs inside a
// transaction (inline, held) and blocking it would stall the process's writer — so a test that
// needs work left in flight (cancel, SIGTERM, SIGKILL) holds a local gate step before it.
func (p path) gated() bool { return p == inline || p == held }

// workflow returns the matrix workflow for the path: the step under test, `work`, then the
// documents workflow's collector, which turns each item into what a user sees (a document, or an
// error with its reason). With event set, work waits for the external event "go", found by the
// item's metadata "id" (or a body's "id" through correlate:).
func (p path) workflow(event, gate bool) string {
	var b strings.Builder
	b.WriteString("name: matrix\n")
	if event {
		b.WriteString("external: [go]\n")
	}
	b.WriteString("steps:\n")
	need := "start"
	if event {
		need = "go"
	}
	if gate && event {
		panic("lifecycle: an event test holds no gate")
	}
	if gate {
		fmt.Fprintf(&b, "  gate: {action: gate, needs: [%s]}\n", need)
		need = "gated"
	}
	act := "work"
	with := ""
	if p == remotePath {
		act, with = "remote", ", with: {name: Work}"
	}
	corr := ""
	if event {
		corr = ", correlate: {go: {path: id, key: id}}"
	}
	fmt.Fprintf(&b, "  work: {action: %s, needs: [%s], attempts: 1%s%s}\n", act, need, with, corr)
	b.WriteString("  collect: {action: ingest, needs: [children.done]}\n")
	return b.String()
}

// behaviour says what the fake actions do with each item; it is shared by the in-process
// actions and the remote worker. Safe for concurrent use.
type behaviour struct {
	mu      sync.Mutex
	fail    map[string]string // item name → the permanent error work returns
	block   map[string]bool   // item names whose work (or gate) waits for release or its context
	release chan struct{}
	// started receives the name of each item whose work or gate starts (never blocks).
	started func(name string)
	runs    map[string]int // work's runs by item name
	gone    int            // remote tasks answered 404 while held
	// rows are the states work saw its own task's row in, by item name (see probe).
	rows map[string]record.TaskState
	db   store.Store
}

func newBehaviour() *behaviour {
	return &behaviour{fail: map[string]string{}, block: map[string]bool{}, release: make(chan struct{}),
		runs: map[string]int{}, rows: map[string]record.TaskState{}, started: func(string) {}}
}

func (b *behaviour) setFail(name, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if msg == "" {
		delete(b.fail, name)
	} else {
		b.fail[name] = msg
	}
}

func (b *behaviour) setBlock(names ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range names {
		b.block[n] = true
	}
}

// unblock lets every blocked item go on, and blocks none from now on.
func (b *behaviour) unblock() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.block = map[string]bool{}
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *behaviour) runCount(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[name]
}

func (b *behaviour) totalRuns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.runs {
		n += r
	}
	return n
}

// hold waits while the item is blocked: until unblock or ctx ends.
func (b *behaviour) hold(ctx context.Context, name string) error {
	b.mu.Lock()
	blocked, release := b.block[name], b.release
	b.mu.Unlock()
	if !blocked {
		return nil
	}
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probe records the state of the task's row as the action runs, read on a connection of its
// own: a held batch runs its tasks with their rows still ready (their leases are the rows'
// locks), an ordinary lease with its row running.
func (b *behaviour) probe(ctx context.Context, t *action.Task) {
	b.mu.Lock()
	db := b.db
	b.mu.Unlock()
	state := record.TaskState("unknown")
	if db != nil {
		if row, err := db.TaskGet(ctx, t.ID); err == nil {
			state = row.State
		}
	}
	b.mu.Lock()
	b.rows[t.Item.Name] = state
	b.mu.Unlock()
}

// work runs the step under test: it fails the item when told to, waits while it is blocked
// (never on a gated path: the gate holds those) and succeeds otherwise.
func (b *behaviour) work(ctx context.Context, name string) error {
	b.mu.Lock()
	b.runs[name]++
	msg := b.fail[name]
	b.mu.Unlock()
	b.started(name)
	if err := b.hold(ctx, name); err != nil {
		return err
	}
	if msg != "" {
		return action.Permanentf("%s", msg)
	}
	return nil
}

type fakeAction struct {
	spec   action.Spec
	policy action.Policy
	run    func(ctx context.Context, t *action.Task, out action.Output) error
}

func (f *fakeAction) Spec() action.Spec     { return f.spec }
func (f *fakeAction) Policy() action.Policy { return f.policy }
func (f *fakeAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	return f.run(ctx, t, out)
}

// actions returns the path's in-process actions: work (not for the remote path, whose work is
// the remote worker's) and gate.
func (p path) actions(b *behaviour) []action.Action {
	gate := &fakeAction{spec: action.Spec{Name: "gate", Outcomes: []string{"gated"}, Concurrency: 16}, policy: action.Policy{NoTempDir: true},
		run: func(ctx context.Context, t *action.Task, out action.Output) error {
			b.started(t.Item.Name)
			if err := b.hold(ctx, t.Item.Name); err != nil {
				return err
			}
			out.Emit("gated")
			return nil
		}}
	spec := action.Spec{Name: "work", Concurrency: 16}
	policy := action.Policy{NoTempDir: true}
	switch p {
	case inline:
		policy.Inline = action.InlineAlways
	case held:
		policy.Brief = true
	case cached:
		policy.Cacheable = true
		policy.NoTempDir = false
	}
	acts := []action.Action{gate}
	if p != remotePath {
		acts = append(acts, &fakeAction{spec: spec, policy: policy, run: func(ctx context.Context, t *action.Task, out action.Output) error {
			if p == local || p == held {
				b.probe(ctx, t)
			}
			if err := b.work(ctx, t.Item.Name); err != nil {
				return err
			}
			out.SetMetadata(map[string]any{"worked": true})
			return nil
		}})
	}
	return acts
}

// where names a store and its data dir: for SQLite the node's own embedded database in the
// data dir (with its lock and the reclaim a restart makes), for PostgreSQL a schema.
type where struct {
	Driver string `json:"driver"` // "sqlite" or "postgres"
	Data   string `json:"data"`
	Store  string `json:"store"` // enginetest.ChildStore's description, for postgres
}

// running is a node started for a path: its engine and worker, and for the remote path a
// worker-protocol server and remote workers polling it.
type running struct {
	n    *node.Node
	stop func()
}

// startNode opens and starts a node on w with the path's actions, as `sluice serve` does:
// workers in process, the worker protocol served over HTTP, and for the remote path four remote
// workers polling it. Its stop function stops it as serve does on SIGTERM: no new leases,
// running tasks given drain to finish, then canceled and released. killable says another
// process is to take the node's tasks after it is killed (testSignal's children).
func startNode(ctx context.Context, w where, p path, b *behaviour, drain time.Duration, killable bool) (*running, error) {
	cfg := node.Config{DataDir: w.Data, Engine: true, Actions: p.actions(b), PollInterval: 20 * time.Millisecond,
		GCInterval: time.Hour, Drain: drain}
	if w.Driver == "postgres" {
		desc := w.Store
		cfg.OpenStore = func(ctx context.Context) (store.Store, error) { return enginetest.OpenChildStore(ctx, desc) }
		if killable {
			// No lock proves a killed process dead: its tasks come back when their leases expire.
			// Only a node to be killed has them short: a node that lives keeps the default, as a
			// lease of 2 s expired under CI's load (renewals every 0.7 s, none committed in time)
			// and an op's one attempt became two, the first "worker lost".
			cfg.LeaseDuration = 2 * time.Second
		}
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.db = n.Store
	b.mu.Unlock()
	opened(n.Engine, n.Store)
	backend := workerproto.NewBackend(n.Engine, n.Blobs, n.Worker)
	// Short leases, as for the node's own tasks: a remote task a killed server handed out comes
	// back within seconds, not its default two minutes.
	wp := workerproto.New(workerproto.Config{Backend: backend, PollInterval: 20 * time.Millisecond, LongPoll: time.Second,
		IdleTimeout: 3 * time.Second, LeaseDuration: 6 * time.Second})
	n.Listen(node.Listener{Wake: wp.Wake, Cancel: wp.CancelTasks})
	hs := httptest.NewServer(wp.Handler())
	rctx, cancel := context.WithCancel(ctx)
	n.Start(rctx)
	wp.Start(rctx)
	// The remote workers are other processes in truth: they stop first, so that the server's
	// shutdown waits for no request of theirs.
	wctx, stopWorkers := context.WithCancel(ctx)
	var workers sync.WaitGroup
	if p == remotePath {
		c := &remote.Client{Server: hs.URL + "/v1/workers"}
		for range 4 {
			workers.Add(1)
			go func() { defer workers.Done(); remoteWorker(wctx, c, b) }()
		}
	}
	return &running{n: n, stop: func() {
		stopWorkers()
		workers.Wait()
		hs.CloseClientConnections()
		hs.Close()
		wp.Stop()
		n.Stop(n.Drain())
		cancel()
		n.Close()
	}}, nil
}

// remoteWorker is a remote worker of the action Work: it answers each task done, or its
// item's error, and while the item is blocked it keeps the task alive until released or the
// server answers 404.
func remoteWorker(ctx context.Context, c *remote.Client, b *behaviour) {
	for ctx.Err() == nil {
		th, err := c.Poll(ctx, "Work")
		if err != nil || th == nil {
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
			continue
		}
		name := th.Filename
		b.mu.Lock()
		b.runs[name]++
		msg, blocked, release := b.fail[name], b.block[name], b.release
		b.mu.Unlock()
		b.started(name)
		if blocked {
			tick := time.NewTicker(50 * time.Millisecond)
		alive:
			for {
				select {
				case <-ctx.Done():
					tick.Stop()
					return
				case <-release:
					break alive
				case <-tick.C:
					if err := th.Alive(ctx); errors.Is(err, remote.ErrGone) {
						b.mu.Lock()
						b.gone++
						b.mu.Unlock()
						tick.Stop()
						goto next
					}
				}
			}
			tick.Stop()
		}
		if msg != "" {
			_ = th.Post(ctx, "error", strings.NewReader(msg))
		} else {
			_ = th.Post(ctx, "done", nil)
		}
	next:
	}
}

// roots are the matrix job's roots: count items r0…, each with metadata id = its name and the
// content content(name).
func roots(ctx context.Context, n *node.Node, count int, content func(name string) string) ([]engine.Root, error) {
	rs := make([]engine.Root, count)
	for i := range rs {
		name := fmt.Sprintf("r%d", i)
		rs[i] = engine.Root{Ordinal: i, Name: name, ContentType: "text/plain", Metadata: map[string]any{"id": name}}
		sha, size, err := n.Blobs.Put(ctx, strings.NewReader(content(name)))
		if err != nil {
			return nil, err
		}
		rs[i].BlobSHA256, rs[i].Size = sha, size
	}
	return rs, nil
}

// contents returns the roots' contents for the path: each its own, but on the cached path one
// content for all except the unique ones (one conversion answers the rest).
func (p path) contents(unique ...string) func(string) string {
	return func(name string) string {
		if p != cached || slices.Contains(unique, name) {
			return "content of " + name
		}
		return "one content"
	}
}

// startJob applies the workflow and creates the job (idempotently, by key) with its roots.
func startJob(ctx context.Context, n *node.Node, src string, count int, content func(string) string) (*record.Job, error) {
	if _, _, err := n.Engine.ApplyWorkflow(ctx, []byte(src), "matrix.yaml"); err != nil {
		return nil, err
	}
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "matrix", Key: "matrix", Open: true})
	if err != nil {
		return nil, err
	}
	rs, err := roots(ctx, n, count, content)
	if err != nil {
		return nil, err
	}
	if err := n.Engine.AddRoots(ctx, job, rs); err != nil {
		return nil, err
	}
	if err := n.Engine.Seal(ctx, job.ID); err != nil {
		return nil, err
	}
	return job, nil
}

func mkdir(dir string) (string, error) {
	d := filepath.Join(dir, "data")
	return d, os.MkdirAll(d, 0o755)
}
