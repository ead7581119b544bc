// Package workerproto implements Sluice's remote worker protocol (shared/spec/worker-protocol.md):
// the HTTP server side that hands tasks of remotely served actions to workers and applies the
// fragments they stream back, a Go [Client] for writing workers, and [RunCommand], which serves
// one action by running a local command per task under Overview's single-file converter contract.
//
// The wire format is Overview's converter protocol, so Overview converters run unchanged. Sluice
// fixes the reference's gaps on purpose: attempts are bounded, replayed children are suppressed in
// the database (by parent and ordinal), progress is 64-bit, task POSTs have no request timeout, and
// the poll URL requires a worker token.
package workerproto

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/queue"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Backend is what the server needs from the sluice process: the engine, the blob store, and the
// process's single group-commit writer ([worker.Worker.Do]) through which every write goes.
type Backend interface {
	Engine() *engine.Engine
	Blobs() blob.Store
	// Do runs fn in the process's writer and waits for it to commit.
	Do(ctx context.Context, fn func(t *engine.Tx) error) error
}

// Doer runs writes in a group-commit writer; [worker.Worker] implements it.
type Doer interface {
	Do(ctx context.Context, fn func(t *engine.Tx) error) error
}

// NewBackend returns a [Backend] made of an engine, a blob store and a writer (usually the
// process's *worker.Worker).
func NewBackend(e *engine.Engine, blobs blob.Store, w Doer) Backend {
	return &backend{e: e, b: blobs, w: w}
}

type backend struct {
	e *engine.Engine
	b blob.Store
	w Doer
}

func (b *backend) Engine() *engine.Engine { return b.e }
func (b *backend) Blobs() blob.Store      { return b.b }
func (b *backend) Do(ctx context.Context, fn func(t *engine.Tx) error) error {
	return b.w.Do(ctx, fn)
}

// Errors an [Auth] function returns.
var (
	// ErrNoToken means the request carried no token: 401.
	ErrNoToken = errors.New("workerproto: missing token")
	// ErrBadToken means the token is unknown: 401.
	ErrBadToken = errors.New("workerproto: invalid token")
	// ErrForbidden means the token is valid but may not serve workers: 403.
	ErrForbidden = errors.New("workerproto: token may not serve workers")
)

// Auth checks a worker's token (from `Authorization: Bearer` or `?token=`; empty when absent) and
// returns an id naming the token in lease owners and logs, or one of [ErrNoToken], [ErrBadToken],
// [ErrForbidden].
type Auth func(token string) (tokenID string, err error)

// Config configures a [Server].
type Config struct {
	Backend Backend
	Logger  *slog.Logger
	// Auth checks tokens on poll URLs. Nil accepts every request (tests only). Task URLs need no
	// token: their unguessable id is the credential, as the spec allows.
	Auth Auth
	// Prefix is the path the poll URLs are mounted under. Defaults to "/v1/workers".
	Prefix string
	// LongPoll is how long a poll waits for a task before answering 204. Defaults to 15s.
	LongPoll time.Duration
	// IdleTimeout is how long a handed-out task may go with no request touching it and no request
	// open before it is handed out again. Defaults to 15s.
	IdleTimeout time.Duration
	// LeaseDuration is the database lease of a handed-out task, renewed while this process serves
	// it; it only matters when this process dies (or stalls writing that long). Defaults to 2m.
	LeaseDuration time.Duration
	// PollInterval bounds how long a waiting poll goes without looking at the queue when nobody
	// calls [Server.Wake] (other processes, retries whose backoff ended). Defaults to 1s.
	PollInterval time.Duration
	// MaxText caps a child's text in characters. Defaults to textclean.DefaultMaxChars.
	MaxText int
	// PresignTTL is the lifetime of pre-signed blob URLs when the blob store can make them.
	// Defaults to 1h.
	PresignTTL time.Duration
}

// Server serves the worker protocol. Create it with [New], mount [Server.Handler], Start it and
// Stop it; it is safe for concurrent use.
type Server struct {
	cfg      Config
	b        Backend
	log      *slog.Logger
	instance string

	mu       sync.Mutex
	sessions map[string]*session // by protocol id
	byTask   map[int64]*session
	clients  map[string]*clientState // by client key (see Clients)
	wakeCh   chan struct{}           // closed and replaced by Wake
	// draining is set by Drain or Stop: no task is handed out any more.
	draining bool

	sha1mu sync.Mutex
	sha1s  map[string]string // blob sha256 → sha1, bounded

	leases leaseRounds

	jobsMu sync.Mutex
	jobs   map[int64]jobFacts // by job id, bounded (see Server.jobFacts)

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New returns a server; it panics when cfg.Backend is nil (a wiring mistake).
func New(cfg Config) *Server {
	if cfg.Backend == nil {
		panic("workerproto: Config.Backend is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/v1/workers"
	}
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	if cfg.LongPoll <= 0 {
		cfg.LongPoll = 15 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 15 * time.Second
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 2 * time.Minute
	}
	if cfg.LeaseDuration < 2*cfg.IdleTimeout {
		cfg.LeaseDuration = 2 * cfg.IdleTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.PresignTTL <= 0 {
		cfg.PresignTTL = time.Hour
	}
	return &Server{cfg: cfg, b: cfg.Backend, log: cfg.Logger, instance: randomHex(6),
		sessions: map[string]*session{}, byTask: map[int64]*session{}, clients: map[string]*clientState{}, wakeCh: make(chan struct{}),
		sha1s: map[string]string{}, jobs: map[int64]jobFacts{}}
}

// Start starts the idle reaper and the lease renewer. Stop stops them.
func (s *Server) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.reap(ctx) }()
	go func() { defer s.wg.Done(); s.renew(ctx) }()
}

// Drain stops handing out tasks (polls answer 204 at once) and waits until the remote workers
// have finished the tasks they hold or ctx ends. Requests about tasks already handed out are
// served as before, so call it while the HTTP server still serves, then [Server.Stop].
func (s *Server) Drain(ctx context.Context) {
	held := s.stopHandingOut()
	if held == 0 {
		return
	}
	args := []any{"tasks", held}
	if dl, ok := ctx.Deadline(); ok {
		args = append(args, "drain", time.Until(dl).Round(time.Millisecond).String())
	}
	s.log.Info("stopping: no new hand-outs; remote workers may finish their tasks", args...)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.Sessions() > 0 {
		select {
		case <-ctx.Done():
			s.log.Warn("drain ended with tasks still held by remote workers", "tasks", s.Sessions())
			return
		case <-tick.C:
		}
	}
	s.log.Info("remote workers finished every task they held", "tasks", held)
}

// stopHandingOut makes polls answer 204 from now on and returns how many tasks are handed out.
func (s *Server) stopHandingOut() int {
	s.mu.Lock()
	s.draining = true
	held := len(s.byTask)
	s.mu.Unlock()
	s.Wake() // waiting polls answer now
	return held
}

// Stop stops handing out tasks and the background goroutines, then releases the leases of the
// tasks remote workers still hold, without spending an attempt: the next start (or another
// process) takes them at once, and their workers' later requests get 404, as for a canceled
// task. A task whose result is being applied is left to finish. The log names each task
// released. Call it while the writer of the [Backend] still runs. Stop is idempotent.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.stopHandingOut()
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		s.mu.Lock()
		held := make([]*session, 0, len(s.byTask))
		for _, ss := range s.byTask {
			held = append(held, ss)
		}
		s.mu.Unlock()
		for _, ss := range held {
			ss.markCanceled() // a request in progress stops
			if !ss.claim(endCanceled) {
				continue // its result is being applied
			}
			s.release(ss)
			s.log.Warn("remote task released by the stop: its worker's later requests get 404; it runs again without spending an attempt",
				"action", ss.name, "task_id", ss.task.ID, "job_id", ss.task.JobID, "item_id", ss.task.ItemID, "attempt", ss.task.Attempt,
				"client", ss.client)
		}
	})
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Wake tells waiting polls that tasks may be ready; call it from engine.Config.OnReady. It never
// blocks.
func (s *Server) Wake() {
	s.mu.Lock()
	close(s.wakeCh)
	s.wakeCh = make(chan struct{})
	s.mu.Unlock()
}

// CancelTasks tells the server that the tasks' jobs were canceled or failed; call it from
// engine.Config.OnCancel. Their workers get 404 on their next request, and an open multipart POST
// is ended early with 404.
func (s *Server) CancelTasks(ids []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if ss := s.byTask[id]; ss != nil {
			ss.markCanceled()
		}
	}
}

// Handler returns the HTTP handler of the protocol, routed under Config.Prefix. It imposes no
// timeouts: the http.Server must not set ReadTimeout or WriteTimeout for these paths (a multipart
// POST may stream for hours); IdleTimeout of at least 60s is fine.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	p := s.cfg.Prefix
	mux.HandleFunc("POST "+p+"/{action}", s.handlePoll)
	mux.HandleFunc("GET "+p+"/{action}/{id}", s.handleTask)
	mux.HandleFunc("GET "+p+"/{action}/{id}/blob", s.handleBlob)
	mux.HandleFunc("POST "+p+"/{action}/{id}", s.handleMultipart)
	mux.HandleFunc("POST "+p+"/{action}/{id}/{fragment}", s.handleFragment)
	// The task's read port and blob store, for built-in actions run by remote workers (port.go).
	mux.HandleFunc("GET "+p+"/{action}/{id}/task", s.handleActionTask)
	mux.HandleFunc("POST "+p+"/{action}/{id}/core/{query}", s.handleCoreRead)
	mux.HandleFunc("POST "+p+"/{action}/{id}/read/{domain}/{query}", s.handleDomainRead)
	mux.HandleFunc("POST "+p+"/{action}/{id}/blobs", s.handleBlobPut)
	return mux
}

// Sessions returns the number of tasks currently handed out (for metrics).
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byTask)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newID returns a random UUID (version 4): a task id is unguessable and fresh on every hand-out.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// maxPollBody bounds how much of a poll's (ignored) body is read.
const maxPollBody = 64 << 10

// RefuseBody makes the server answer r without reading any more of its body: the connection is
// closed after the response instead of being drained for reuse (net/http would otherwise read up
// to 256 KiB of a body the handler left, waiting for it as long as the client dawdles). Call it
// before writing the response of a request whose body must not be read, such as one that failed
// authentication.
func RefuseBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	// A read deadline in the past fails the drain net/http attempts when the body is closed.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// TokenFromRequest returns the token of r: `Authorization: Bearer <token>`, else `?token=`.
func TokenFromRequest(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if t, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
		if t, ok := strings.CutPrefix(h, "bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return r.URL.Query().Get("token")
}

func (s *Server) wakeChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wakeCh
}

// handlePoll long-polls the action's queue and hands out one task.
// The token is checked before any of the body is read: a client without one cannot make the
// server read (or wait for) its body.
func (s *Server) handlePoll(w http.ResponseWriter, r *http.Request) {
	tokenID := "anonymous"
	if s.cfg.Auth != nil {
		id, err := s.cfg.Auth(TokenFromRequest(r))
		switch {
		case errors.Is(err, ErrForbidden):
			RefuseBody(w)
			writeError(w, http.StatusForbidden, "forbidden", "this token may not serve workers")
			return
		case err != nil:
			RefuseBody(w)
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a worker token is required")
			return
		}
		tokenID = id
	}
	// The body is ignored. Reading it to its end lets the server notice a client that hangs up
	// during the long poll; one longer than maxPollBody is left unread (and the connection closed).
	if r.Body != nil {
		if n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, maxPollBody+1)); n > maxPollBody {
			RefuseBody(w)
		}
	}
	name := r.PathValue("action")
	client := s.pollStarted(tokenID, r, name)
	defer s.pollEnded(client)
	ctx := r.Context()
	deadline := time.NewTimer(s.cfg.LongPoll)
	defer deadline.Stop()
	owner := "remote:" + tokenID + "@" + s.instance
	for {
		wake := s.wakeChan()
		if s.isDraining() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		ss, err := s.lease(ctx, name, owner, client)
		if err != nil {
			s.log.Error("lease remote task", "action", name, "error", err)
			writeError(w, http.StatusInternalServerError, "internal", "could not lease a task")
			return
		}
		if ss != nil {
			body, err := s.taskJSON(ctx, r, ss)
			if err == nil && ctx.Err() == nil {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				ss.trace.setHeader(w.Header())
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write(body)
				return
			}
			// A refused or failed hand-out never loses the task: give it back unspent.
			s.release(ss)
			if ctx.Err() != nil {
				return
			}
			s.log.Error("hand out remote task", "action", name, "task_id", ss.task.ID, "error", err)
			writeError(w, http.StatusInternalServerError, "internal", "could not hand out a task")
			return
		}
		poll := time.NewTimer(s.cfg.PollInterval)
		select {
		case <-ctx.Done():
			poll.Stop()
			return
		case <-deadline.C:
			poll.Stop()
			w.WriteHeader(http.StatusNoContent)
			return
		case <-wake:
		case <-poll.C:
		}
		poll.Stop()
	}
}

// maxKeyedLeases bounds the tasks one poll leases and settles itself (parked on a claim, done with
// a claim's result, snoozed by a limit) before it answers.
const maxKeyedLeases = 16

// lease leases a task of the queue "remote:<name>" to hand out and registers its session. A task
// of a step with a claim or a limit is handed out only once it holds them, as an in-process
// worker runs its action only then (see keyed); those it settles itself, it leases past.
func (s *Server) lease(ctx context.Context, name, owner, client string) (*session, error) {
	for range maxKeyedLeases {
		ss, settled, err := s.leaseOne(ctx, name, owner, client)
		if err != nil || !settled {
			return ss, err
		}
	}
	return nil, nil
}

// leaseOne leases one task; settled is true when keyed settled it without handing it out.
func (s *Server) leaseOne(ctx context.Context, name, owner, client string) (ss *session, settled bool, err error) {
	// The lease commits even if the poll is abandoned meanwhile; the task is then released.
	task, it, err := s.leases.take(ctx, name, owner, s.leaseRound)
	if task == nil {
		return nil, false, err
	}
	if err != nil {
		ss := &session{srv: s, task: task}
		s.release(ss)
		return nil, false, err
	}
	if done, err := s.keyed(ctx, task, it, owner); done || err != nil {
		if err != nil {
			s.release(&session{srv: s, task: task})
		}
		return nil, done, err
	}
	ss = newSession(s, name, owner, task, it)
	var created time.Time
	if f, err := s.jobFacts(ctx, task.JobID); err == nil {
		created = f.created
	}
	ss.trace.start(ctx, task, created)
	ss.client = client
	s.mu.Lock()
	if s.draining {
		// Leased as the drain began: given back, as Stop would.
		s.mu.Unlock()
		s.release(ss)
		return nil, false, nil
	}
	s.sessions[ss.id] = ss
	s.byTask[task.ID] = ss
	s.mu.Unlock()
	s.log.Debug("remote task handed out", "action", name, "task_id", task.ID, "item_id", it.ID, "attempt", task.Attempt, "id", ss.id)
	return ss, false, nil
}

// leaseRound leases up to n tasks of the action name as owner, in one transaction of the
// process's writer, and reads their items (see leaseRounds).
func (s *Server) leaseRound(ctx context.Context, name, owner string, n int) ([]*record.Task, []*record.Item, error) {
	var got []*record.Task
	err := s.b.Do(ctx, func(t *engine.Tx) error {
		now := t.Now()
		var err error
		got, err = t.Executor().TaskLease(ctx, store.TaskLeaseParams{Queue: queue.Remote(name).String(), Limit: n, Owner: owner,
			Now: now, LeaseUntil: now.Add(s.cfg.LeaseDuration)})
		return err
	})
	if err != nil || len(got) == 0 {
		return nil, nil, err
	}
	items, err := s.b.Engine().TaskItems(ctx, got)
	return got, items, err
}

// release gives a leased task back without spending its attempt.
func (s *Server) release(ss *session) {
	ss.trace.end("released")
	s.forget(ss)
	err := s.b.Do(context.Background(), func(t *engine.Tx) error {
		_, err := t.Executor().TaskFinish(context.Background(), store.TaskFinishParams{ID: ss.task.ID, Attempt: ss.task.Attempt,
			State: record.TaskReady, Refund: true, Now: t.Now()})
		return err
	})
	if err != nil {
		s.log.Error("release remote task", "task_id", ss.task.ID, "error", err)
	}
	s.Wake()
}

// forget removes a session from the maps: its id answers 404 from now on.
func (s *Server) forget(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[ss.id] == ss {
		delete(s.sessions, ss.id)
	}
	if s.byTask[ss.task.ID] == ss {
		delete(s.byTask, ss.task.ID)
	}
}

// unbind removes the session from the task index once its task is finished; its id stays known
// (ended) until the idle timeout passes, so late fragments are drained with 202.
func (s *Server) unbind(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTask[ss.task.ID] == ss {
		delete(s.byTask, ss.task.ID)
	}
}

func (s *Server) session(r *http.Request) *session {
	s.mu.Lock()
	ss := s.sessions[r.PathValue("id")]
	s.mu.Unlock()
	if ss == nil || ss.name != r.PathValue("action") {
		return nil
	}
	return ss
}

// reap hands out again the tasks whose worker went quiet, every tenth of the idle timeout.
func (s *Server) reap(ctx context.Context) {
	tick := time.NewTicker(max(s.cfg.IdleTimeout/10, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		var idle []*session
		s.mu.Lock()
		for _, ss := range s.sessions {
			if ss.expire(now) {
				idle = append(idle, ss)
			}
		}
		s.mu.Unlock()
		for _, ss := range idle {
			s.forget(ss)
			if !ss.isFinished() {
				ss.timeout(ctx)
			}
		}
	}
}

// renew extends the database leases of the tasks this server has handed out.
func (s *Server) renew(ctx context.Context) {
	tick := time.NewTicker(s.cfg.LeaseDuration / 6)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// The tasks of the sessions still bound, by owner: a task whose session ended is left
		// to expire, even when other sessions of its owner run.
		owners := map[string][]int64{}
		s.mu.Lock()
		for id, ss := range s.byTask {
			owners[ss.owner] = append(owners[ss.owner], id)
		}
		s.mu.Unlock()
		if len(owners) == 0 {
			continue
		}
		until := s.b.Engine().Now().Add(s.cfg.LeaseDuration)
		err := s.b.Do(ctx, func(t *engine.Tx) error {
			for o, ids := range owners {
				if _, err := t.Executor().TaskRenewLeases(ctx, store.TaskRenewLeasesParams{Owner: o, TaskIDs: ids, Until: until}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			s.log.Error("renew remote leases", "error", err)
		}
	}
}

// blobSHA1 returns the SHA-1 of a blob (the protocol's task JSON carries it), reading the blob
// once and remembering the answer.
func (s *Server) blobSHA1(ctx context.Context, sha256 string) (string, error) {
	s.sha1mu.Lock()
	v, ok := s.sha1s[sha256]
	s.sha1mu.Unlock()
	if ok {
		return v, nil
	}
	rc, err := s.b.Blobs().Open(ctx, sha256)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	h := sha1.New()
	if _, err := io.Copy(h, rc); err != nil {
		return "", err
	}
	v = hex.EncodeToString(h.Sum(nil))
	s.sha1mu.Lock()
	if len(s.sha1s) > 10000 {
		clear(s.sha1s)
	}
	s.sha1s[sha256] = v
	s.sha1mu.Unlock()
	return v, nil
}
