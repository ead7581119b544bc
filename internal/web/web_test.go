package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/web"
	"github.com/sluice-project/sluice/internal/workerproto"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// bundle is a Sluice server in the test process: a real node (engine, workers, converters) on
// a temporary data dir, the API and the web UI.
type bundle struct {
	url    string
	n      *node.Node
	admin  string
	reader string
	worker string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupOn(t, nil)
}

// setupOn is [setup] on the store open opens (nil: the data dir's SQLite file).
func setupOn(t *testing.T, open drivertest.Open) *bundle {
	t.Helper()
	return setupWith(t, open, nil)
}

// setupWith is [setupOn] with the UI's configuration changed by config (nil: as is).
func setupWith(t *testing.T, open drivertest.Open, config func(*web.Config)) *bundle {
	t.Helper()
	dir := t.TempDir()
	cfg := node.Config{DataDir: dir, Engine: true, GCInterval: -1}
	if open != nil {
		cfg.OpenStore = func(context.Context) (store.Store, error) { return open(t), nil }
	}
	n, err := node.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := builtin.Apply(t.Context(), n.Engine, "documents"); err != nil {
		t.Fatal(err)
	}
	tokens, err := api.OpenTokenStore(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	backend := workerproto.NewBackend(n.Engine, n.Blobs, n.Worker)
	wp := workerproto.New(workerproto.Config{Backend: backend, Auth: tokens.WorkerAuth(), LongPoll: 100 * time.Millisecond})
	n.Listen(node.Listener{Wake: wp.Wake, Cancel: wp.CancelTasks})
	n.Fleet.ServeRemotes(wp.Clients)
	a := api.New(api.Config{Backend: backend, Records: n.Store, Tokens: tokens, Workers: wp, ProgressInterval: 100 * time.Millisecond})
	wcfg := web.Config{Backend: backend, Records: n.Store, Tokens: tokens, API: a.Handler()}
	if config != nil {
		config(&wcfg)
	}
	ui := web.New(wcfg)
	hs := httptest.NewServer(ui.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	n.Start(ctx)
	wp.Start(ctx)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		wp.Stop()
		n.Stop(5 * time.Second)
		cancel()
		n.Close()
	})
	b := &bundle{url: hs.URL, n: n}
	for _, p := range []struct {
		dst  *string
		role api.Role
	}{{&b.admin, api.RoleAdmin}, {&b.reader, api.RoleReader}, {&b.worker, api.RoleWorker}} {
		if *p.dst, err = tokens.Create(p.role); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// client is a browser without JavaScript: a cookie jar, redirects not followed.
type client struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (b *bundle) client(t *testing.T) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: b.url, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (c *client) do(method, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// timelineRows matches a row of a timeline, its result the first group.
var timelineRows = regexp.MustCompile(`(?s)<tr class="attempt attempt-(\w+)".*?</tr>`)

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// signIn signs in with the token and returns the session's CSRF token.
func (c *client) signIn(token string) string {
	c.t.Helper()
	_, page := c.do("GET", "/signin", nil, nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("no csrf field on the sign-in page:\n%s", page)
	}
	res, _ := c.do("POST", "/signin", url.Values{"csrf": {m[1]}, "token": {token}}, nil)
	if res.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("sign in: %s", res.Status)
	}
	_, page = c.do("GET", "/jobs", nil, nil)
	m = csrfRE.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("no csrf field on the jobs page:\n%s", page)
	}
	return m[1]
}

func TestSignInAndHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)

	res, _ := c.do("GET", "/jobs", nil, nil)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/signin") {
		t.Fatalf("GET /jobs signed out: %s to %q, want a redirect to /signin", res.Status, res.Header.Get("Location"))
	}
	res, page := c.do("GET", "/signin", nil, nil)
	if got := res.Header.Get("Content-Security-Policy"); got != web.ContentSecurityPolicy {
		t.Errorf("CSP = %q", got)
	}
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(web.ContentSecurityPolicy, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q", res.Header.Get("X-Content-Type-Options"))
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "style=") || strings.Contains(page, "<style") {
		t.Errorf("the sign-in page has inline script or style:\n%s", page)
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]

	// A sign-in POST without the form's token (from another site) is refused.
	res, _ = c.do("POST", "/signin", url.Values{"token": {b.admin}}, nil)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in without its CSRF token: %s, want 403", res.Status)
	}
	res, page = c.do("POST", "/signin", url.Values{"csrf": {csrf}, "token": {"sl_wrong"}}, nil)
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "not known") {
		t.Errorf("unknown token: %s", res.Status)
	}
	_, page = c.do("GET", "/signin", nil, nil)
	csrf = csrfRE.FindStringSubmatch(page)[1]
	res, _ = c.do("POST", "/signin", url.Values{"csrf": {csrf}, "token": {b.worker}}, nil)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("worker token: %s, want 403", res.Status)
	}
	_, page = c.do("GET", "/signin", nil, nil)
	csrf = csrfRE.FindStringSubmatch(page)[1]
	res, _ = c.do("POST", "/signin", url.Values{"csrf": {csrf}, "token": {b.admin}, "next": {"//evil.example/"}}, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/jobs" {
		t.Fatalf("admin sign-in: %s to %q, want 303 to /jobs (never off-site)", res.Status, res.Header.Get("Location"))
	}
	var sc *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "sluice_session" {
			sc = ck
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Secure || len(sc.Value) < 64 {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, a long random id", sc)
	}
	if strings.Contains(sc.Value, b.admin) {
		t.Fatal("the session cookie carries the token")
	}
	res, page = c.do("GET", "/jobs", nil, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="new-job"`) {
		t.Fatalf("GET /jobs signed in as admin: %s; new-job link present: %v", res.Status, strings.Contains(page, `id="new-job"`))
	}
	// The API through the UI: the session's token is used, not sent back.
	res, page = c.do("GET", "/ui/api/workflows", nil, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `"documents"`) {
		t.Fatalf("GET /ui/api/workflows: %s %s", res.Status, page)
	}
	res, _ = c.do("GET", "/ui/api/workers/Pdf", nil, nil)
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("the worker protocol through the UI: %s, want 404", res.Status)
	}
	// The API itself still wants its bearer token, even with a session cookie.
	res, _ = c.do("GET", "/v1/jobs", nil, nil)
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/jobs with only a session cookie: %s, want 401", res.Status)
	}
}

func TestRolesAndCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.client(t)
	adminCSRF := admin.signIn(b.admin)
	reader := b.client(t)
	readerCSRF := reader.signIn(b.reader)

	// A job to act on.
	res, body := admin.do("POST", "/ui/api/jobs", nil, map[string]string{"X-CSRF-Token": adminCSRF, "Content-Type": "application/json"})
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("empty job body: %s %s", res.Status, body)
	}
	job, _, err := b.n.Engine.CreateJob(t.Context(), engineParams("documents"))
	if err != nil {
		t.Fatal(err)
	}
	jobPath := "/jobs/" + itoa(job.ID)

	_, page := reader.do("GET", "/jobs", nil, nil)
	if strings.Contains(page, `id="new-job"`) {
		t.Error("a reader sees the new-job link")
	}
	_, page = reader.do("GET", jobPath, nil, nil)
	for _, control := range []string{`id="cancel"`, `id="retry"`, `action="` + jobPath + `/cancel"`} {
		if strings.Contains(page, control) {
			t.Errorf("a reader sees %s on the job page", control)
		}
	}
	res, _ = reader.do("GET", "/jobs/new", nil, nil)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("reader GET /jobs/new: %s, want 403", res.Status)
	}
	res, _ = reader.do("POST", jobPath+"/cancel", url.Values{"csrf": {readerCSRF}}, nil)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("reader POST cancel with a good CSRF token: %s, want 403", res.Status)
	}
	res, _ = reader.do("POST", "/ui/api/workflows", nil, map[string]string{"X-CSRF-Token": readerCSRF})
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("reader POST /ui/api/workflows: %s, want 403 (from the API)", res.Status)
	}

	// Forged POSTs: no token, another session's token, a token in the wrong place.
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"another session's token", url.Values{"csrf": {readerCSRF}}, nil},
		{"empty token", url.Values{"csrf": {""}}, nil},
	} {
		res, _ := admin.do("POST", jobPath+"/cancel", tc.form, tc.hdr)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("forged cancel (%s): %s, want 403", tc.name, res.Status)
		}
	}
	res, _ = admin.do("POST", "/ui/api/jobs/"+itoa(job.ID)+"/cancel", nil, nil)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("forged POST through /ui/api without X-CSRF-Token: %s, want 403", res.Status)
	}
	if j, _ := b.n.Store.JobGet(t.Context(), job.ID); j.State != "running" {
		t.Fatalf("a forged POST changed the job: %s", j.State)
	}
	res, _ = admin.do("POST", jobPath+"/cancel", url.Values{"csrf": {adminCSRF}}, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin cancel: %s", res.Status)
	}
	if j, _ := b.n.Store.JobGet(t.Context(), job.ID); j.State != "canceled" {
		t.Fatalf("after cancel the job is %s", j.State)
	}
	// The API's rule holds in the UI: a canceled job cannot be canceled again.
	res, page = admin.do("POST", jobPath+"/cancel", url.Values{"csrf": {adminCSRF}}, nil)
	if res.StatusCode != http.StatusConflict || !strings.Contains(page, "not running") {
		t.Errorf("cancel a canceled job: %s", res.Status)
	}

	// Signing out ends the session.
	res, _ = admin.do("POST", "/signout", url.Values{"csrf": {adminCSRF}}, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %s", res.Status)
	}
	res, _ = admin.do("GET", "/ui/api/jobs", nil, nil)
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("after sign-out: %s, want 401", res.Status)
	}
}

func TestUserTextEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.admin)
	ctx := t.Context()
	job, _, err := b.n.Engine.CreateJob(ctx, engineParams("documents"))
	if err != nil {
		t.Fatal(err)
	}
	evil := `<img src=x onerror=alert(1)><script>alert(2)</script>.txt`
	addRoot(t, b, job, evil, "hello")
	_, page := c.do("GET", "/jobs/"+itoa(job.ID), nil, nil)
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") {
		t.Fatal("an item's name reached the page unescaped")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(2)&lt;/script&gt;") {
		t.Fatal("the item's name is not shown (escaped)")
	}
}

// TestEventsAndOperations fires a declared external event from the job page's form, by a
// metadata correlation key, after the operations page has listed the task waiting for it.
func TestEventsAndOperations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	src := "name: waits\nexternal: [approved]\nsteps:\n  publish: {action: noop, needs: [start, approved]}\n"
	if _, _, err := b.n.Engine.ApplyWorkflow(ctx, []byte(src), "waits.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := b.n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "waits", Metadata: map[string]any{"ticket": "t-7"}})
	if err != nil {
		t.Fatal(err)
	}
	addRoot(t, b, job, "request.txt", "please approve")
	c := b.client(t)
	csrf := c.signIn(b.admin)
	jobPath := "/jobs/" + itoa(job.ID)

	_, page := c.do("GET", "/operations", nil, nil)
	if !strings.Contains(page, "Waiting on external events") || !strings.Contains(page, "approved") || !strings.Contains(page, "publish") {
		t.Fatalf("the operations page does not list the step waiting for approved:\n%s", page)
	}
	_, page = c.do("GET", jobPath, nil, nil)
	if !strings.Contains(page, `id="fire"`) || !strings.Contains(page, "<option>approved</option>") {
		t.Fatal("the job page offers no way to send the declared event")
	}
	res, page := c.do("POST", jobPath+"/events", url.Values{"csrf": {csrf}, "event": {"nope"}, "correlation": {"ticket=t-7"}}, nil)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("an undeclared event: %s, want 422 (the API's rule)", res.Status)
	}
	res, _ = c.do("POST", jobPath+"/events", url.Values{"csrf": {csrf}, "event": {"approved"}, "correlation": {"ticket=t-7"}}, nil)
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "notice=event") {
		t.Fatalf("send approved: %s %q", res.Status, res.Header.Get("Location"))
	}
	poll.Until(t, 30*time.Second, "the job to complete once approved", func() (bool, string) {
		j, err := b.n.Store.JobGet(ctx, job.ID)
		if err != nil {
			return false, err.Error()
		}
		return j.State == record.JobComplete, string(j.State)
	})
	_, page = c.do("GET", "/operations", nil, nil)
	if strings.Contains(page, "publish") {
		t.Error("the operations page still lists the step after the event")
	}
}

// TestEditorDraft checks the editor's round trip: the form's model becomes YAML that parses
// back to the same steps, problems name their step and field, and the diagram is drawn.
func TestEditorDraft(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	csrf := c.signIn(b.reader) // checking a draft changes nothing: readers may
	model := `{"model": {"name": "draft", "external": ["ok-from-outside"], "steps": [
		{"name": "detect", "action": "detect", "needs": ["start"], "success": [], "failure": [], "with": {}},
		{"name": "hash", "action": "exec", "needs": ["detected.text", "ok-from-outside"], "success": ["hashed"], "failure": [], "with": {"command": ["sha256sum"], "stdout": "text"}},
		{"name": "bad", "action": "nosuch", "needs": ["never"], "success": [], "failure": [], "with": {}}]}}`
	res, body := c.do("POST", "/ui/draft", nil, map[string]string{"X-CSRF-Token": csrf, "Content-Type": "application/json"})
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("an empty draft: %s", res.Status)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", b.url+"/ui/draft", strings.NewReader(model))
	req.Header.Set("X-CSRF-Token", csrf)
	res, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		YAML   string `json:"yaml"`
		SVG    string `json:"svg"`
		Valid  bool   `json:"valid"`
		Errors []struct {
			Step, Field, Message string
			Line                 int
		} `json:"errors"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Valid || !strings.Contains(out.SVG, "<svg") {
		t.Fatalf("valid=%v svg=%d bytes, want invalid with a diagram", out.Valid, len(out.SVG))
	}
	for _, want := range []string{"name: draft", "external: [ok-from-outside]", "  hash:\n    action: exec\n    needs: [detected.text, ok-from-outside]", "command:\n        - sha256sum"} {
		if !strings.Contains(out.YAML, want) {
			t.Errorf("the YAML lacks %q:\n%s", want, out.YAML)
		}
	}
	found := false
	for _, d := range out.Errors {
		if d.Step == "bad" && d.Field == "action" && d.Line > 0 {
			found = true
		}
		if d.Step != "bad" {
			t.Errorf("a problem at step %q: %+v", d.Step, d)
		}
	}
	if !found {
		t.Errorf("no problem at step bad's action (with its line): %+v", out.Errors)
	}
	_ = body
}

// TestSearchPage: the search box finds documents by their text, marks the matched words, escapes
// what it shows, and says what is wrong with a bad query.
func TestSearchPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.reader)
	job, _, err := b.n.Engine.CreateJob(t.Context(), engineParams("documents"))
	if err != nil {
		t.Fatal(err)
	}
	addRoot(t, b, job, "fox.txt", "The quick brown fox jumps over <b>the</b> lazy dog.")
	addRoot(t, b, job, "other.txt", "Nothing to see here.")
	var page string
	poll.Until(t, 60*time.Second, "fox.txt to be found", func() (bool, string) {
		var resp *http.Response
		resp, page = c.do("GET", "/search?q=fox", nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("search: %d", resp.StatusCode)
		}
		return strings.Contains(page, "fox.txt"), page
	})
	if !strings.Contains(page, "fox.txt") || strings.Contains(page, "other.txt") {
		t.Fatalf("hits: want fox.txt only:\n%s", page)
	}
	if !strings.Contains(page, "<mark>fox</mark>") {
		t.Errorf("the matched word is not marked:\n%s", page)
	}
	if strings.Contains(page, "<b>the</b>") {
		t.Error("the document's text reached the page unescaped")
	}
	// The filters: a content type or a metadata value it lacks hides it; the ones it has keep it.
	for q, want := range map[string]bool{"q=fox&type=application%2Fpdf": false, "q=fox&type=" + url.QueryEscape(textType(t, b, job)): true,
		"q=fox&meta=batch%3Dnope": false} {
		if _, page := c.do("GET", "/search?"+q, nil, nil); strings.Contains(page, `fox.txt</a>`) != want {
			t.Errorf("/search?%s shows fox.txt: %v, want %v", q, !want, want)
		}
	}
	resp, page := c.do("GET", "/search?q=-cat", nil, nil) // only an exclusion
	if resp.StatusCode != 400 || !strings.Contains(page, "role=\"alert\"") {
		t.Errorf("bad query: %d\n%s", resp.StatusCode, page)
	}
}

// TestSignInNext checks that the page a sign-in goes on to (?next=) stays on this host: only a
// clean path is followed, anything a browser could read as another host — a scheme, an
// authority, a control character it drops, a backslash it reads as a slash, an encoded slash —
// gives /jobs.
func TestSignInNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.reader)
	for _, tt := range []struct{ name, next, want string }{
		{"path with a query", "/jobs/1?tab=errors", "/jobs/1?tab=errors"},
		{"path", "/search", "/search"},
		{"root", "/", "/"},
		{"encoded tab (the report)", "/%09/host/x", "/jobs"},
		{"tab", "/\t/host", "/jobs"},
		{"newline", "/\n/host", "/jobs"},
		{"delete", "/\x7f/host", "/jobs"},
		{"backslash", "/\\host", "/jobs"},
		{"encoded backslash", "/%5Chost", "/jobs"},
		{"scheme-relative", "//host", "/jobs"},
		{"encoded slash", "/%2F/host", "/jobs"},
		{"dot segment", "/.//host", "/jobs"},
		{"dot-dot", "/../host", "/jobs"},
		{"absolute URL", "https://x", "/jobs"},
		{"javascript", "javascript:alert(1)", "/jobs"},
		{"leading space", " /x", "/jobs"},
		{"relative", "jobs", "/jobs"},
		{"empty", "", "/jobs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := c.do("GET", "/signin?next="+url.QueryEscape(tt.next), nil, nil)
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != tt.want {
				t.Errorf("GET /signin?next=%q signed in: %s to %q, want 303 to %q", tt.next, res.Status, res.Header.Get("Location"), tt.want)
			}
		})
	}
}

// TestItemAttempts: the item page shows every attempt of the item's tasks, and keeps them after
// a retry that failed again: what the user sees is what happened.
func TestItemAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.reader)
	ctx := t.Context()
	job, _, err := b.n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "documents"})
	if err != nil {
		t.Fatal(err)
	}
	sha, size, err := b.n.Blobs.Put(ctx, strings.NewReader("%PDF-1.4\nnot really a pdf\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.n.Engine.AddRoots(ctx, job, []engine.Root{{Name: "broken.pdf", BlobSHA256: sha, Size: size}}); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitJob(t, b.n.Engine, job.ID, 30*time.Second)
	if err := b.n.Worker.Do(ctx, func(tx *engine.Tx) error { return tx.Retry(job.ID) }); err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.n.Engine, job.ID, 30*time.Second); j.State != record.JobComplete {
		t.Fatalf("job after the retry: %s %s", j.State, j.Error)
	}
	items, err := b.n.Store.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 10})
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v, %v", items, err)
	}
	_, page := c.do("GET", "/items/"+itoa(items[0].ID), nil, nil)
	if !strings.Contains(page, `id="attempts-h"`) {
		t.Fatalf("the item page has no attempts:\n%s", page)
	}
	if strings.Contains(page, "<iframe") || !strings.Contains(page, `id="no-preview"`) {
		t.Errorf("the failed PDF's page embeds it as a preview, or does not say why there is none")
	}
	rows := strings.Count(page, "<td>pdf</td>")
	if rows != 2 {
		t.Errorf("the item page shows %d attempts of pdf, want 2 (the first run and the retry)", rows)
	}
	// The job's timeline, on its page and on a page of its own, shows both runs of pdf, failed,
	// with the reason, each with a bar on the job's time axis.
	for _, path := range []string{"/jobs/" + itoa(job.ID), "/jobs/" + itoa(job.ID) + "/history"} {
		_, page := c.do("GET", path, nil, nil)
		rows := timelineRows.FindAllStringSubmatch(page, -1)
		var pdf []string
		for _, r := range rows {
			if strings.Contains(r[0], "<td>pdf</td>") {
				pdf = append(pdf, r[1])
			}
		}
		if strings.Join(pdf, " ") != "failed failed" || strings.Count(page, `<rect class="run run-failed"`) < 2 {
			t.Errorf("%s's timeline shows pdf attempts %q, want two failed with their bars:\n%s", path, pdf, page)
		}
	}
	_, docs := c.do("GET", "/jobs/"+itoa(job.ID)+"/documents", nil, nil)
	if !strings.Contains(docs, "Errors (1)") {
		t.Errorf("the job's documents page does not list the error after the retry:\n%s", docs)
	}
}

// textType is the content type the documents of job have (the first root's document).
func textType(t *testing.T, b *bundle, job *record.Job) string {
	t.Helper()
	outs, err := b.n.Store.OutputList(t.Context(), store.OutputListParams{JobID: job.ID, Kind: store.OutputDocument, Limit: 1})
	if err != nil || len(outs) == 0 {
		t.Fatalf("the job's documents: %v, %v", outs, err)
	}
	it, err := b.n.Store.ItemGet(t.Context(), outs[0].ItemID)
	if err != nil {
		t.Fatal(err)
	}
	return it.ContentType
}
