package workerproto

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// BuiltinConfig configures [RunBuiltin].
type BuiltinConfig struct {
	// Server is the poll URL base, such as "http://127.0.0.1:7080/v1/workers".
	Server string
	// Action is the built-in action to serve: the server hands its tasks to remote workers
	// (`sluice serve --remote NAME`), and this process runs it.
	Action string
	// Token is a worker token.
	Token string
	// Catalog holds the built-in actions of this process; Action must be one of them.
	Catalog *action.Catalog
	// TempDir is where a task whose action wants one gets its temporary directory. Defaults to
	// os.TempDir().
	TempDir string
	// Heartbeat is how often a running task is probed (HEAD, or its progress posted), to keep it
	// alive and learn of a cancel. Defaults to 3s.
	Heartbeat time.Duration
	Logger    *slog.Logger
	// Client, when set, is used instead of one built from Server and Token.
	Client *Client
	// Once makes RunBuiltin return after one task (tests).
	Once bool
}

// ErrUnknownAction is the error of [RunBuiltin] for an action name the catalog does not hold.
var ErrUnknownAction = errors.New("no such built-in action")

// RunBuiltin serves a built-in action remotely: it polls the server for the action's tasks and
// runs the action in this process on each, as an in-process worker would, except that what the
// action reads beyond its task — the core's records of its job, its domain's rows, the blob
// store — it reads from the server through the task's read port ([engine.Reads] over HTTP: the
// task URL's /task, /core/…, /read/…, /blobs endpoints), and what it did (children, metadata,
// events, outputs) goes back in one result.json, which the server commits with the task. Its
// domain writes are sent as it makes them, a batch of about 256 KiB at a time, as N.write.json
// fragments of a multipart POST: the server keeps them (past a megabyte, in a temp file) until
// result.json commits them, in the same transaction, so that neither side holds a long run of
// writes in memory. Blobs the action stores (children's, thumbnails, preservation copies) are
// uploaded to the server's blob store as it makes them.
//
// RunBuiltin returns [ErrUnknownAction] (wrapped, naming the known ones) at once for an action
// the catalog does not hold; otherwise it polls until ctx ends (returning nil) or the server
// refuses the worker (returning the error).
func RunBuiltin(ctx context.Context, cfg BuiltinConfig) error {
	if cfg.Catalog == nil {
		cfg.Catalog = &action.Catalog{}
	}
	act, ok := cfg.Catalog.Lookup(cfg.Action)
	if !ok || cfg.Action == "remote" {
		names := slices.DeleteFunc(cfg.Catalog.Names(), func(n string) bool { return n == "remote" })
		return fmt.Errorf("%w: %q (the built-in actions are %s)", ErrUnknownAction, cfg.Action, strings.Join(names, ", "))
	}
	c := runnerDefaults(&cfg.Heartbeat, &cfg.TempDir, &cfg.Logger, cfg.Client, cfg.Server, cfg.Token)
	b := &builtinRunner{cfg: &cfg, act: act, policy: cfg.Catalog.Policy(cfg.Action), http: c.HTTP}
	if b.http == nil {
		b.http = &http.Client{}
	}
	return pollTasks(ctx, c, cfg.Action, cfg.Once, cfg.Logger, func(t *TaskHandle) error { return b.run(ctx, t) })
}

type builtinRunner struct {
	cfg    *BuiltinConfig
	act    action.Action
	policy action.Policy
	http   *http.Client
}

// run runs the action on one task and sends its result.
func (b *builtinRunner) run(ctx context.Context, th *TaskHandle) error {
	port := &remotePort{http: b.http, t: th}
	var at ActionTask
	if err := port.call(ctx, http.MethodGet, "/task", nil, &at); err != nil {
		return err
	}
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeout := b.act.Spec().Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	tctx, stop := context.WithTimeout(tctx, timeout)
	defer stop()

	task := &action.Task{ID: at.TaskID, JobID: at.JobID, Step: at.Step, Action: at.Action, Attempt: at.Attempt, With: at.With, Item: at.Item.item()}
	if task.With == nil {
		task.With = map[string]any{}
	}
	tmp := &lazyDir{parent: b.cfg.TempDir}
	defer tmp.remove()
	task.OpenBlob = func(ctx context.Context) (io.ReadCloser, error) {
		if at.Item.SHA256 == "" {
			return nil, action.Permanentf("item %q has no content", at.Item.Name)
		}
		return th.OpenBlob(ctx)
	}
	var blobPath string
	task.BlobPath = func(ctx context.Context) (string, error) {
		if blobPath != "" {
			return blobPath, nil
		}
		dir, err := tmp.get()
		if err != nil {
			return "", err
		}
		rc, err := task.OpenBlob(ctx)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		p := filepath.Join(dir, "input.blob")
		f, err := os.Create(p)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(f, rc)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		blobPath = p
		return p, nil
	}
	if !b.policy.NoTempDir {
		var err error
		if task.TempDir, err = tmp.get(); err != nil {
			return fmt.Errorf("temp dir: %w", err)
		}
	}

	out := &remoteOutput{port: port, ctx: tctx, resume: at.Item.NChildren, ordinal: 0}
	beat := make(chan struct{})
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		b.heartbeat(tctx, th, out, beat, cancel)
	}()
	err := action.Safe(func() error { return b.act.Run(engine.WithReads(tctx, port), task, out) })
	close(beat)
	<-beatDone
	if errors.Is(context.Cause(tctx), ErrGone) || errors.Is(err, ErrGone) || ctx.Err() != nil {
		return ErrGone
	}
	if err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("%s timed out after %s", b.act.Spec().Name, timeout)
	}
	if err == nil {
		// The writes not sent yet go before the result, which commits them all.
		if err := out.sendWrites(ctx); err != nil {
			return err
		}
	}
	res := out.result()
	if err != nil {
		res = &ActionResult{Error: resultError(err)}
	}
	body, merr := json.Marshal(res)
	if merr != nil {
		body, _ = json.Marshal(&ActionResult{Error: &ResultError{Message: "encode the result: " + merr.Error(), Permanent: true}})
	}
	out.send.Lock()
	defer out.send.Unlock()
	return th.Post(ctx, "result.json", bytes.NewReader(body))
}

// lazyDir is a task's temporary directory, made when first asked for.
type lazyDir struct{ parent, dir string }

func (d *lazyDir) get() (string, error) {
	if d.dir == "" {
		dir, err := os.MkdirTemp(d.parent, "sluice-task-")
		if err != nil {
			return "", err
		}
		d.dir = dir
	}
	return d.dir, nil
}

func (d *lazyDir) remove() {
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

// heartbeat keeps the task alive until beat is closed: every Heartbeat, its progress when it
// changed, else a HEAD. A 404 (the task canceled, or timed out) cancels the run.
func (b *builtinRunner) heartbeat(ctx context.Context, th *TaskHandle, out *remoteOutput, beat chan struct{}, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(b.cfg.Heartbeat)
	defer tick.Stop()
	sent := -1.0
	for {
		select {
		case <-beat:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		// The server takes one POST of a task at a time: while the output sends writes (which
		// keep the task alive too), the progress waits for the next beat.
		if p := out.fraction(); p != sent && out.send.TryLock() {
			err = th.Post(ctx, "progress", strings.NewReader(fmt.Sprint(p)))
			out.send.Unlock()
			sent = p
		} else {
			err = th.Alive(ctx)
		}
		if errors.Is(err, ErrGone) {
			cancel(ErrGone)
			return
		}
	}
}

// remotePort is the read port ([engine.Reads]) of a task run by a remote worker: HTTP calls to
// the task URL, which the server answers for the task's job.
type remotePort struct {
	http *http.Client
	t    *TaskHandle
}

var _ engine.Reads = (*remotePort)(nil)

// maxPortAnswer bounds one answer of the port.
const maxPortAnswer = 256 << 20

// call sends a request to the task URL's path and decodes its JSON answer into out. A 404 is
// [ErrGone], or an error wrapping store.ErrNotFound when the server says the row read does not
// exist.
func (p *remotePort) call(ctx context.Context, method, path string, body io.Reader, out any) error {
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, p.t.URL+path, body)
	if err != nil {
		return err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.t.Traceparent != "" {
		req.Header.Set("Traceparent", p.t.Traceparent)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Code, Message string }
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = json.Unmarshal(raw, &e)
		switch {
		case resp.StatusCode == http.StatusNotFound && e.Code == codeNotFound:
			return fmt.Errorf("%s: %w", e.Message, store.ErrNotFound)
		case resp.StatusCode == http.StatusNotFound:
			return ErrGone
		case resp.StatusCode == http.StatusBadRequest && e.Code == codeBadRead:
			return action.Permanent(fmt.Errorf("%s %s: %s", method, path, e.Message))
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	// Numbers stay json.Number, as an in-process action reads metadata.
	if err := metadata.Decoder(io.LimitReader(resp.Body, maxPortAnswer)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

func (p *remotePort) post(ctx context.Context, path string, args, out any) error {
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	return p.call(ctx, http.MethodPost, path, bytes.NewReader(b), out)
}

func (p *remotePort) ItemSteps(ctx context.Context, itemID int64) ([]engine.ItemStep, error) {
	var out []engine.ItemStep
	return out, p.post(ctx, "/core/"+coreItemSteps, itemStepsArgs{ItemID: itemID}, &out)
}

func (p *remotePort) JobItems(ctx context.Context, after string, limit int) ([]*record.Item, error) {
	var out []*record.Item
	return out, p.post(ctx, "/core/"+coreJobItems, jobItemsArgs{After: after, Limit: limit}, &out)
}

func (p *remotePort) StepChildren(ctx context.Context, parent int64, step string) ([]*record.Item, error) {
	var out []*record.Item
	return out, p.post(ctx, "/core/"+coreStepChildren, stepChildrenArgs{Parent: parent, Step: step}, &out)
}

func (p *remotePort) Query(ctx context.Context, domain, name string, args, out any) error {
	return p.post(ctx, "/read/"+url.PathEscape(domain)+"/"+url.PathEscape(name), args, out)
}

func (p *remotePort) Blobs() blob.Store { return remoteBlobs{p} }

// remoteBlobs is the server's blob store as a remote worker's action sees it: Put and Stat.
type remoteBlobs struct{ p *remotePort }

var errRemoteBlobs = errors.New("not served to remote workers (Put and Stat are)")

func (r remoteBlobs) Put(ctx context.Context, body io.Reader) (string, int64, error) {
	var out blobPut
	if err := r.p.call(ctx, http.MethodPost, "/blobs", body, &out); err != nil {
		return "", 0, fmt.Errorf("store a blob: %w", err)
	}
	return out.SHA256, out.Size, nil
}

func (r remoteBlobs) Stat(ctx context.Context, sha256 string) (int64, error) {
	var out blobPut
	err := r.p.post(ctx, "/core/"+coreBlobSize, blobSizeArgs{SHA256: sha256}, &out)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("blob %s: %w", sha256, blob.ErrNotFound)
	}
	return out.Size, err
}

func (r remoteBlobs) Open(context.Context, string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("open a blob: %w", errRemoteBlobs)
}

func (r remoteBlobs) Delete(context.Context, string) error {
	return fmt.Errorf("delete a blob: %w", errRemoteBlobs)
}

func (r remoteBlobs) Walk(context.Context, func(string, int64, time.Time) error) error {
	return fmt.Errorf("walk the blobs: %w", errRemoteBlobs)
}

// writeBatchBytes is about how many bytes of domain writes a remote worker's output holds
// before it sends them.
const writeBatchBytes = 256 << 10

// remoteOutput records what a built-in action run by a remote worker did, for its result.json:
// what an in-process attempt records in its [engine.Effects]. Blobs are uploaded as they are
// made; domain writes are sent in batches of about writeBatchBytes, as N.write.json fragments.
// It is safe for concurrent use.
type remoteOutput struct {
	port *remotePort
	// ctx is the task's context, for the writes Write sends ([action.Output.Write] takes none).
	ctx    context.Context
	resume int // children earlier attempts recorded

	// send serializes the task's POSTs (writes, progress, the result): the server answers a
	// second one open at once with 409. Batches of writes are taken and sent under it, so that
	// they reach the server in the order of their numbers.
	send sync.Mutex

	mu        sync.Mutex
	res       ActionResult
	ordinal   int
	progress  float64
	lastP     float64
	resumed   bool
	wroteText bool
	// writes are the encoded writes not sent yet, writesBytes their size; writeN is the N of
	// the first of them. inResult is set once a write too large for an N.write.json came: it and
	// the writes after it go in the result, after the ones sent.
	writes      [][]byte
	writesBytes int
	writeN      int
	inResult    bool
}

var (
	_ action.Output  = (*remoteOutput)(nil)
	_ action.Resumer = (*remoteOutput)(nil)
)

func (o *remoteOutput) result() *ActionResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	return &o.res
}

func (o *remoteOutput) fraction() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.progress
}

func (o *remoteOutput) ResumeChildren() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.resumed {
		o.resumed = true
		o.ordinal = max(o.ordinal, o.resume)
	}
	return o.resume
}

func (o *remoteOutput) CreateChild(ctx context.Context, c action.Child) error {
	if c.Name == "" {
		return errors.New("child: empty name")
	}
	child := engine.Child{Name: c.Name, ContentType: c.ContentType, Metadata: c.Metadata, Options: c.Options, Text: c.Text,
		BlobSHA256: c.BlobSHA256}
	if c.Blob != nil {
		if c.BlobSHA256 != "" {
			return fmt.Errorf("child %q: both Blob and BlobSHA256 are set", c.Name)
		}
		sha, n, err := o.port.Blobs().Put(ctx, c.Blob)
		if err != nil {
			return fmt.Errorf("store child %q: %w", c.Name, err)
		}
		child.BlobSHA256, child.Size = sha, n
	}
	if c.Thumbnail != nil {
		sha, _, err := o.port.Blobs().Put(ctx, c.Thumbnail)
		if err != nil {
			return fmt.Errorf("store thumbnail of child %q: %w", c.Name, err)
		}
		child.ThumbnailSHA, child.ThumbnailType = sha, c.ThumbnailType
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.res.Children = append(o.res.Children, ResultChild{Child: child, Ordinal: o.ordinal, From: o.lastP, To: o.progress})
	o.ordinal++
	o.lastP = o.progress
	return nil
}

func (o *remoteOutput) SetText(_ context.Context, text string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.wroteText {
		o.res.Text, o.wroteText = &text, true
	}
	return nil
}

func (o *remoteOutput) SetThumbnail(ctx context.Context, r io.Reader, contentType string) error {
	o.mu.Lock()
	set := o.res.Thumbnail != nil
	o.mu.Unlock()
	if set {
		return nil
	}
	sha, _, err := o.port.Blobs().Put(ctx, r)
	if err != nil {
		return fmt.Errorf("store the thumbnail: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.res.Thumbnail == nil {
		o.res.Thumbnail = &ResultBlob{SHA256: sha, ContentType: contentType}
	}
	return nil
}

func (o *remoteOutput) SetContentType(ct string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.res.ContentType = ct
}

func (o *remoteOutput) SetMetadata(md map[string]any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.res.Metadata == nil {
		o.res.Metadata = map[string]any{}
	}
	maps.Copy(o.res.Metadata, md)
}

func (o *remoteOutput) SetOutput(_ context.Context, kind string, value json.RawMessage) error {
	if !json.Valid(value) {
		return fmt.Errorf("output %q: invalid JSON", kind)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.res.Outputs == nil {
		o.res.Outputs = map[string]json.RawMessage{}
	}
	o.res.Outputs[kind] = slices.Clone(value)
	return nil
}

func (o *remoteOutput) Emit(events ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.res.Events = append(o.res.Events, events...)
}

func (o *remoteOutput) Progress(fraction float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.progress = min(max(fraction, o.progress), 1)
}

// Heartbeat does nothing: the runner probes the task every BuiltinConfig.Heartbeat.
func (o *remoteOutput) Heartbeat() {}

func (o *remoteOutput) Write(w action.DomainWrite) error {
	if w.Domain == "" || w.Key == "" {
		return fmt.Errorf("write %q to domain %q: empty domain or key", w.Key, w.Domain)
	}
	payload, err := json.Marshal(w.Payload)
	if err != nil {
		return fmt.Errorf("write %q to domain %q: %w", w.Key, w.Domain, err)
	}
	dw := domainWrite{Domain: w.Domain, Key: w.Key, Payload: payload}
	b, err := json.Marshal(dw)
	if err != nil {
		return fmt.Errorf("write %q to domain %q: %w", w.Key, w.Domain, err)
	}
	o.mu.Lock()
	if o.inResult || len(b) > maxWriteBytes {
		o.inResult = true
		o.res.Writes = append(o.res.Writes, dw)
		o.mu.Unlock()
		return nil
	}
	o.writes = append(o.writes, b)
	o.writesBytes += len(b)
	full := o.writesBytes >= writeBatchBytes
	o.mu.Unlock()
	if full {
		return o.sendWrites(o.ctx)
	}
	return nil
}

// sendWrites sends the writes not sent yet, as N.write.json parts of one multipart POST; the
// server keeps them for the task's result. It returns [ErrGone] (wrapped) once the task was
// canceled.
func (o *remoteOutput) sendWrites(ctx context.Context) error {
	o.send.Lock()
	defer o.send.Unlock()
	o.mu.Lock()
	ws, first := o.writes, o.writeN
	o.writes, o.writesBytes, o.writeN = nil, 0, o.writeN+len(ws)
	o.mu.Unlock()
	if len(ws) == 0 {
		return nil
	}
	s := o.port.t.Stream(ctx)
	for i, b := range ws {
		if err := s.Part(fmt.Sprintf("%d.write.json", first+i), bytes.NewReader(b)); err != nil {
			return fmt.Errorf("send domain writes %d-%d: %w", first, first+len(ws)-1, err)
		}
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("send domain writes %d-%d: %w", first, first+len(ws)-1, err)
	}
	return nil
}
