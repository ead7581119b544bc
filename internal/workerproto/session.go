package workerproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/textclean"
	"github.com/sluice-project/sluice/remote"
)

// Session states (spec: "Order").
const (
	stateStart = iota
	stateChild
	stateEnd
)

// How a finished session answers later requests.
const (
	endDone     = "done"     // done or error applied: POSTs are drained and answered 202
	endCanceled = "canceled" // 404
)

// Payload limits: whole-payload fragments are read into memory, so each is bounded.
const (
	maxHeaderBytes   = 16 << 20
	maxProgressBytes = 4 << 10
	maxErrorBytes    = 64 << 10
	// maxWriteBytes bounds one N.write.json, which is read into memory; maxWritesBytes all of
	// a task's, which wait for done past a megabyte in a temp file (engine.Effects.AddWrite):
	// it bounds the disk they take.
	maxWriteBytes  = 1 << 20
	maxWritesBytes = 1 << 30
	// flushChildren and flushTextBytes bound the children kept in memory before they are
	// written in one transaction.
	flushChildren  = 256
	flushTextBytes = 16 << 20
)

var (
	errTruncated = errors.New("request body ended early")
	errCanceled  = errors.New("canceled")
	// errChildFailed ends a wait of admit whose flush failed the task.
	errChildFailed = errors.New("a child failed the task")
)

// pendingChild is the child being written: its header arrived, it is created in the database
// when it is closed (by the next header or done), with everything its payloads carried.
type pendingChild struct {
	hdr       *header
	ordinal   int
	from      float64
	blobSHA   string
	size      int64
	text      *string
	thumbSHA  string
	thumbType string
	// waits wait for its blob and thumbnail to be durable (see session.stage).
	waits []func() error
}

// session is one hand-out of a task: a protocol id bound to (task id, attempt).
type session struct {
	srv     *Server
	id      string
	name    string // the remote action name, as in the poll URL
	owner   string
	client  string // the key of the remote worker it was handed to (see Clients)
	task    *record.Task
	item    *record.Item
	started time.Time

	mu         sync.Mutex
	json       []byte
	lastActive time.Time
	open       int  // requests in progress
	posting    bool // a fragment-carrying POST is open
	finished   bool // the task's result is applied (or being applied)
	ended      string
	gone       bool // forgotten: its id answers 404
	canceled   bool
	cancelCh   chan struct{}
	checkedAt  time.Time
	trace      sessionTrace // the attempt's span

	// The state machine; touched only by the request holding posting, or by the one finalizer.
	state     int
	curN      int
	next      int
	child     *pendingChild
	progress  float64
	edge      float64
	batch     []*engine.NewChild
	batchText int
	// staged waits for the blobs of the children in batch to be durable: a child's row is
	// written only after its blobs are (see durable).
	staged []func() error
	// effects holds the task's domain writes (N.write.json), committed with its result on done;
	// writeN is the N of the last one (a write whose N is not above it is a replay), and
	// writeBytes their size.
	effects    engine.Effects
	writeN     int
	writeBytes int
	// backlog admits each new child against the job's backlog bound (engine.Backlog): the
	// request that carries it is not read on while the job's backlog is at the bound.
	backlog *engine.Backlog
}

func newSession(s *Server, name, owner string, task *record.Task, it *record.Item) *session {
	now := time.Now()
	return &session{srv: s, id: newID(), name: name, owner: owner, task: task, item: it, started: s.b.Engine().Now(),
		lastActive: now, cancelCh: make(chan struct{}), writeN: -1, backlog: s.b.Engine().Backlog(task, it)}
}

// enter registers a request on the session; post asks for the exclusive fragment POST. ok is
// false when the session is gone; conflict when another POST is open.
func (ss *session) enter(post bool) (ok, conflict bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.gone {
		return false, false
	}
	if post && ss.posting {
		ss.lastActive = time.Now()
		return true, true
	}
	ss.open++
	ss.lastActive = time.Now()
	if post {
		ss.posting = true
	}
	return true, false
}

func (ss *session) leave(post bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.open--
	ss.lastActive = time.Now()
	if post {
		ss.posting = false
	}
}

// expire marks the session gone when nothing touched it for the idle timeout.
func (ss *session) expire(now time.Time) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.gone || ss.open > 0 || now.Sub(ss.lastActive) < ss.srv.cfg.IdleTimeout {
		return false
	}
	ss.gone = true
	return true
}

func (ss *session) isFinished() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.finished
}

func (ss *session) endedAs() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.ended
}

// claim makes the caller the one that applies the task's result.
func (ss *session) claim(ended string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.finished {
		return false
	}
	ss.finished, ss.ended = true, ended
	ss.trace.end(ended)
	return true
}

func (ss *session) markCanceled() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.canceled {
		ss.canceled = true
		close(ss.cancelCh)
	}
}

// checkCanceled reports whether the task's job is no longer running, looking at the database at
// most every 200ms (and at once when force is set) besides the pushes of [Server.CancelTasks].
func (ss *session) checkCanceled(ctx context.Context, force bool) bool {
	ss.mu.Lock()
	if ss.canceled {
		ss.mu.Unlock()
		return true
	}
	now := time.Now()
	if !force && now.Sub(ss.checkedAt) < 200*time.Millisecond {
		ss.mu.Unlock()
		return false
	}
	ss.checkedAt = now
	ss.mu.Unlock()
	job, err := ss.srv.b.Engine().TaskJob(ctx, ss.task.JobID)
	if err != nil {
		return false
	}
	if job.State != record.JobRunning {
		ss.markCanceled()
		return true
	}
	return false
}

// cancelNow ends a canceled task: the unfinished child is discarded, children already closed are
// kept, and the task ends canceled.
func (ss *session) cancelNow(ctx context.Context) {
	if !ss.claim(endCanceled) {
		return
	}
	ss.child = nil
	ss.finalize(ctx, &engine.Result{Err: errCanceled})
}

// timeout ends an attempt whose worker went quiet: the task is handed out again at once, or,
// with its attempts spent, fails with "<Action> worker failed N times: <reason>".
func (ss *session) timeout(ctx context.Context) {
	if !ss.claim(endCanceled) {
		return
	}
	ss.child = nil
	reason := fmt.Sprintf("no request for %s (worker lost)", ss.srv.cfg.IdleTimeout)
	res := &engine.Result{Lost: true, Err: errors.New(reason)}
	if ss.task.Attempt >= ss.task.MaxAttempts {
		res.Err = action.Permanent(fmt.Errorf("%s worker failed %d times: %s", ss.name, ss.task.Attempt, reason))
	}
	ss.srv.log.Info("remote task timed out", "action", ss.name, "task_id", ss.task.ID, "attempt", ss.task.Attempt)
	ss.finalize(ctx, res)
	ss.srv.Wake()
}

// fail ends the task with an item error (bad fragments, the worker's own error).
func (ss *session) fail(ctx context.Context, err error) error {
	if !ss.claim(endDone) {
		return nil
	}
	ss.child = nil
	ss.state = stateEnd
	return ss.finalize(ctx, &engine.Result{Err: err})
}

// finalize writes the closed children and the task's result in one transaction.
func (ss *session) finalize(ctx context.Context, res *engine.Result) error {
	ctx = context.WithoutCancel(ctx)
	if err := ss.durable(); err != nil && res.Err == nil {
		// The closed children are dropped with their blobs; the attempt fails and is retried.
		res = &engine.Result{Err: err}
	}
	res.Task, res.Owner, res.Started = ss.task, ss.owner, ss.started
	res.Children = append(ss.batch, res.Children...)
	ss.batch, ss.batchText = nil, 0
	err := ss.srv.b.Do(ctx, func(t *engine.Tx) error { return t.Apply(res) })
	if errors.Is(err, engine.ErrNondeterministic) {
		res.Err, res.Lost, res.Children = err, false, nil
		err = ss.srv.b.Do(ctx, func(t *engine.Tx) error { return t.Apply(res) })
	}
	if err != nil {
		// The result cannot be committed (its effects cannot be applied): it fails the task
		// in a transaction of its own, rather than leaving it running.
		ss.srv.log.Error("commit remote result; the task fails", "action", ss.name, "task_id", ss.task.ID, "error", err)
		fail := engine.FailedCommit(res, err)
		err = ss.srv.b.Do(ctx, func(t *engine.Tx) error { return t.Apply(fail) })
	}
	ss.srv.b.Engine().ClearProgress(ss.task.ID)
	ss.backlog.Close()
	ss.srv.unbind(ss)
	if err != nil {
		ss.srv.log.Error("finish remote task", "action", ss.name, "task_id", ss.task.ID, "error", err)
		return err
	}
	return nil
}

// flush writes the closed children, once their blobs are durable. A blob that could not be made
// durable fails the task (it is retried), as it fails an attempt in process.
func (ss *session) flush(ctx context.Context) error {
	if len(ss.batch) == 0 {
		return nil
	}
	if err := ss.durable(); err != nil {
		return ss.fail(ctx, err)
	}
	batch := ss.batch
	ss.batch, ss.batchText = nil, 0
	err := ss.srv.b.Do(context.WithoutCancel(ctx), func(t *engine.Tx) error { return t.CreateChildren(batch) })
	if errors.Is(err, engine.ErrNondeterministic) {
		return ss.fail(ctx, err)
	}
	if err == nil {
		ss.backlog.Settled(len(batch))
	}
	return err
}

// stage stores a blob of the current child as Put does, but on a store that can stage it
// ([blob.Stager]) returns before it is durable: the child's wait is kept, and the flush that
// writes the child waits first. One commit of the blob store (one fsync) then serves many small
// children of a flush, instead of one each, as for an in-process action's children
// (worker/output.go): BenchmarkStreamChildren, docs/performance.md.
func (ss *session) stage(ctx context.Context, c *pendingChild, r io.Reader, soon bool) (string, int64, error) {
	blobs := ss.srv.b.Blobs()
	st, ok := blobs.(blob.Stager)
	if !ok {
		return blobs.Put(ctx, r)
	}
	// The blob's wait outlives the request that carried it (a worker may POST each fragment on
	// its own), so it is staged without the request's context; the request's end or the task's
	// cancel still stops the reading of its body.
	sha, n, wait, err := st.Stage(context.WithoutCancel(ctx), &ctxReader{ctx: ctx, r: r}, soon)
	if err != nil {
		return "", 0, err
	}
	c.waits = append(c.waits, wait)
	return sha, n, nil
}

// ctxReader reads r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// durable waits until the blobs of the closed children are durable. When one is not, the
// closed children are dropped (their rows cannot be written) and the error is returned.
func (ss *session) durable() error {
	staged := ss.staged
	ss.staged = nil
	for _, wait := range staged {
		if err := wait(); err != nil {
			ss.batch, ss.batchText = nil, 0
			return fmt.Errorf("store the blobs of the children: %w", err)
		}
	}
	return nil
}

// admit waits, before the child at ordinal ss.next is read, while the job's backlog is at its
// bound (engine.Backlog): the request body is not read meanwhile, so the worker's POST stalls
// in TCP (Overview's stall). The children closed so far are written first, so that they count
// as committed and a kill meanwhile loses none. A replayed child (one the item had when the
// task was handed out) adds nothing to the backlog and does not wait.
func (ss *session) admit(ctx context.Context) error {
	if ss.next < ss.item.NChildren {
		return nil
	}
	return ss.backlog.Admit(ctx, func(waiting bool) error {
		if !waiting {
			return nil
		}
		if err := ss.flush(ctx); err != nil {
			return err
		}
		if ss.state == stateEnd {
			return errChildFailed
		}
		return nil
	})
}

func (ss *session) logicError(format string, args ...any) error {
	return action.Permanent(fmt.Errorf("logic error in %s: %s", ss.name, fmt.Sprintf(format, args...)))
}

// closeChild queues the current child for writing, with its progress slice ending at to.
func (ss *session) closeChild(ctx context.Context, to float64) error {
	c := ss.child
	ss.child = nil
	if c.blobSHA == "" {
		return ss.fail(ctx, ss.logicError("tried to write child without blob data"))
	}
	to = max(to, c.from)
	h := c.hdr
	opts := map[string]any{"ocr": h.WantOcr, "split_by_page": h.WantSplitByPage}
	if h.LanguageCode != "" {
		opts["lang"] = h.LanguageCode
	}
	nc := engine.ChildOf(ss.task, c.ordinal, engine.Child{Name: h.Filename, ContentType: h.ContentType, BlobSHA256: c.blobSHA, Size: c.size,
		Metadata: h.Metadata, Options: opts, Text: c.text, ThumbnailSHA: c.thumbSHA, ThumbnailType: c.thumbType}, c.from, to)
	nc.MaxText = ss.maxText()
	ss.batch = append(ss.batch, nc)
	ss.staged = append(ss.staged, c.waits...)
	if c.text != nil {
		ss.batchText += len(*c.text)
	}
	ss.edge = to
	if len(ss.batch) >= flushChildren || ss.batchText >= flushTextBytes {
		return ss.flush(ctx)
	}
	return nil
}

// trackReader remembers a read error of the request body, to tell a truncated request from a
// failure of the server's own storage.
type trackReader struct {
	r   io.Reader
	err error
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit))
	if err != nil {
		return nil, errTruncated
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, errTruncated
	}
	return b, nil
}

// apply applies one fragment and consumes its payload. It returns errTruncated when the payload
// could not be read in full, errCanceled when the task was canceled meanwhile, or an internal
// error; bad fragments end the task and return nil.
func (ss *session) apply(ctx context.Context, name string, body io.Reader) error {
	tr := &trackReader{r: body}
	body = tr
	if ss.state == stateEnd {
		_, err := io.Copy(io.Discard, body)
		if err != nil {
			return errTruncated
		}
		return nil
	}
	f := parseFragment(name)
	switch f.kind {
	case fragHeartbeat:
		if _, err := io.Copy(io.Discard, body); err != nil {
			return errTruncated
		}
	case fragProgress:
		b, err := readLimited(body, maxProgressBytes)
		if err != nil {
			return err
		}
		p, perr := parseProgress(b)
		if perr != nil {
			ss.srv.log.Warn("ignore unparsable progress", "action", ss.name, "task_id", ss.task.ID, "error", perr)
			return nil
		}
		ss.progress = max(ss.progress, p)
		ss.srv.b.Engine().ReportProgress(ss.task, ss.item, ss.progress)
	case fragHeader:
		b, err := readLimited(body, maxHeaderBytes)
		if err != nil {
			return err
		}
		if ss.state == stateChild && f.n <= ss.curN {
			return nil // a replayed header
		}
		h, herr := parseHeader(b)
		if herr != nil {
			return ss.fail(ctx, action.Permanent(fmt.Errorf("step error: %v", herr)))
		}
		if ss.state == stateChild {
			if err := ss.closeChild(ctx, ss.progress); err != nil || ss.state == stateEnd {
				return err
			}
		}
		if err := ss.admit(ctx); err != nil {
			if errors.Is(err, errChildFailed) {
				return nil // the task failed on a child written before (fail ended it)
			}
			return err
		}
		ss.child = &pendingChild{hdr: h, ordinal: ss.next, from: ss.edge}
		ss.next++
		ss.curN, ss.state = f.n, stateChild
	case fragBlob, fragText, fragThumb, fragInherit:
		if ss.state == stateStart {
			if _, err := io.Copy(io.Discard, body); err != nil {
				return errTruncated
			}
			return ss.fail(ctx, ss.logicError("unexpected fragment %s before a child header", name))
		}
		if f.kind != fragInherit && f.n < ss.curN {
			if _, err := io.Copy(io.Discard, body); err != nil { // a replayed payload of an earlier child
				return errTruncated
			}
			return nil
		}
		c := ss.child
		switch f.kind {
		case fragBlob:
			if c.blobSHA != "" {
				if _, err := io.Copy(io.Discard, body); err != nil {
					return errTruncated
				}
				return nil
			}
			// Read back soon: the child is detected and converted by the next steps.
			sha, size, err := ss.stage(ctx, c, body, true)
			if err != nil {
				return ss.bodyErr(ctx, tr, fmt.Errorf("store blob of child %d: %w", c.ordinal, err))
			}
			c.blobSHA, c.size = sha, size
		case fragInherit:
			if _, err := io.Copy(io.Discard, body); err != nil {
				return errTruncated
			}
			if c.ordinal != 0 {
				return ss.fail(ctx, ss.logicError("tried to inherit blob when child index != 0"))
			}
			if c.blobSHA == "" {
				c.blobSHA, c.size = ss.item.BlobSHA256, ss.item.Size
			}
		case fragText:
			b, err := readLimited(body, int64(ss.maxText())*4)
			if err != nil {
				return err
			}
			// Sanitised and capped at maxText characters where every child is ([engine.NewChild]).
			t := string(b)
			c.text = &t
		case fragThumb:
			if c.thumbSHA != "" {
				if _, err := io.Copy(io.Discard, body); err != nil {
					return errTruncated
				}
				return nil
			}
			sha, _, err := ss.stage(ctx, c, body, false)
			if err != nil {
				return ss.bodyErr(ctx, tr, fmt.Errorf("store thumbnail of child %d: %w", c.ordinal, err))
			}
			c.thumbSHA, c.thumbType = sha, f.thumbType
		}
	case fragDone:
		if _, err := io.Copy(io.Discard, body); err != nil {
			return errTruncated
		}
		if ss.state == stateChild {
			if err := ss.closeChild(ctx, 1); err != nil || ss.state == stateEnd {
				return err
			}
		}
		if !ss.claim(endDone) {
			return nil
		}
		ss.state = stateEnd
		return ss.finalize(ctx, &engine.Result{Effects: ss.effects})
	case fragWrite:
		b, err := readLimited(body, maxWriteBytes)
		if err != nil {
			return err
		}
		if f.n <= ss.writeN {
			return nil // a replayed write
		}
		return ss.write(ctx, f.n, b)
	case fragResult:
		b, err := readLimited(body, maxResultBytes+1)
		if err != nil {
			return err
		}
		if len(b) > maxResultBytes {
			return ss.fail(ctx, action.Permanent(fmt.Errorf("step error: result.json: over %d MiB", maxResultBytes>>20)))
		}
		if ss.state == stateChild {
			return ss.fail(ctx, ss.logicError("result.json after child headers (a built-in action's children travel in it)"))
		}
		return ss.applyResult(ctx, b)
	case fragError:
		b, err := readLimited(body, maxErrorBytes)
		if err != nil {
			return err
		}
		msg := textclean.Sanitize(string(b), 4000)
		if msg == "" {
			msg = ss.name + " worker reported an empty error"
		}
		return ss.fail(ctx, action.Permanent(errors.New(msg)))
	default:
		if _, err := io.Copy(io.Discard, body); err != nil {
			return errTruncated
		}
		return ss.fail(ctx, action.Permanent(fmt.Errorf("step error: unrecognized fragment %s", name)))
	}
	return nil
}

// write queues the domain write of an N.write.json for the task's result. A write that is not
// valid JSON, names no registered domain, or goes past maxWritesBytes ends the task with a step
// error naming it.
func (ss *session) write(ctx context.Context, n int, b []byte) error {
	w, err := parseWrite(b)
	if err == nil {
		var dw engine.DomainWrite
		if dw, err = ss.srv.b.Engine().EncodeWrite(action.DomainWrite{Domain: w.Domain, Key: w.Key, Payload: w.Payload}); err == nil {
			if ss.writeBytes += len(b); ss.writeBytes > maxWritesBytes {
				err = fmt.Errorf("the task's writes exceed %d GiB", maxWritesBytes>>30)
			} else {
				ss.effects.AddWrite(dw)
			}
		}
	}
	if err != nil {
		return ss.fail(ctx, action.Permanent(fmt.Errorf("step error: %d.write.json: %v", n, err)))
	}
	ss.writeN = n
	return nil
}

func (ss *session) maxText() int {
	if ss.srv.cfg.MaxText > 0 {
		return ss.srv.cfg.MaxText
	}
	return textclean.DefaultMaxChars
}

// bodyErr classifies a failed Put: the worker's body ended, the task was canceled, or storage failed.
func (ss *session) bodyErr(ctx context.Context, tr *trackReader, err error) error {
	switch {
	case tr.err != nil:
		return errTruncated
	case ctx.Err() != nil:
		return errCanceled
	}
	return err
}

// taskJSON renders (once) the task JSON for the request's scheme and host.
func (s *Server) taskJSON(ctx context.Context, r *http.Request, ss *session) ([]byte, error) {
	ss.mu.Lock()
	b := ss.json
	ss.mu.Unlock()
	if b != nil {
		return b, nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	it := ss.item
	t := Task{ID: ss.id, URL: scheme + "://" + r.Host + s.cfg.Prefix + "/" + ss.name + "/" + ss.id,
		File:        remote.File{Filename: it.Name, ContentType: it.ContentType, Metadata: map[string]any{}},
		Traceparent: ss.trace.parent()}
	t.Metadata, _ = metadata.Decode(it.Metadata)
	if t.Metadata == nil {
		t.Metadata = map[string]any{}
	}
	var opts map[string]any
	_ = json.Unmarshal(it.Options, &opts)
	t.LanguageCode, _ = opts["lang"].(string)
	if t.LanguageCode == "" {
		t.LanguageCode = "en"
	}
	t.WantOcr, _ = opts["ocr"].(bool)
	t.WantSplitByPage, _ = opts["split_by_page"].(bool)
	t.Blob = TaskBlob{URL: t.URL + "/blob", NBytes: it.Size, SHA1: "da39a3ee5e6b4b0d3255bfef95601890afd80709"}
	if it.BlobSHA256 != "" {
		sum, err := s.blobSHA1(ctx, it.BlobSHA256)
		if err != nil {
			return nil, err
		}
		t.Blob.SHA1 = sum
		if ps, ok := s.b.Blobs().(blob.Presigner); ok {
			u, err := ps.PresignGet(ctx, it.BlobSHA256, s.cfg.PresignTTL)
			if err != nil {
				return nil, err
			}
			t.Blob.URL = u
		}
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	ss.json = b
	ss.mu.Unlock()
	return b, nil
}

func drainBody(r io.ReadCloser) {
	if r != nil {
		_, _ = io.Copy(io.Discard, r)
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

func notFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "task_gone", "task canceled, finished, timed out or unknown")
}

// handleTask answers GET (the task JSON) and HEAD (a liveness and cancel probe).
func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	ss := s.session(r)
	if ss == nil {
		notFound(w)
		return
	}
	if ok, _ := ss.enter(false); !ok {
		notFound(w)
		return
	}
	defer ss.leave(false)
	if ss.isFinished() {
		notFound(w)
		return
	}
	if ss.checkCanceled(r.Context(), true) {
		ss.mu.Lock()
		idle := !ss.posting
		ss.mu.Unlock()
		if idle {
			ss.cancelNow(r.Context())
		}
		notFound(w)
		return
	}
	b, err := s.taskJSON(r.Context(), r, ss)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "could not render the task")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	ss.trace.setHeader(w.Header())
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// handleBlob streams the task's input bytes.
func (s *Server) handleBlob(w http.ResponseWriter, r *http.Request) {
	ss := s.session(r)
	if ss == nil {
		notFound(w)
		return
	}
	if ok, _ := ss.enter(false); !ok {
		notFound(w)
		return
	}
	defer ss.leave(false)
	if ss.isFinished() || ss.checkCanceled(r.Context(), true) {
		notFound(w)
		return
	}
	// The bytes are a document's: inert should a browser ever open the URL.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.Header().Set("Content-Disposition", "attachment")
	if ss.item.BlobSHA256 == "" {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	rc, err := s.b.Blobs().Open(r.Context(), ss.item.BlobSHA256)
	if err != nil {
		s.log.Error("open task blob", "task_id", ss.task.ID, "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "could not read the blob")
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Length", fmt.Sprint(ss.item.Size))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
			s.log.Warn("send task blob", "task_id", ss.task.ID, "error", err)
		}
	}
}

// postSession looks up and enters the session of a fragment POST, answering the request itself
// when it cannot go on.
// A multipart body is not drained before a 404 in general: it may be endless, so the connection
// is closed. The POST of a task canceled meanwhile is the exception: it is read to its end (see
// [Server.drainCanceled]), as a converter piping its output into it would break otherwise.
func (s *Server) postSession(w http.ResponseWriter, r *http.Request, multi bool) *session {
	drain := func(body io.ReadCloser) {
		if multi {
			w.Header().Set("Connection", "close")
			return
		}
		drainBody(body)
	}
	dropCanceled := func(body io.ReadCloser) {
		if !multi || !s.drainCanceled(w, body) {
			drain(body)
		}
	}
	ss := s.session(r)
	if ss == nil {
		// The task id is the credential of task URLs: without a known one, nothing is read.
		RefuseBody(w)
		notFound(w)
		return nil
	}
	ok, conflict := ss.enter(true)
	if !ok {
		drain(r.Body)
		notFound(w)
		return nil
	}
	if conflict {
		drain(r.Body)
		writeError(w, http.StatusConflict, "post_open", "another fragment POST is open for this task")
		return nil
	}
	switch ss.endedAs() {
	case endDone:
		ss.leave(true)
		drain(r.Body)
		w.WriteHeader(http.StatusAccepted)
		return nil
	case endCanceled:
		dropCanceled(r.Body)
		ss.leave(true)
		notFound(w)
		return nil
	}
	if ss.checkCanceled(r.Context(), true) {
		ss.cancelNow(r.Context())
		dropCanceled(r.Body)
		ss.leave(true)
		notFound(w)
		return nil
	}
	return ss
}

// handleFragment applies one fragment POSTed on its own.
func (s *Server) handleFragment(w http.ResponseWriter, r *http.Request) {
	ss := s.postSession(w, r, false)
	if ss == nil {
		return
	}
	defer ss.leave(true)
	ctx, span := ss.trace.fragment(r, r.PathValue("fragment"))
	defer span.End()
	ctx, stop := ss.watchCancel(ctx)
	defer stop()
	err := ss.apply(ctx, r.PathValue("fragment"), r.Body)
	if err == nil {
		err = ss.flush(ctx)
	}
	s.answer(w, r, ss, err)
}

// watchCancel returns a context canceled when the task is canceled, so a Put in progress stops.
func (ss *session) watchCancel(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		select {
		case <-ss.cancelCh:
			cancel()
		case <-done:
		}
	}()
	return ctx, func() { close(done); cancel() }
}

// canceledCause returns errCanceled for an error that the task's cancel caused: once the task
// is canceled, the request's context is (watchCancel), and a step that was using it — the
// backlog gate's count, a flush — fails with the context's error. That is the cancel, not a
// failure of the server's (a 500 cut the POST that the cancel lets finish). A truncated body
// stays truncated.
func (ss *session) canceledCause(err error) error {
	if err == nil || errors.Is(err, errCanceled) || errors.Is(err, errTruncated) {
		return err
	}
	ss.mu.Lock()
	canceled := ss.canceled
	ss.mu.Unlock()
	if !canceled {
		return err
	}
	return errCanceled
}

// answer writes the outcome of a fragment POST.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, ss *session, err error) {
	err = ss.canceledCause(err)
	switch {
	case err == nil && !ss.checkCanceledAfter(r.Context()):
		w.WriteHeader(http.StatusAccepted)
	case err == nil, errors.Is(err, errCanceled):
		ss.cancelNow(r.Context())
		w.Header().Set("Connection", "close")
		notFound(w)
	case errors.Is(err, errTruncated):
		// The worker is gone; what was applied stays, and the task times out and is retried.
		s.log.Info("remote worker request cut off", "action", ss.name, "task_id", ss.task.ID)
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusBadRequest, "truncated", "request body ended early")
	default:
		s.log.Error("apply remote fragment", "action", ss.name, "task_id", ss.task.ID, "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "could not apply the fragment")
	}
}

// checkCanceledAfter reports a cancel seen while a request ran, unless the task already finished.
func (ss *session) checkCanceledAfter(ctx context.Context) bool {
	if ss.isFinished() {
		return false
	}
	ss.mu.Lock()
	c := ss.canceled
	ss.mu.Unlock()
	return c
}

// handleMultipart applies the parts of a multipart/form-data stream one by one, as they arrive.
func (s *Server) handleMultipart(w http.ResponseWriter, r *http.Request) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		if s.session(r) == nil {
			RefuseBody(w)
			notFound(w)
			return
		}
		drainBody(r.Body)
		writeError(w, http.StatusUnsupportedMediaType, "not_multipart",
			"POST a fragment to <task url>/<fragment>, or many as multipart/form-data to <task url>")
		return
	}
	ss := s.postSession(w, r, true)
	if ss == nil {
		return
	}
	defer ss.leave(true)
	ctx, span := ss.trace.fragment(r, "multipart")
	defer span.End()
	ctx, stop := ss.watchCancel(ctx)
	defer stop()
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		if ss.state != stateEnd && ss.checkCanceled(ctx, false) {
			err = errCanceled
			break
		}
		var part *multipart.Part
		part, err = mr.NextRawPart()
		if err == io.EOF {
			err = nil
			break
		}
		if err != nil {
			err = errTruncated
			break
		}
		ss.touch()
		err = ss.apply(ctx, part.FormName(), part)
		part.Close()
		if err != nil {
			break
		}
	}
	err = ss.canceledCause(err)
	if errors.Is(err, errCanceled) || (err == nil && ss.checkCanceledAfter(ctx)) {
		// The task ends canceled now, but the worker's POST is let finish: an unmodified
		// converter pipes its output into the request, and a request cut off would break its
		// pipe and end the worker. The rest of the body is read and dropped; the worker learns
		// of the cancel from the 404 (here, or on its next HEAD or poll).
		ss.cancelNow(ctx)
		if s.drainCanceled(w, r.Body) {
			notFound(w)
			return
		}
		err = errCanceled
	}
	if errors.Is(err, errTruncated) && ss.state != stateEnd {
		// Keep what arrived complete; the partial child is dropped when the task is retried.
		if ferr := ss.flush(ctx); ferr != nil {
			err = ferr
		}
	} else if err == nil {
		err = ss.flush(ctx)
	}
	s.answer(w, r, ss, err)
}

// drainCanceled reads a canceled task's request body to its end, dropping it, and reports
// whether it got there. A worker that sends nothing for the idle timeout is cut off.
func (s *Server) drainCanceled(w http.ResponseWriter, body io.Reader) bool {
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 32<<10)
	for {
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		_, err := body.Read(buf)
		switch {
		case err == io.EOF:
			return true
		case err != nil:
			return false
		}
	}
}

func (ss *session) touch() {
	ss.mu.Lock()
	ss.lastActive = time.Now()
	ss.mu.Unlock()
}
