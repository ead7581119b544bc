// Package sluice embeds Sluice's engine in a Go program: open it on an embedded SQLite
// database or on PostgreSQL ([Open]), register actions of your own beside the built-in ones —
// they implement the same contract, package [github.com/sluice-project/sluice/action] — apply
// workflows ([Engine.ApplyWorkflow]), start jobs ([Engine.StartJob]) and wait for them
// ([Engine.Wait]). An engine runs its workers in the process; [Engine.Handler] also serves the
// HTTP API and the worker protocol, so remote workers (package
// [github.com/sluice-project/sluice/remote]) and the generated client (package
// [github.com/sluice-project/sluice/client]) can reach it.
//
// Jobs, items and results are durable: a process killed at any instant resumes where it left off
// when it opens the same data directory or database again (DESIGN §4).
//
// This package, action, remote and client are Sluice's public Go API, kept compatible as the
// README promises; everything under internal/ may change.
package sluice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-project/sluice/action"
	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/workerproto"
	"github.com/sluice-project/sluice/internal/workflow"
)

// Config configures [Open]. The zero value opens ./sluice-data on SQLite with the built-in
// actions only.
type Config struct {
	// DataDir holds the embedded SQLite database and the blobs (the bytes of files and of what
	// actions derive from them). Defaults to ./sluice-data. With DatabaseURL the blobs are still
	// kept here.
	DataDir string
	// DatabaseURL, when set, is a postgres:// URL: the engine keeps its state in PostgreSQL,
	// which several processes may share. Empty means the embedded SQLite database in DataDir,
	// which one engine process at a time may open.
	DatabaseURL string
	// Schema is the PostgreSQL schema of the tables, created if missing. Defaults to "public".
	Schema string
	// Actions are registered beside the built-in actions; a name taken by one is an error.
	Actions []action.Action
	// Builtins are built-in workflows to store at Open, such as "documents". Defaults to none.
	Builtins []string
	// Concurrency overrides the number of tasks of an action run at once, by action name.
	// Defaults to each action's Spec.Concurrency.
	Concurrency map[string]int
	// Remote names actions whose tasks are handed to remote workers over the worker protocol
	// instead of running in this process (serve [Engine.Handler] for them).
	Remote []string
	// Logger receives the engine's logs. Defaults to discarding them.
	Logger *slog.Logger
	// StopGrace is how long [Engine.Close] lets running tasks finish before it releases them
	// to be run again. Defaults to 30s.
	StopGrace time.Duration
}

// Engine is an open Sluice installation with its workers running. It is safe for concurrent
// use. Close it when done.
type Engine struct {
	n     *node.Node
	grace time.Duration
	wp    *workerproto.Server
	api   *api.API

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating it if need be) the installation cfg describes and starts its workers. A
// task a killed predecessor left running is taken up again.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "sluice-data"
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 30 * time.Second
	}
	ncfg := node.Config{DataDir: cfg.DataDir, Engine: true, Drain: cfg.StopGrace, Logger: cfg.Logger, Concurrency: cfg.Concurrency,
		Actions: cfg.Actions, Remote: map[string]bool{}}
	for _, r := range cfg.Remote {
		ncfg.Remote[r] = true
	}
	if cfg.DatabaseURL != "" {
		pcfg := postgres.Config{URL: cfg.DatabaseURL, Schema: cfg.Schema}
		ncfg.OpenStore = func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, pcfg) }
	}
	n, err := node.Open(ctx, ncfg)
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.Builtins {
		if err := builtin.Apply(ctx, n.Engine, name); err != nil {
			n.Close()
			return nil, fmt.Errorf("built-in workflow %q: %w", name, err)
		}
	}
	e := &Engine{n: n, grace: cfg.StopGrace}
	tokens, err := api.OpenTokenStore(filepath.Join(n.DataDir, "tokens.json"))
	if err != nil {
		n.Close()
		return nil, err
	}
	backend := workerproto.NewBackend(n.Engine, n.Blobs, n.Worker)
	e.wp = workerproto.New(workerproto.Config{Backend: backend, Auth: tokens.WorkerAuth(), Logger: cfg.Logger})
	n.Listen(node.Listener{Wake: e.wp.Wake, Cancel: e.wp.CancelTasks})
	e.api = api.New(api.Config{Backend: backend, Records: n.Store, Tokens: tokens, Workers: e.wp, Logger: cfg.Logger, Fileset: n.Fileset})
	// The workers outlive the ctx of Open: they stop at Close.
	n.Start(context.WithoutCancel(ctx))
	e.wp.Start(context.WithoutCancel(ctx))
	return e, nil
}

// Close stops the workers, letting running tasks finish for up to Config.StopGrace (the rest are
// run again by the next process), and closes the database. Later calls return the first one's
// result.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.wp.Stop()
		e.n.Stop(e.grace)
		e.closeErr = e.n.Close()
	})
	return e.closeErr
}

// Handler serves Sluice's HTTP API (docs/api.md), its OpenAPI document and the worker protocol
// at /v1/workers, as `sluice serve` does without the web UI. Requests need a bearer token of
// [Engine.CreateToken] or `sluice token create --data DIR`.
func (e *Engine) Handler() http.Handler { return e.api.Handler() }

// CreateToken creates an API token with the role "admin" (everything), "reader" (reads) or
// "worker" (the worker protocol) and returns it; only its hash is kept, in DataDir/tokens.json.
func (e *Engine) CreateToken(role string) (string, error) {
	if !api.ValidRole(api.Role(role)) {
		return "", fmt.Errorf("token role %q: want admin, reader or worker", role)
	}
	tokens, err := api.OpenTokenStore(filepath.Join(e.n.DataDir, "tokens.json"))
	if err != nil {
		return "", err
	}
	return tokens.Create(api.Role(role))
}

// Workflow is a stored version of a workflow.
type Workflow struct {
	Name    string
	Version int
	// Digest identifies the definition: applying the same one again stores no new version.
	Digest string
}

// Diagnostic is one problem found in a workflow.
type Diagnostic struct {
	// Severity is "error" (the workflow cannot be stored) or "warning".
	Severity string
	// Step, Field and Line say where, when known: a step's name ("" for the workflow), a field
	// such as "needs" or "with.url", a 1-based line of the source (0 when unknown).
	Step  string
	Field string
	Line  int
	// Message says what is wrong.
	Message string
}

func diagnostics(ds []workflow.Diagnostic) []Diagnostic {
	out := make([]Diagnostic, len(ds))
	for i, d := range ds {
		out[i] = Diagnostic{Severity: string(d.Severity), Step: d.Step, Field: d.Field, Line: d.Line, Message: d.Message}
	}
	return out
}

// WorkflowError is the error of [Engine.ApplyWorkflow] for a workflow that does not parse or
// validate: every problem found.
type WorkflowError struct {
	Diagnostics []Diagnostic
	err         error
}

func (e *WorkflowError) Error() string { return e.err.Error() }

// ApplyWorkflow validates a workflow (YAML or JSON, docs/workflows.md) against the registered
// actions and stores it as a new version, unless the latest version is the same. It returns the
// stored version and the warnings; a workflow that does not validate is a [*WorkflowError].
func (e *Engine) ApplyWorkflow(ctx context.Context, src []byte) (Workflow, []Diagnostic, error) {
	wf, ws, err := e.n.Engine.ApplyWorkflow(ctx, src, "workflow")
	warnings := diagnostics(ws)
	var ve *workflow.ValidationError
	var pe *workflow.ParseError
	switch {
	case errors.As(err, &ve):
		return Workflow{}, warnings, &WorkflowError{Diagnostics: diagnostics(ve.Diagnostics), err: err}
	case errors.As(err, &pe):
		return Workflow{}, warnings, &WorkflowError{Diagnostics: diagnostics([]workflow.Diagnostic{pe.Diagnostic()}), err: err}
	case err != nil:
		return Workflow{}, warnings, err
	}
	return Workflow{Name: wf.Name, Version: wf.Version, Digest: wf.Digest}, warnings, nil
}

// The states of a [Job], as the store keeps them (TestJobStates).
const (
	JobRunning  = "running"
	JobComplete = "complete"
	JobFailed   = "failed"
	JobCanceled = "canceled"
)

// Job is one run of a workflow.
type Job struct {
	ID       int64
	Workflow string
	Version  int
	// State is JobRunning until the job ends as JobComplete, JobFailed or JobCanceled.
	State string
	// Error says why a failed job failed. Errors of single items do not fail a job: they are
	// the job's outputs of kind "error".
	Error      string
	CreatedAt  time.Time
	FinishedAt time.Time // zero while running
}

func toJob(j *record.Job) *Job {
	return &Job{ID: j.ID, Workflow: j.WorkflowName, Version: j.WorkflowVersion, State: string(j.State), Error: j.Error,
		CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt}
}

// JobParams starts a job.
type JobParams struct {
	// Workflow names a stored workflow. Required.
	Workflow string
	// Version is the workflow's version. Defaults to the latest.
	Version int
	// Key makes StartJob idempotent: a second call with the same key returns the first job.
	Key string
	// Metadata and Options are the job's, inherited by its items (Options such as "ocr").
	Metadata, Options map[string]any
	// Files are the job's roots, one item each, in order.
	Files []File
}

// File is a root of a job: a name and its content, read to the end by StartJob.
type File struct {
	Name string
	// ContentType may be left empty: the documents workflow detects it.
	ContentType string
	Content     io.Reader
}

// StartJob stores the files and starts a job of the workflow over them. The job runs in the
// background; [Engine.Wait] waits for its end.
func (e *Engine) StartJob(ctx context.Context, p JobParams) (*Job, error) {
	roots := make([]engine.Root, 0, len(p.Files))
	for i, f := range p.Files {
		sha, size, err := e.n.Blobs.Put(ctx, f.Content)
		if err != nil {
			return nil, fmt.Errorf("store file %q: %w", f.Name, err)
		}
		roots = append(roots, engine.Root{Ordinal: i, Name: f.Name, ContentType: f.ContentType, BlobSHA256: sha, Size: size})
	}
	ng := e.n.Engine
	j, _, err := ng.CreateJob(ctx, engine.CreateJobParams{Workflow: p.Workflow, Version: p.Version, Key: p.Key,
		Metadata: p.Metadata, Options: p.Options, Open: true})
	if err != nil {
		return nil, err
	}
	if err := ng.AddRoots(ctx, j, roots); err != nil {
		return nil, err
	}
	if err := ng.Seal(ctx, j.ID); err != nil {
		return nil, err
	}
	return e.Job(ctx, j.ID)
}

// Job returns the job with the id, or an error wrapping [ErrNotFound].
func (e *Engine) Job(ctx context.Context, id int64) (*Job, error) {
	j, err := e.n.Store.JobGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", id, err)
	}
	return toJob(j), nil
}

// ErrNotFound is wrapped by the errors of lookups of what does not exist.
var ErrNotFound = store.ErrNotFound

// Wait waits until the job has ended and returns it, or returns ctx's error. It checks the
// job's state in the database every 20 ms at first, backing off to every second.
func (e *Engine) Wait(ctx context.Context, id int64) (*Job, error) {
	delay := 20 * time.Millisecond
	for {
		j, err := e.Job(ctx, id)
		if err != nil || j.State != JobRunning {
			return j, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// Cancel cancels a running job: its tasks not yet started end as canceled, running ones see
// their context canceled.
func (e *Engine) Cancel(ctx context.Context, id int64) error { return e.n.Engine.Cancel(ctx, id) }

// Output is a result an action recorded on an item with [action.Output.SetOutput]: a document
// or an error of the documents workflow, or any kind of your own.
type Output struct {
	ItemID int64
	Kind   string
	Value  json.RawMessage
}

// Outputs returns the job's outputs of a kind ("document", "error", …) in item order.
func (e *Engine) Outputs(ctx context.Context, jobID int64, kind string) ([]Output, error) {
	var out []Output
	after := int64(0)
	for {
		page, err := e.n.Store.OutputList(ctx, store.OutputListParams{JobID: jobID, Kind: kind, AfterItem: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, o := range page {
			out = append(out, Output{ItemID: o.ItemID, Kind: o.Kind, Value: o.Value})
		}
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].ItemID
	}
}

// Item is one node of a job's tree: a file the job started with (a root) or one an action
// derived from it (a child).
type Item struct {
	ID       int64
	ParentID int64 // 0 for a root
	// Name is the derived path, such as "Archive.zip/dir/report.pdf".
	Name        string
	ContentType string
	Size        int64
	// State is "created", "written", "processed" or "ingested" (DESIGN §2).
	State string
	// Error is the item's error, when a task of it failed for good.
	Error string
	// Text is the text an action set on the item, if any.
	Text      string
	NChildren int
}

// Items returns the children of the item parentID in the job, in order; parentID 0 returns the
// job's roots.
func (e *Engine) Items(ctx context.Context, jobID, parentID int64) ([]Item, error) {
	var out []Item
	after := ""
	for {
		page, err := e.n.Store.ItemList(ctx, store.ItemListParams{JobID: jobID, ParentID: &parentID, AfterSort: after,
			Limit: 1000, WithText: true})
		if err != nil {
			return nil, err
		}
		for _, it := range page {
			out = append(out, Item{ID: it.ID, ParentID: it.ParentID, Name: it.Name, ContentType: it.ContentType, Size: it.Size,
				State: string(it.State), Error: it.Error, Text: it.Text, NChildren: it.NChildren})
		}
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].SortKey
	}
}
