// Package api serves Sluice's HTTP API under /v1: jobs, items, documents and errors, workflows,
// external events, progress as server-sent events, an OpenAPI 3.1 document, /healthz and
// Prometheus /metrics. It mounts the remote worker protocol (package workerproto) at /v1/workers.
//
// JSON bodies use snake_case; every error is {"code", "message"} with a code from one catalogue
// ([Error]). Every endpoint but /healthz needs a bearer token (`Authorization: Bearer` or
// `?token=`): admin tokens may do everything, reader tokens only read, worker tokens only speak
// the worker protocol.
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
	"time"

	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// Config configures an [API].
type Config struct {
	Backend workerproto.Backend
	Tokens  *TokenStore
	// Workers, when set, is mounted at /v1/workers.
	Workers *workerproto.Server
	Logger  *slog.Logger
	// PathRoots lists the directories server-side paths of new jobs may come from. Empty means
	// jobs can only be created from uploads.
	PathRoots []string
	// ProgressInterval is how often the progress stream sends an event. Defaults to 1s.
	ProgressInterval time.Duration
	// Leader, when set, reports whether this process is the maintenance leader, shown on
	// /metrics as sluice_maintenance_leader.
	Leader func() bool
	// Sources, when set, serves POST /v1/sources/{name} for admins (internal/source).
	Sources http.Handler
	// MoreMetrics, when set, writes more metrics to /metrics (the outbox's).
	MoreMetrics func(ctx context.Context, w io.Writer) error
	// NoAuth disables authentication (tests of handlers only; never in production).
	NoAuth bool
}

// API is the HTTP API. It is safe for concurrent use.
type API struct {
	cfg     Config
	b       workerproto.Backend
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
}

// New returns the API; it panics when cfg.Backend is nil, or cfg.Tokens is nil without NoAuth.
func New(cfg Config) *API {
	if cfg.Backend == nil {
		panic("api: Config.Backend is nil")
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
	a := &API{cfg: cfg, b: cfg.Backend, log: cfg.Logger, mux: http.NewServeMux(), metrics: newMetrics()}
	for _, r := range a.routes() {
		a.mux.Handle(r.Method+" "+r.Path, a.wrap(r))
	}
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
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

// Handler returns the API's handler. It sets no timeouts of its own; the http.Server should not
// set WriteTimeout (progress streams and worker POSTs are long).
func (a *API) Handler() http.Handler { return a.mux }

// Error is a public API error: an HTTP status and code from the catalogue, and a message safe to
// show. Handlers return it; any other error is logged and answered as "internal".
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
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
)

var codeStatus = map[string]int{
	CodeBadRequest: 400, CodeUnauthorized: 401, CodeForbidden: 403, CodeNotFound: 404, CodeConflict: 409,
	CodeInvalid: 422, CodeUnknownEvent: 422, CodeInternal: 500,
}

func errf(code, format string, args ...any) *Error {
	return &Error{Status: codeStatus[code], Code: code, Message: fmt.Sprintf(format, args...)}
}

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, store.ErrNotFound):
			e = errf(CodeNotFound, "not found")
		case errors.Is(err, context.Canceled):
			return
		default:
			a.log.Error("api request", "method", r.Method, "path", r.URL.Path, "error", err)
			e = errf(CodeInternal, "internal error; see the server log")
		}
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
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

// authorized checks the request's token for the role and answers 401/403 itself.
func (a *API) authorized(w http.ResponseWriter, r *http.Request, need Role) bool {
	if a.cfg.NoAuth {
		return true
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

func (a *API) wrap(rt route) http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(w, r, rt.Role) {
			return
		}
		if err := rt.Handler(w, r); err != nil {
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
