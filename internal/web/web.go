// Package web serves Sluice's web UI at / beside the HTTP API: jobs with live progress, a job's
// item tree, documents with thumbnails and text, ingest sheets with their works and file sets
// (each action's state and history as a timeline), the workflow library with a through-the-web
// editor (Banzai's promise), and an operations page of slow and stuck work.
//
// Pages are rendered on the server with html/template; a few small vanilla JavaScript files add
// uploads with progress, server-sent progress and the editor. Templates and assets are embedded:
// nothing is built or fetched at run time. Every response carries a strict Content-Security-Policy
// (no inline scripts or styles) and X-Content-Type-Options: nosniff.
//
// People sign in with an API token (package api's [api.TokenStore]); it is exchanged for a session
// cookie (HttpOnly, SameSite=Strict, Secure over TLS) naming a session kept in memory. Readers see
// everything but get no controls that change state, and the server refuses their POSTs with 403.
// Every state-changing request carries the session's CSRF token (a form field or the
// X-CSRF-Token header); one without it gets 403. The browser reaches the API through /ui/api/,
// which checks the session (and the CSRF token on POSTs) and calls the API's own handler with the
// session's token, so uploads, progress streams, validation and downloads run the API's code.
package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// ContentSecurityPolicy is sent with every page: scripts, styles and images only from this
// origin (images also as data: URLs, for the editor's diagram), no frames of the UI, forms only
// to this origin.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// Config configures a [Web].
type Config struct {
	// Backend is the engine, the blobs and the process's writer, as the API sees them.
	Backend workerproto.Backend
	// Records is what the UI reads: the store the engine writes (Backend's).
	Records Records
	// Tokens checks the tokens people sign in with.
	Tokens *api.TokenStore
	// API is the API's handler: it serves /v1/…, /metrics and /healthz, and the UI calls it
	// for /ui/api/….
	API    http.Handler
	Logger *slog.Logger
	// Problems, when set, lists what keeps the server from working now (the API's /readyz):
	// every page shows them as a banner while they last.
	Problems func(ctx context.Context) []string
	// SecureCookies marks session cookies Secure even when the request did not arrive over TLS
	// (behind a TLS-terminating proxy). Cookies of requests over TLS are always Secure.
	SecureCookies bool
	// SessionTTL is how long a session lasts without a request. Defaults to 12h.
	SessionTTL time.Duration
	// Now returns the time. Defaults to time.Now.
	Now func() time.Time
	// SlowAfter is how long a task may run before the slow-and-stuck page shows it, while its
	// step has too few completed runs in the job to tell what is usual; with enough, a task is
	// shown past twice their 95th percentile, and never before SlowAfter. Defaults to 30s.
	SlowAfter time.Duration
}

// Web is the web UI. It is safe for concurrent use.
type Web struct {
	cfg      Config
	b        workerproto.Backend
	rec      Records // cfg.Records
	log      *slog.Logger
	pages    map[string]*template.Template
	sessions *sessions
	mux      *http.ServeMux
	slow     slowRule
}

// New returns the UI; it panics when cfg.Backend, cfg.Records, cfg.Tokens or cfg.API is nil, or
// a template does not parse (a programmer error).
func New(cfg Config) *Web {
	if cfg.Backend == nil || cfg.Records == nil || cfg.Tokens == nil || cfg.API == nil {
		panic("web: Config needs Backend, Records, Tokens and API")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SlowAfter <= 0 {
		cfg.SlowAfter = 30 * time.Second
	}
	w := &Web{cfg: cfg, b: cfg.Backend, rec: cfg.Records, log: cfg.Logger, pages: map[string]*template.Template{},
		sessions: newSessions(cfg.SessionTTL, cfg.Now), mux: http.NewServeMux(), slow: slowRule{Min: cfg.SlowAfter}}
	w.parseTemplates()
	w.routes()
	return w
}

// Handler returns the handler of the whole server: the API's paths go to the API, the rest to
// the UI.
func (w *Web) Handler() http.Handler {
	root := http.NewServeMux()
	root.Handle("/v1/", w.cfg.API)
	root.Handle("/metrics", w.cfg.API)
	root.Handle("/healthz", w.cfg.API)
	root.Handle("/readyz", w.cfg.API)
	root.Handle("/", headers(w.mux))
	return root
}

// headers sets the security headers of every UI response.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		hd := rw.Header()
		hd.Set("Content-Security-Policy", ContentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.ServeHTTP(rw, r)
	})
}

func (w *Web) routes() {
	m := w.mux
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix("/static/", http.FileServerFS(static))
	m.Handle("GET /static/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(rw, r)
	}))
	m.HandleFunc("GET /{$}", func(rw http.ResponseWriter, r *http.Request) { http.Redirect(rw, r, "/jobs", http.StatusSeeOther) })
	m.Handle("GET /signin", w.handle(w.signinPage))
	m.Handle("POST /signin", w.handle(w.signin))
	m.Handle("POST /signout", w.page(api.RoleReader, w.signout))

	m.Handle("GET /jobs", w.page(api.RoleReader, w.jobsPage))
	m.Handle("GET /jobs/new", w.page(api.RoleAdmin, w.newJobPage))
	m.Handle("GET /jobs/{id}", w.page(api.RoleReader, w.jobPage))
	m.Handle("GET /jobs/{id}/items", w.page(api.RoleReader, w.itemsFragment))
	m.Handle("GET /jobs/{id}/history", w.page(api.RoleReader, w.historyPage))
	m.Handle("GET /jobs/{id}/steps", w.page(api.RoleReader, w.stepsFragment))
	m.Handle("GET /jobs/{id}/diagram.svg", w.page(api.RoleReader, w.diagram))
	m.Handle("GET /jobs/{id}/documents", w.page(api.RoleReader, w.documentsPage))
	m.Handle("POST /jobs/bulk", w.page(api.RoleAdmin, w.bulkJobs))
	m.Handle("POST /jobs/{id}/cancel", w.page(api.RoleAdmin, w.cancelJob))
	m.Handle("POST /jobs/{id}/retry", w.page(api.RoleAdmin, w.retryJob))
	m.Handle("POST /jobs/{id}/events", w.page(api.RoleAdmin, w.fireEvent))
	m.Handle("GET /items/{id}", w.page(api.RoleReader, w.itemPage))
	m.Handle("GET /sheets/{id}", w.page(api.RoleReader, w.sheetPage))
	m.Handle("GET /objects/{id}", w.page(api.RoleReader, w.objectPage))

	m.Handle("GET /workflows", w.page(api.RoleReader, w.workflowsPage))
	m.Handle("GET /workflows/new", w.page(api.RoleAdmin, w.editorPage))
	m.Handle("GET /workflows/{name}", w.page(api.RoleReader, w.workflowPage))
	m.Handle("GET /workflows/{name}/edit", w.page(api.RoleAdmin, w.editorPage))
	m.Handle("GET /workflows/{name}/changes", w.page(api.RoleReader, w.changesFragment))
	m.Handle("GET /ui/catalog", w.page(api.RoleReader, w.catalog))
	m.Handle("POST /ui/draft", w.page(api.RoleReader, w.draft))

	m.Handle("GET /operations", w.page(api.RoleReader, w.operationsPage))
	m.Handle("GET /audit", w.page(api.RoleReader, w.auditPage))
	m.Handle("GET /search", w.page(api.RoleReader, w.searchPage))
	m.Handle("GET /documents", w.page(api.RoleReader, w.documentsPage))

	m.Handle("/ui/api/", w.handle(w.proxy))
	m.Handle("/", w.handle(func(rw http.ResponseWriter, r *http.Request) error {
		return notFoundf("there is no page at %s", r.URL.Path)
	}))
}

// httpError is an error with a status and a message safe to show.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status, fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return errorf(http.StatusNotFound, format, args...)
}

var errForbidden = errorf(http.StatusForbidden, "your token's role may not do this")

// handle adapts a handler that returns an error: public errors are shown, others logged.
func (w *Web) handle(fn func(rw http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if err := fn(rw, r); err != nil {
			w.fail(rw, r, err)
		}
	})
}

func (w *Web) fail(rw http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		if nf, ok := errors.AsType[*store.NotFoundError](err); ok {
			he = &httpError{http.StatusNotFound, nf.Error()}
		} else if errors.Is(err, store.ErrNotFound) {
			he = &httpError{http.StatusNotFound, "not found"}
		} else {
			w.log.Error("web request", "method", r.Method, "path", r.URL.Path, "error", err)
			he = &httpError{http.StatusInternalServerError, "something went wrong; the cause is in the server log"}
		}
	}
	if strings.HasPrefix(r.URL.Path, "/ui/") || r.Header.Get("Accept") == "application/json" {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(he.status)
		fmt.Fprintf(rw, "{\"message\":%s}\n", strconv.Quote(he.msg))
		return
	}
	s, _ := w.sessions.fromRequest(r)
	w.render(rw, r, he.status, "error", s, pageData{Title: http.StatusText(he.status), Data: he.msg})
}

// pageData is what every page template gets.
type pageData struct {
	Title   string
	Nav     string
	Session *session
	Data    any
	// Problems are shown as a banner on every page: what keeps the server from working now.
	Problems []string
}

// Admin reports whether the signed-in person may change things.
func (p pageData) Admin() bool { return p.Session != nil && p.Session.role == api.RoleAdmin }

// CSRF is the session's CSRF token, for forms.
func (p pageData) CSRF() string {
	if p.Session == nil {
		return ""
	}
	return p.Session.csrf
}

// Role is the signed-in role.
func (p pageData) Role() string {
	if p.Session == nil {
		return ""
	}
	return string(p.Session.role)
}

var funcs = template.FuncMap{
	"itemState":  itemStateWords,
	"taskState":  taskStateWords,
	"jobState":   jobStateWords,
	"percent":    func(f float64) int { return int(f*100 + 0.5) },
	"duration":   humanDuration,
	"took":       tookDuration,
	"bytes":      humanBytes,
	"time":       func(t time.Time) string { return t.Local().Format("2006-01-02 15:04") },
	"stamp":      func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05.000") },
	"outcome":    outcomeClass,
	"add":        func(a, b int) int { return a + b },
	"joinEvents": func(l []string) string { return strings.Join(l, ", ") },
	"diffMark":   diffMark,
}

func (w *Web) parseTemplates() {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || strings.HasPrefix(base, "_") {
			continue
		}
		t := template.New(base).Funcs(funcs)
		t = template.Must(t.ParseFS(templateFS, "templates/layout.html", "templates/_*.html", n))
		w.pages[base] = t
	}
}

// render writes a page in the layout; a fragment (name starting with "frag-") without it.
func (w *Web) render(rw http.ResponseWriter, r *http.Request, status int, name string, s *session, d pageData) {
	d.Session = s
	if w.cfg.Problems != nil && s != nil {
		d.Problems = w.cfg.Problems(r.Context())
	}
	t, ok := w.pages[name]
	if !ok {
		panic("web: no template " + name)
	}
	entry := "layout"
	if strings.HasPrefix(name, "frag-") {
		entry = "fragment"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, entry, d); err != nil {
		w.log.Error("web render", "template", name, "error", err)
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-store")
	rw.WriteHeader(status)
	_, _ = rw.Write(buf.Bytes())
}

// Plain words for states, as a person reads them.

func itemStateWords(s record.ItemState) string {
	switch s {
	case record.ItemCreated:
		return "arriving"
	case record.ItemWritten:
		return "in progress"
	case record.ItemProcessed:
		return "processed"
	case record.ItemIngested:
		return "done"
	}
	return string(s)
}

func taskStateWords(s record.TaskState) string {
	switch s {
	case record.TaskBlocked:
		return "waiting for its events"
	case record.TaskReady:
		return "queued"
	case record.TaskRunning:
		return "running"
	case record.TaskComplete:
		return "done"
	case record.TaskFailed:
		return "failed"
	case record.TaskSkipped:
		return "not needed"
	case record.TaskCanceled:
		return "canceled"
	}
	return string(s)
}

func jobStateWords(s record.JobState) string {
	switch s {
	case record.JobRunning:
		return "running"
	case record.JobComplete:
		return "complete"
	case record.JobFailed:
		return "failed"
	case record.JobCanceled:
		return "canceled"
	}
	return string(s)
}

func humanDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()+0.5))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// tookDuration is how long an attempt ran: milliseconds under a second (most attempts), as
// [humanDuration] above; "—" when it ended as it started (within the clock's resolution).
func tookDuration(d time.Duration) string {
	if d > 0 && d < time.Second {
		return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
	}
	return humanDuration(d)
}

func humanBytes(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
}

func pathID(r *http.Request, name string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, notFoundf("%s must be a positive number, not %q", name, r.PathValue(name))
	}
	return id, nil
}
