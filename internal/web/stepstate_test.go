package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/action"
	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/cli"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/web"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// gate is an action whose tasks run until the test releases them, step by step, with the
// error each returns: the test holds a step in running for as long as it looks. One runs at a
// time, so a second gated step that becomes ready stays ready until the first is released.
type gate struct{ release map[string]chan error }

func newGate(steps ...string) *gate {
	g := &gate{release: map[string]chan error{}}
	for _, s := range steps {
		g.release[s] = make(chan error)
	}
	return g
}

func (g *gate) Spec() action.Spec {
	return action.Spec{Name: "gate", Doc: "Runs until the test releases it.", Concurrency: 1}
}

func (g *gate) Run(ctx context.Context, t *action.Task, _ action.Output) error {
	select {
	case err := <-g.release[t.Step]:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// open lets the running task of step end with err; it fails the test when no task of the step
// takes it (it is not running).
func (g *gate) open(t *testing.T, step string, err error) {
	t.Helper()
	select {
	case g.release[step] <- err:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s is not running to be released", step)
	}
}

// gatedMediathread is examples/mediathread.yaml with the steps named run by the gate action
// instead of exec (their with: dropped), and a step whose when: does not hold for a .mp4.
func gatedMediathread(t *testing.T, gated ...string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "mediathread.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	step, inWith := "", false
	for _, line := range strings.Split(string(src), "\n") {
		if m := regexp.MustCompile(`^  ([a-z-]+):$`).FindStringSubmatch(line); m != nil {
			step = m[1]
		}
		if slices.Contains(gated, step) {
			if inWith && strings.HasPrefix(line, "      ") {
				continue
			}
			inWith = strings.HasPrefix(line, "    with:")
			if inWith {
				continue
			}
			if strings.HasPrefix(line, "    action: ") {
				line = "    action: gate"
			}
		}
		out = append(out, line)
	}
	out = append(out, "  transcode-clips:", "    action: noop", "    needs: [start]", `    when: 'name.endsWith(".mov")'`, "")
	text := strings.Join(out, "\n")
	if n := strings.Count(text, "action: gate"); n != len(gated) {
		t.Fatalf("the example changed: %d steps gated, want %d:\n%s", n, len(gated), text)
	}
	return []byte(text)
}

// stepSurfaces reads an item's step states from the three places a person sees them: the
// API's GET /v1/items/{id}, `sluice job show` and the web item page. Each is a map from step
// to "state", or "blocked(need+need)" for a blocked step.
type stepSurfaces struct {
	t      *testing.T
	api    string // base URL of the API
	token  string
	web    *client
	data   string // the data dir `sluice job show` reads
	jobID  int64
	itemID int64
}

func (s *stepSurfaces) fromAPI() (map[string]string, []string) {
	var item struct {
		Steps []struct {
			Name   string   `json:"name"`
			State  string   `json:"state"`
			Needs  []string `json:"needs"`
			Reason string   `json:"reason"`
		} `json:"steps"`
	}
	s.getJSON(fmt.Sprintf("/v1/items/%d", s.itemID), &item)
	m, order := map[string]string{}, []string{}
	for _, st := range item.Steps {
		m[st.Name] = shown(st.State, st.Needs)
		order = append(order, st.Name)
	}
	return m, order
}

func (s *stepSurfaces) getJSON(path string, v any) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), "GET", s.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: %s %s", path, res.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		s.t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

var cliStep = regexp.MustCompile(`([a-z-]+):([a-z]+)(?:\(([^)]*)\))?`)

func (s *stepSurfaces) fromCLI() map[string]string {
	s.t.Helper()
	var out, errb bytes.Buffer
	if code := cli.Main(s.t.Context(), []string{"--data", s.data, "job", "show", fmt.Sprint(s.jobID)}, &out, &errb); code != 0 {
		s.t.Fatalf("sluice job show: exit %d: %s", code, errb.String())
	}
	m := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, fmt.Sprint(s.itemID)+" ") {
			continue
		}
		for _, f := range cliStep.FindAllStringSubmatch(line, -1) {
			var needs []string
			if f[3] != "" {
				needs = strings.Split(f[3], "+")
			}
			m[f[1]] = shown(f[2], needs)
		}
	}
	return m
}

var webStep = regexp.MustCompile(`data-step="([^"]+)" data-state="([^"]+)" data-needs="([^"]*)"`)

func (s *stepSurfaces) fromWeb() map[string]string {
	s.t.Helper()
	res, page := s.web.do("GET", fmt.Sprintf("/items/%d", s.itemID), nil, nil)
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("item page: %s", res.Status)
	}
	m := map[string]string{}
	for _, f := range webStep.FindAllStringSubmatch(page, -1) {
		var needs []string
		if f[3] != "" {
			needs = strings.Split(f[3], "+")
		}
		m[f[1]] = shown(f[2], needs)
	}
	return m
}

// shown is a step's state as the test compares it: what a blocked step needs is part of it.
func shown(state string, needs []string) string {
	if state == string(record.TaskBlocked) && len(needs) > 0 {
		return state + "(" + strings.Join(needs, "+") + ")"
	}
	return state
}

// until polls the three surfaces until each shows want for every step (a want of "a|b" takes
// either) and the API's states satisfy also (when not nil), and returns what they showed.
func (s *stepSurfaces) until(what string, want map[string]string, also ...func(map[string]string) bool) map[string]string {
	s.t.Helper()
	var got map[string]string
	poll.Until(s.t, 30*time.Second, what, func() (bool, string) {
		a, _ := s.fromAPI()
		c, w := s.fromCLI(), s.fromWeb()
		got = a
		for _, f := range also {
			if !f(a) {
				return false, fmt.Sprintf("the API shows %v", a)
			}
		}
		for name, m := range map[string]map[string]string{"API": a, "CLI": c, "web": w} {
			if len(m) != len(want) {
				return false, fmt.Sprintf("%s shows %d steps, want %d: %v", name, len(m), len(want), m)
			}
			for step, st := range want {
				if !slices.Contains(strings.Split(st, "|"), m[step]) {
					return false, fmt.Sprintf("%s shows %s %s, want %s (all: %v)", name, step, m[step], st, m)
				}
			}
			for step := range m {
				if m[step] != a[step] {
					return false, fmt.Sprintf("%s shows %s %s, the API %s", name, step, m[step], a[step])
				}
			}
		}
		return true, ""
	})
	return got
}

// TestMediathreadStepStates runs examples/mediathread.yaml step by step, its extractor, its two
// transcoder-dependent steps and submit held by a gate the test opens, and checks at each
// moment that the API, `sluice job show` and the web item page show every declared step with
// the same state: blocked with the events it still needs (the transcoder's et-job-finished, or
// other steps' events), ready behind a running step, running, complete, skipped for a step whose
// when: does not hold and for steps the run never reached, and failed for submit, which is
// made to fail. GET /v1/jobs/{id}/waits lists the job waiting on et-job-finished meanwhile.
func TestMediathreadStepStates(t *testing.T) {
	t.Parallel()
	requireTools(t, "sh")
	dir := t.TempDir()
	g := newGate("extract-metadata", "pull-thumbnails", "copy-to-cunix", "submit")
	n, err := node.Open(t.Context(), node.Config{DataDir: dir, Engine: true, GCInterval: -1, Actions: []action.Action{g}})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := api.OpenTokenStore(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	backend := workerproto.NewBackend(n.Engine, n.Blobs, n.Worker)
	a := api.New(api.Config{Backend: backend, Records: n.Store, Tokens: tokens})
	ui := web.New(web.Config{Backend: backend, Records: n.Store, Tokens: tokens, API: a.Handler()})
	apiSrv, webSrv := httptest.NewServer(a.Handler()), httptest.NewServer(ui.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	n.Start(ctx)
	t.Cleanup(func() {
		apiSrv.Close()
		webSrv.Close()
		n.Stop(5 * time.Second)
		cancel()
		n.Close()
	})
	admin, err := tokens.Create(api.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	browser := (&bundle{url: webSrv.URL, n: n}).client(t)
	browser.signIn(admin)

	if _, _, err := n.Engine.ApplyWorkflow(t.Context(), gatedMediathread(t, "extract-metadata", "pull-thumbnails", "copy-to-cunix", "submit"), "mediathread.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := n.Engine.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "mediathread-video"})
	if err != nil {
		t.Fatal(err)
	}
	sha, size, err := n.Blobs.Put(t.Context(), strings.NewReader("not really a video"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Engine.AddRoots(t.Context(), job, []engine.Root{{Name: "lecture.mp4", BlobSHA256: sha, Size: size}}); err != nil {
		t.Fatal(err)
	}
	items, err := n.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID})
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v %v", items, err)
	}
	s := &stepSurfaces{t: t, api: apiSrv.URL, token: admin, web: browser, data: dir, jobID: job.ID, itemID: items[0].ID}
	history := map[string][]string{} // each step's states as seen, in order
	see := func(m map[string]string) {
		for step, st := range m {
			st, _, _ = strings.Cut(st, "(")
			if h := history[step]; len(h) == 0 || h[len(h)-1] != st {
				history[step] = append(h, st)
			}
		}
	}

	// The extractor runs (held); create-transcode runs through; the rest is blocked on the
	// transcoder's event or on other steps; transcode-clips does not apply to a .mp4.
	see(s.until("the extractor running, the rest blocked", map[string]string{
		"extract-metadata": "running",
		"create-transcode": "complete",
		"pull-thumbnails":  "blocked(et-job-finished)",
		"copy-to-cunix":    "blocked(et-job-finished)",
		"submit":           "blocked(metadata-extracted+poster-created+uploaded-to-cunix)",
		"email-success":    "blocked(submitted)",
		"email-failure":    "blocked(failed)",
		"transcode-clips":  "skipped",
	}))
	if _, order := s.fromAPI(); strings.Join(order, ",") != "extract-metadata,create-transcode,pull-thumbnails,copy-to-cunix,submit,email-success,email-failure,transcode-clips" {
		t.Errorf("the API lists the steps in the order %v, not the workflow's", order)
	}
	g.open(t, "extract-metadata", nil)
	see(s.until("the extractor complete", map[string]string{
		"extract-metadata": "complete",
		"create-transcode": "complete",
		"pull-thumbnails":  "blocked(et-job-finished)",
		"copy-to-cunix":    "blocked(et-job-finished)",
		"submit":           "blocked(poster-created+uploaded-to-cunix)",
		"email-success":    "blocked(submitted)",
		"email-failure":    "blocked(failed)",
		"transcode-clips":  "skipped",
	}))

	// What the job waits on: the transcoder's event, for two steps of the one item, with the
	// key create-transcode gave it.
	var waits struct {
		State  string `json:"state"`
		Events []struct {
			Event   string   `json:"event"`
			Waiting int      `json:"waiting"`
			Steps   []string `json:"steps"`
		} `json:"events"`
		Steps []struct {
			Step     string   `json:"step"`
			Needs    []string `json:"needs"`
			Items    int      `json:"items"`
			External bool     `json:"external"`
		} `json:"steps"`
		Items []struct {
			ItemID int64    `json:"item_id"`
			Step   string   `json:"step"`
			Keys   []string `json:"keys"`
		} `json:"items"`
		ItemsRead int `json:"items_read"`
	}
	s.getJSON(fmt.Sprintf("/v1/jobs/%d/waits", job.ID), &waits)
	if waits.State != "running" || len(waits.Events) != 1 || waits.Events[0].Event != "et-job-finished" || waits.Events[0].Waiting != 2 ||
		strings.Join(waits.Events[0].Steps, ",") != "pull-thumbnails,copy-to-cunix" || waits.ItemsRead != 1 {
		t.Fatalf("waits: %+v; want et-job-finished waited on by pull-thumbnails and copy-to-cunix of 1 item", waits)
	}
	var stepsWaiting []string
	for _, sw := range waits.Steps {
		stepsWaiting = append(stepsWaiting, fmt.Sprintf("%s:%s:%d:%v", sw.Step, strings.Join(sw.Needs, "+"), sw.Items, sw.External))
	}
	if got := strings.Join(stepsWaiting, " "); got != "pull-thumbnails:et-job-finished:1:true copy-to-cunix:et-job-finished:1:true "+
		"submit:poster-created+uploaded-to-cunix:1:false email-success:submitted:1:false email-failure:failed:1:false" {
		t.Errorf("waits' steps: %s", got)
	}
	key := ""
	for _, w := range waits.Items {
		for _, k := range w.Keys {
			if strings.HasPrefix(k, "transcode_job=tj-") {
				key = k
			}
		}
	}
	if key == "" {
		t.Fatalf("waits' items carry no transcode_job key: %+v", waits.Items)
	}

	// The transcoder reports back, by the key.
	k, v, _ := strings.Cut(key, "=")
	body, _ := json.Marshal(map[string]any{"event": "et-job-finished", "key": k, "value": v})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", fmt.Sprintf("%s/v1/jobs/%d/events", apiSrv.URL, job.ID), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("fire et-job-finished: %s", res.Status)
	}
	// One gated step runs, the other is ready behind it.
	got := s.until("one of the transcoder's steps running, the other ready", map[string]string{
		"extract-metadata": "complete",
		"create-transcode": "complete",
		"pull-thumbnails":  "running|ready",
		"copy-to-cunix":    "running|ready",
		"submit":           "blocked(poster-created+uploaded-to-cunix)",
		"email-success":    "blocked(submitted)",
		"email-failure":    "blocked(failed)",
		"transcode-clips":  "skipped",
	}, func(m map[string]string) bool { return m["pull-thumbnails"] != m["copy-to-cunix"] })
	first, second := "pull-thumbnails", "copy-to-cunix"
	if got[first] != "running" {
		first, second = second, first
	}
	if got[first] != "running" || got[second] != "ready" {
		t.Fatalf("%s is %s and %s %s; want one running, one ready", first, got[first], second, got[second])
	}
	see(got)
	g.open(t, first, nil)
	see(s.until(second+" running after "+first, map[string]string{
		"extract-metadata": "complete",
		"create-transcode": "complete",
		first:              "complete",
		second:             "running",
		"submit":           "blocked(" + map[string]string{"pull-thumbnails": "uploaded-to-cunix", "copy-to-cunix": "poster-created"}[first] + ")",
		"email-success":    "blocked(submitted)",
		"email-failure":    "blocked(failed)",
		"transcode-clips":  "skipped",
	}))
	g.open(t, second, nil)
	see(s.until("submit running", map[string]string{
		"extract-metadata": "complete",
		"create-transcode": "complete",
		"pull-thumbnails":  "complete",
		"copy-to-cunix":    "complete",
		"submit":           "running",
		"email-success":    "blocked(submitted)",
		"email-failure":    "blocked(failed)",
		"transcode-clips":  "skipped",
	}))
	// submit fails for good: email-failure runs, the job fails, and email-success is never
	// reached.
	g.open(t, "submit", action.Permanent(errors.New("the archive refused the submission")))
	see(s.until("submit failed and the job over", map[string]string{
		"extract-metadata": "complete",
		"create-transcode": "complete",
		"pull-thumbnails":  "complete",
		"copy-to-cunix":    "complete",
		"submit":           "failed",
		"email-success":    "skipped",
		"email-failure":    "complete",
		"transcode-clips":  "skipped",
	}))

	want := map[string]string{
		"extract-metadata": "running complete",
		second:             "blocked ready running complete",
		first:              "blocked running complete",
		"submit":           "blocked running failed",
		"email-success":    "blocked skipped",
		"email-failure":    "blocked complete",
		"transcode-clips":  "skipped",
	}
	for step, w := range want {
		if got := strings.Join(history[step], " "); got != w {
			t.Errorf("%s went %s, want %s", step, got, w)
		}
	}
	// Skipped steps say why; the failed one its error and attempt.
	var item struct {
		Steps []struct {
			Name     string `json:"name"`
			Reason   string `json:"reason"`
			Error    string `json:"error"`
			Attempts int    `json:"attempts"`
		} `json:"steps"`
	}
	s.getJSON(fmt.Sprintf("/v1/items/%d", s.itemID), &item)
	for _, st := range item.Steps {
		switch st.Name {
		case "transcode-clips":
			if !strings.Contains(st.Reason, `when: name.endsWith(".mov") did not hold`) {
				t.Errorf("transcode-clips' reason: %q", st.Reason)
			}
		case "email-success":
			if st.Reason != "not reached: submitted never fired" {
				t.Errorf("email-success's reason: %q", st.Reason)
			}
		case "submit":
			if !strings.Contains(st.Error, "the archive refused the submission") || st.Attempts != 1 {
				t.Errorf("submit: attempt %d, error %q", st.Attempts, st.Error)
			}
		}
	}
	s.getJSON(fmt.Sprintf("/v1/jobs/%d/waits", job.ID), &waits)
	if waits.State != "failed" || len(waits.Events) != 0 || len(waits.Items) != 0 {
		t.Errorf("the failed job still waits: %+v", waits)
	}
}
