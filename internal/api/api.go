// Package api serves Sluice's HTTP API under /v1: jobs, items, documents and errors, workflows,
// external events, progress as server-sent events, an OpenAPI 3.1 document, /healthz, /readyz
// and Prometheus /metrics. It mounts the remote worker protocol (package workerproto) at /v1/workers.
//
// JSON bodies use snake_case; every error is {"code", "message"} with a code from one catalogue
// ([Error]). Every endpoint but /healthz and /readyz needs a bearer token (`Authorization: Bearer` or
// `?token=`): admin tokens may do everything, reader tokens only read, worker tokens only speak
// the worker protocol.
//
// Requests are bounded ([Limits]): upload bytes, multipart parts and roots per job, and the time a
// body or headers may take. Downloads of item contents are served inert (nosniff, a sandboxing
// Content-Security-Policy, originals as attachments), and server-side paths are opened through
// [os.Root] under the configured path roots.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/metric"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// Config configures an [API].
type Config struct {
	Backend workerproto.Backend
	// Records is what the API reads: the store the engine writes (Backend's).
	Records Records
	Tokens  *TokenStore
	// Workers, when set, is mounted at /v1/workers.
	Workers *workerproto.Server
	Logger  *slog.Logger
	// PathRoots lists the directories server-side locations may lie under — jobs' paths,
	// sheets' files_dir, graphs' local sources — and the s3://bucket/prefix locations sheets'
	// files may be read from. Every route checks a location the same way (package pathroot).
	// Empty means jobs can only be created from uploads.
	PathRoots []string
	// OpenS3, when set, opens the s3://bucket/prefix locations an ingest sheet's files may be
	// in (files_dir of /v1/sheets); nil refuses them.
	OpenS3 objects.S3Opener
	// ProgressInterval is how often the progress stream sends an event. Defaults to 1s.
	ProgressInterval time.Duration
	// Leader, when set, reports whether this process is the maintenance leader, shown on
	// /metrics as sluice_maintenance_leader.
	Leader func() bool
	// Sources, when set, serves POST /v1/sources/{name} for admins (internal/source).
	Sources http.Handler
	// Problems, when set, lists in plain words what keeps this process from doing its work
	// now ("blob store unreachable since …"): GET /readyz answers 503 with them, one a line,
	// and 200 "ready" when there are none.
	Problems func(ctx context.Context) []string
	// MoreMetrics, when set, writes more metrics to /metrics (the outbox's).
	MoreMetrics func(ctx context.Context, w io.Writer) error
	// NoAuth disables authentication (tests of handlers only; never in production).
	NoAuth bool
	// Limits bounds what a request may make the server read and store.
	Limits Limits
	// Fileset, when set, is the configuration of the fileset workflow's jobs that POST
	// /v1/filesets creates (its politeness delay, whether it publishes); nil: the defaults,
	// publishing nothing.
	Fileset *fileset.Fileset
	// Egress is the policy of the addresses the API connects to on a request's behalf: the
	// SubscribeURL of an SNS subscription confirmation posted to /v1/sheets/transcoded. Nil is
	// egress's default (loopback, private and link-local addresses refused).
	Egress *egress.Policy
	// Metrics holds the process's collectors served on /metrics, beside the figures read from
	// the database when scraped; the API counts its requests there. Defaults to a set of its own.
	Metrics *metric.Set
}

// Limits bounds what one request may make the server read and store, so that a client (even one
// with a token) cannot exhaust the disk, the database or the server's connections. Exceeding a
// cap answers 413 with the code "too_large" and names the `sluice serve` flag that raises it.
// The zero value of each field means its default.
type Limits struct {
	// MaxUploadBytes caps the bytes of the files uploaded to create one job (flag
	// --max-upload-bytes). Defaults to 10 GiB.
	MaxUploadBytes int64
	// MaxParts caps the parts of one multipart request, the "job" part included (flag
	// --max-parts). Defaults to 10,000.
	MaxParts int
	// MaxRoots caps the roots — uploaded files and server-side paths — a job is created with
	// (flag --max-roots). Defaults to 10,000.
	MaxRoots int
	// BodyReadTimeout bounds reading a request body (flag --body-read-timeout): a JSON or YAML
	// body must arrive whole within it, and an upload may not stall (send nothing) for longer —
	// an upload that keeps sending may take as long as it needs. A body that times out is
	// answered 408. Defaults to 1m.
	BodyReadTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers, for [API.Server] (flag
	// --read-header-timeout). Defaults to 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long [API.Server] keeps an idle keep-alive connection (flag
	// --idle-timeout). The worker protocol wants at least 60s. Defaults to 2m.
	IdleTimeout time.Duration
}

// The defaults of [Limits].
const (
	DefaultMaxUploadBytes    = 10 << 30
	DefaultMaxParts          = 10_000
	DefaultMaxRoots          = 10_000
	DefaultBodyReadTimeout   = time.Minute
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

func (l *Limits) setDefaults() {
	if l.MaxUploadBytes <= 0 {
		l.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if l.MaxParts <= 0 {
		l.MaxParts = DefaultMaxParts
	}
	if l.MaxRoots <= 0 {
		l.MaxRoots = DefaultMaxRoots
	}
	if l.BodyReadTimeout <= 0 {
		l.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
}

// API is the HTTP API. It is safe for concurrent use.
type API struct {
	cfg     Config
	b       workerproto.Backend
	rec     Records // cfg.Records
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	roots   pathroot.Roots // cfg.PathRoots
}

// New returns the API; it panics when cfg.Backend or cfg.Records is nil, or cfg.Tokens is nil
// without NoAuth.
func New(cfg Config) *API {
	if cfg.Backend == nil || cfg.Records == nil {
		panic("api: Config.Backend or Config.Records is nil")
	}
	if cfg.Tokens == nil && !cfg.NoAuth {
		panic("api: Config.Tokens is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	cfg.Limits.setDefaults()
	a := &API{cfg: cfg, b: cfg.Backend, rec: cfg.Records, log: cfg.Logger, mux: http.NewServeMux(), metrics: newMetrics(cfg.Metrics),
		roots: pathroot.New(cfg.PathRoots)}
	for _, r := range a.routes() {
		a.mux.Handle(r.Method+" "+r.Path, a.wrap(r))
	}
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	a.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		var problems []string
		if cfg.Problems != nil {
			problems = cfg.Problems(r.Context())
		}
		if len(problems) == 0 {
			_, _ = w.Write([]byte("ready\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(strings.Join(problems, "\n") + "\n"))
	})
	if cfg.Workers != nil {
		a.mux.Handle("/v1/workers/", a.metrics.instrument("worker", cfg.Workers.Handler()))
	}
	if cfg.Sources != nil {
		a.mux.Handle("POST /v1/sources/{name}", a.metrics.instrument("sources", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a.authorized(w, r, RoleAdmin) {
				cfg.Sources.ServeHTTP(w, r)
			}
		})))
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(w, r, RoleReader) {
			return
		}
		a.writeError(w, r, errf(CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return a
}

// Handler returns the API's handler. It bounds the reading of request bodies itself
// ([Limits.BodyReadTimeout]); the http.Server must not set ReadTimeout or WriteTimeout (uploads,
// progress streams and worker POSTs are long). [API.Server] returns one set up for it.
func (a *API) Handler() http.Handler { return a.mux }

// Server returns an http.Server serving the API with the header and idle timeouts of
// [Config.Limits] and no ReadTimeout or WriteTimeout: uploads, progress streams, worker long
// polls and worker POSTs may last long, and each bounds its own reading instead.
func (a *API) Server() *http.Server {
	return &http.Server{Handler: a.Handler(), ReadHeaderTimeout: a.cfg.Limits.ReadHeaderTimeout,
		IdleTimeout: a.cfg.Limits.IdleTimeout}
}

// Error is a public API error: an HTTP status and code from the catalogue, and a message safe to
// show. Handlers return it; any other error is logged and answered as "internal".
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Limit names the `sluice serve` flag of the limit a "too_large" or "timeout" error exceeded.
	Limit string `json:"limit,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The catalogue of error codes.
const (
	CodeBadRequest   = "bad_request"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeInvalid      = "invalid_workflow"
	CodeUnknownEvent = "unknown_event"
	CodeInternal     = "internal"
	CodeTooLarge     = "too_large"
	CodeTimeout      = "timeout"
)

var codeStatus = map[string]int{
	CodeBadRequest: 400, CodeUnauthorized: 401, CodeForbidden: 403, CodeNotFound: 404, CodeConflict: 409,
	CodeInvalid: 422, CodeUnknownEvent: 422, CodeInternal: 500, CodeTooLarge: 413, CodeTimeout: 408,
}

func errf(code, format string, args ...any) *Error {
	return &Error{Status: codeStatus[code], Code: code, Message: fmt.Sprintf(format, args...)}
}

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, store.ErrNotFound):
			// The store names what does not exist ([store.NotFoundError]); a bare ErrNotFound
			// says no more than the status.
			msg := "not found"
			if nf, ok := errors.AsType[*store.NotFoundError](err); ok {
				msg = nf.Error()
			}
			e = errf(CodeNotFound, "%s", msg)
		case errors.Is(err, context.Canceled):
			return
		default:
			a.log.Error("api request", "method", r.Method, "path", r.URL.Path, "error", err)
			e = errf(CodeInternal, "internal error; see the server log")
		}
	}
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	case http.StatusRequestEntityTooLarge, http.StatusRequestTimeout:
		// The rest of the body is not wanted: close the connection rather than drain it.
		workerproto.RefuseBody(w)
	}
	writeJSON(w, e.Status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// route is one API endpoint: what the OpenAPI document describes and the mux serves.
type route struct {
	Method  string
	Path    string
	Role    Role // the least role allowed (reader < admin)
	Summary string
	Handler func(w http.ResponseWriter, r *http.Request) error
	// Status is the usual success status, for the OpenAPI document.
	Status int
}

// authorized checks the request's token for the role and answers 401/403 itself, without reading
// any of the body of a request it refuses.
func (a *API) authorized(w http.ResponseWriter, r *http.Request, need Role) bool {
	if a.cfg.NoAuth {
		return true
	}
	if r.ContentLength != 0 {
		w = refusing{w}
	}
	plain := workerproto.TokenFromRequest(r)
	if plain == "" {
		a.writeError(w, r, errf(CodeUnauthorized, "a token is required: Authorization: Bearer <token>"))
		return false
	}
	role, ok := a.cfg.Tokens.Check(plain)
	if !ok {
		a.writeError(w, r, errf(CodeUnauthorized, "invalid token"))
		return false
	}
	if role == RoleAdmin || role == need {
		return true
	}
	if role == RoleWorker {
		a.writeError(w, r, errf(CodeForbidden, "worker tokens may only use the worker protocol"))
	} else {
		a.writeError(w, r, errf(CodeForbidden, "this endpoint needs an %s token", need))
	}
	return false
}

// refusing is a ResponseWriter of a refused request: the body is not read (or drained) once the
// status is written.
type refusing struct{ http.ResponseWriter }

func (w refusing) WriteHeader(code int) {
	workerproto.RefuseBody(w.ResponseWriter)
	w.ResponseWriter.WriteHeader(code)
}

func (w refusing) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (a *API) wrap(rt route) http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No response of the API is to be sniffed into something it does not declare.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !a.authorized(w, r, rt.Role) {
			return
		}
		var bd *deadlineBody
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			bd = newDeadlineBody(w, r.Body, a.cfg.Limits.BodyReadTimeout)
			r.Body = bd
		}
		if err := rt.Handler(w, r); err != nil {
			if bd != nil && bd.timedOut() {
				err = &Error{Status: http.StatusRequestTimeout, Code: CodeTimeout, Limit: "body-read-timeout",
					Message: fmt.Sprintf("the request body did not arrive within %s; raise it with sluice serve --body-read-timeout",
						a.cfg.Limits.BodyReadTimeout)}
			}
			a.writeError(w, r, err)
		}
	})
	return a.metrics.instrument(rt.Method+" "+rt.Path, h)
}

func pathID(r *http.Request, name string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, errf(CodeBadRequest, "%s must be a positive integer, not %q", name, r.PathValue(name))
	}
	return id, nil
}

func queryInt(r *http.Request, name string, def, maxv int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, errf(CodeBadRequest, "query %s must be a non-negative integer", name)
	}
	if maxv > 0 && v > maxv {
		v = maxv
	}
	return v, nil
}
