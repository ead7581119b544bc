package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/api"
)

const (
	sessionCookie = "sluice_session"
	// signinCookie carries the sign-in form's CSRF token before there is a session (a double
	// submit: the form's field must equal the cookie, which another site can neither read nor set).
	signinCookie = "sluice_signin"
	csrfField    = "csrf"
	csrfHeader   = "X-CSRF-Token"
)

// session is a signed-in browser. The token is kept in memory only (never sent back to the
// browser): the UI calls the API's handler with it, so the API checks the role as it would for
// any client. A revoked token ends its sessions at their next request.
type session struct {
	id      string
	token   string
	tokenID string
	role    api.Role
	csrf    string
	expires time.Time
}

// sessions is the server-side session map. Sessions do not survive a restart: people sign in
// again.
type sessions struct {
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[string]*session
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, m: map[string]*session{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("web: crypto/rand: " + err.Error()) // never fails on Linux
	}
	return hex.EncodeToString(b)
}

func (ss *sessions) create(token string, t api.Token) *session {
	s := &session{id: randomHex(32), token: token, tokenID: t.ID, role: t.Role, csrf: randomHex(32),
		expires: ss.now().Add(ss.ttl)}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for id, old := range ss.m { // forget expired sessions as new ones arrive
		if now.After(old.expires) {
			delete(ss.m, id)
		}
	}
	ss.m[s.id] = s
	return s
}

// fromRequest returns the request's live session, extending it.
func (ss *sessions) fromRequest(r *http.Request) (*session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[c.Value]
	if !ok {
		return nil, false
	}
	now := ss.now()
	if now.After(s.expires) {
		delete(ss.m, s.id)
		return nil, false
	}
	s.expires = now.Add(ss.ttl)
	return s, true
}

func (ss *sessions) delete(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// current returns the request's session when its token is still valid, with the token's
// current role.
func (w *Web) current(r *http.Request) (*session, bool) {
	s, ok := w.sessions.fromRequest(r)
	if !ok {
		return nil, false
	}
	t, ok := w.cfg.Tokens.Lookup(s.token)
	if !ok || (t.Role != api.RoleAdmin && t.Role != api.RoleReader) {
		w.sessions.delete(s.id)
		return nil, false
	}
	s.role = t.Role
	return s, true
}

func equalSecret(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// csrfOK checks a state-changing request's CSRF token: the X-CSRF-Token header, or the csrf
// field of a URL-encoded form.
func csrfOK(r *http.Request, s *session) bool {
	if h := r.Header.Get(csrfHeader); h != "" {
		return equalSecret(h, s.csrf)
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return equalSecret(r.PostFormValue(csrfField), s.csrf)
	}
	return false
}

// page wraps a handler that needs a session with at least the role. Without a session a GET
// goes to the sign-in page; a POST without the session's CSRF token, or by a role that may
// not, gets 403.
func (w *Web) page(need api.Role, fn func(rw http.ResponseWriter, r *http.Request, s *session) error) http.Handler {
	return w.handle(func(rw http.ResponseWriter, r *http.Request) error {
		s, ok := w.current(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/ui/") {
				http.Redirect(rw, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return nil
			}
			return errorf(http.StatusUnauthorized, "sign in first")
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(rw, r.Body, 4<<20)
			if !csrfOK(r, s) {
				return errorf(http.StatusForbidden, "this form has expired or did not come from Sluice: reload the page and try again")
			}
		}
		if need == api.RoleAdmin && s.role != api.RoleAdmin {
			return errForbidden
		}
		return fn(rw, r, s)
	})
}

func (w *Web) secure(r *http.Request) bool { return r.TLS != nil || w.cfg.SecureCookies }

func (w *Web) signinPage(rw http.ResponseWriter, r *http.Request) error {
	if _, ok := w.current(r); ok {
		http.Redirect(rw, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return nil
	}
	return w.showSignin(rw, r, http.StatusOK, "")
}

func (w *Web) showSignin(rw http.ResponseWriter, r *http.Request, status int, problem string) error {
	tok := randomHex(16)
	http.SetCookie(rw, &http.Cookie{Name: signinCookie, Value: tok, Path: "/signin", HttpOnly: true,
		Secure: w.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	w.render(rw, r, status, "signin", nil, pageData{Title: "Sign in", Data: struct {
		CSRF, Next, Problem string
	}{tok, safeNext(r.FormValue("next")), problem}})
	return nil
}

func (w *Web) signin(rw http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(rw, r.Body, 64<<10)
	c, err := r.Cookie(signinCookie)
	if err != nil || !equalSecret(r.PostFormValue(csrfField), c.Value) {
		return errorf(http.StatusForbidden, "this sign-in form has expired or did not come from Sluice: reload it and try again")
	}
	plain := strings.TrimSpace(r.PostFormValue("token"))
	t, ok := w.cfg.Tokens.Lookup(plain)
	switch {
	case !ok:
		return w.showSignin(rw, r, http.StatusUnauthorized, "That token is not known here. Create one with `sluice token create --role admin` (or reader).")
	case t.Role != api.RoleAdmin && t.Role != api.RoleReader:
		return w.showSignin(rw, r, http.StatusForbidden, "Worker tokens can only serve workers; sign in with an admin or reader token.")
	}
	s := w.sessions.create(plain, t)
	http.SetCookie(rw, &http.Cookie{Name: sessionCookie, Value: s.id, Path: "/", HttpOnly: true,
		Secure: w.secure(r), SameSite: http.SameSiteStrictMode})
	http.SetCookie(rw, &http.Cookie{Name: signinCookie, Value: "", Path: "/signin", MaxAge: -1})
	http.Redirect(rw, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
	return nil
}

func (w *Web) signout(rw http.ResponseWriter, r *http.Request, s *session) error {
	w.sessions.delete(s.id)
	http.SetCookie(rw, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: w.secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(rw, r, "/signin", http.StatusSeeOther)
	return nil
}

// safeNext keeps redirects after sign-in on this site: next is returned only when it is a path
// on this host — it starts with a single "/", has no scheme, authority or user, no control
// character and no backslash (raw or percent-encoded), and its decoded path is already clean (no
// "//", "." or ".." segments, which browsers may resolve to another host: "/\t/host" is
// "//host" once a browser drops the tab). Anything else gives "/jobs".
func safeNext(next string) string {
	const home = "/jobs"
	if !strings.HasPrefix(next, "/") || strings.ContainsFunc(next, unsafeInPath) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.ContainsFunc(u.Path, unsafeInPath) {
		return home
	}
	if c := path.Clean(u.Path); u.Path != c && u.Path != c+"/" {
		return home
	}
	return next
}

// unsafeInPath reports whether r may not appear in a redirect's path: a control character, which
// browsers drop, or a backslash, which they read as a slash.
func unsafeInPath(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }
