package graph_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/module"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/worker"
)

// modGraph is a synthetic module graph: "path@version" → its requirements, "path@version" each.
type modGraph map[string][]string

// writeProxy writes g as a GOPROXY directory (.mod, .info and list files, escaped paths).
func writeProxy(t testing.TB, dir string, g modGraph) {
	t.Helper()
	lists := map[string][]string{}
	for mv, reqs := range g {
		p, v, _ := strings.Cut(mv, "@")
		ep, err := module.EscapePath(p)
		if err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(dir, ep, "@v")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "module %s\n\ngo 1.16\n", p)
		if len(reqs) > 0 {
			b.WriteString("\nrequire (\n")
			for _, r := range reqs {
				rp, rv, _ := strings.Cut(r, "@")
				fmt.Fprintf(&b, "\t%s %s\n", rp, rv)
			}
			b.WriteString(")\n")
		}
		if err := os.WriteFile(filepath.Join(d, v+".mod"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		info := fmt.Sprintf(`{"Version":%q,"Time":"2020-01-01T00:00:00Z"}`, v)
		if err := os.WriteFile(filepath.Join(d, v+".info"), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
		lists[d] = append(lists[d], v)
	}
	for d, vs := range lists {
		if err := os.WriteFile(filepath.Join(d, "list"), []byte(strings.Join(vs, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goTool returns a function running the real go tool, offline on the file:// proxy, in a new
// go 1.16 main module requiring the roots (with a module cache of its own).
func goTool(t testing.TB, proxy string, roots []string) func(args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the oracle needs the go tool: %v", err)
	}
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("module example.com/main\n\ngo 1.16\n\nrequire (\n")
	for _, r := range roots {
		p, v, _ := strings.Cut(r, "@")
		fmt.Fprintf(&b, "\t%s %s\n", p, v)
	}
	b.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOPROXY=file://"+proxy, "GOSUMDB=off", "GONOSUMDB=*", "GONOSUMCHECK=1", "GOPRIVATE=",
		"GOFLAGS=-mod=mod -modcacherw", "GOTOOLCHAIN=local", "GOMODCACHE="+filepath.Join(dir, "modcache"), "GOWORK=off")
	return func(args ...string) string {
		cmd := exec.Command(gobin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go %v: %v\n%s", args, err, stderr)
		}
		return string(out)
	}
}

// oracle runs the real go tool, offline on the file:// proxy, for a go 1.16 main module requiring
// the roots: the edges of `go mod graph` (but the main module's and go@ ones) and the build list
// of `go list -m all` (but the main module), as pkg@version.
func oracle(t testing.TB, proxy string, roots []string) ([]graph.Edge, []string) {
	t.Helper()
	run := goTool(t, proxy, roots)
	var edges []graph.Edge
	for _, line := range strings.Split(strings.TrimSpace(run("mod", "graph")), "\n") {
		from, to, _ := strings.Cut(line, " ")
		if from == "example.com/main" || strings.HasPrefix(to, "go@") || strings.HasPrefix(to, "toolchain@") {
			continue
		}
		edges = append(edges, graph.Edge{From: from, To: to})
	}
	sortEdges(edges)
	var list []string
	for i, line := range strings.Split(strings.TrimSpace(run("list", "-m", "all")), "\n") {
		if i == 0 {
			continue // the main module
		}
		list = append(list, strings.Replace(line, " ", "@", 1))
	}
	sort.Strings(list)
	return edges, list
}

func sortEdges(es []graph.Edge) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].From != es[j].From {
			return es[i].From < es[j].From
		}
		return es[i].To < es[j].To
	})
}

// kit is an engine, a worker and the graph's actions on one store.
type kit struct {
	*enginetest.Kit
	g *graph.Graph
}

// startKit starts an engine whose graph actions run workers at once each.
func startKit(t testing.TB, open enginetest.Open, workers int, cfg graph.Config) *kit {
	t.Helper()
	g := graph.New(cfg)
	acts := append(g.Actions(), basic.NewPass())
	conc := map[string]int{}
	for _, a := range acts {
		conc[a.Spec().Name] = workers
	}
	k := enginetest.StartWith(t, open, enginetest.Config{
		Domains: map[string]engine.Domain{graph.DomainName: graph.Domain{}},
		Worker:  func(c *worker.Config) { c.Concurrency = conc },
	}, acts...)
	src, _ := builtin.Source("graph")
	k.ApplyWorkflow(t, string(src))
	return &kit{Kit: k, g: g}
}

// startRequest starts a graph request's job.
func (k *kit) startRequest(t testing.TB, r graph.Request) *record.Job {
	t.Helper()
	var md map[string]any
	b, _ := json.Marshal(r)
	_ = json.Unmarshal(b, &md)
	job, _, err := k.Engine.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "graph"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Engine.AddRoots(t.Context(), job, []engine.Root{{Name: "request", Metadata: map[string]any{"request": md}}}); err != nil {
		t.Fatal(err)
	}
	return job
}

// result waits for a request and returns its result.
func (k *kit) result(t testing.TB, job *record.Job, d time.Duration) *graph.Result {
	t.Helper()
	j := k.WaitJob(t, job.ID, d)
	if j.State != record.JobComplete {
		t.Fatalf("job %d %s: %s", j.ID, j.State, j.Error)
	}
	res, err := graph.LoadResult(t.Context(), k.Store, job.ID)
	if err != nil {
		t.Fatalf("result of job %d: %v", job.ID, err)
	}
	return res
}

// run runs one request to its end.
func (k *kit) run(t testing.TB, r graph.Request) *graph.Result {
	t.Helper()
	return k.result(t, k.startRequest(t, r), 2*time.Minute)
}

// workItems returns a job's work items' metadata (not the request item's).
func workItems(t testing.TB, s store.Store, jobID int64) []map[string]any {
	t.Helper()
	items, err := s.ItemList(t.Context(), store.ItemListParams{JobID: jobID, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, it := range items {
		if it.ParentID == 0 {
			continue
		}
		var md map[string]any
		if err := json.Unmarshal(it.Metadata, &md); err != nil {
			t.Fatal(err)
		}
		md["_error"] = it.Error
		out = append(out, md)
	}
	return out
}

func status(md map[string]any, k string) string {
	st, _ := md["status"].(map[string]any)
	s, _ := st[k].(string)
	return s
}

// countingProxy serves dir over HTTP on loopback, counting the requests per path; delay, when
// set, answers the paths it names only after it returns.
type countingProxy struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
}

func newCountingProxy(t testing.TB, dir string, hang func(path string) bool) *countingProxy {
	t.Helper()
	cp := &countingProxy{counts: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	cp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.mu.Lock()
		cp.counts[r.URL.Path]++
		cp.mu.Unlock()
		if hang != nil && hang(r.URL.Path) {
			<-r.Context().Done() // a proxy that never answers
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(cp.Close)
	return cp
}

func (cp *countingProxy) fetches() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := make(map[string]int, len(cp.counts))
	for k, v := range cp.counts {
		out[k] = v
	}
	return out
}

// loopback is an egress policy that lets the graph reach a test's proxy.
func loopback(t testing.TB) *egress.Policy {
	t.Helper()
	p, err := egress.New([]string{"127.0.0.0/8", "::1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// randomGraph makes a synthetic DAG of n modules (each with 1–3 versions) in levels: module i
// sits below module (i-1)/3, whose first version requires i's first version (so every module is
// reachable), and each version requires up to 3 random versions of modules of the next level.
// Every path is as short as the levels are few (log3 n): the engine bounds an item tree's depth
// (64 by default), and a traversal's work items follow the graph's paths. The root is module 0.
func randomGraph(seed int64, n int) (modGraph, []string) {
	rng := rand.New(rand.NewSource(seed))
	g := modGraph{}
	nver := make([]int, n)
	for i := range nver {
		nver[i] = 1 + rng.Intn(3)
	}
	name := func(i int) string {
		if i%7 == 3 {
			return fmt.Sprintf("example.com/Mod%d", i) // case-escaped on the proxy: example.com/!mod3
		}
		return fmt.Sprintf("example.com/m%d", i)
	}
	// The levels of the 3-ary tree are index ranges [start(L), start(L+1)).
	start := func(level int) int { return (pow3(level) - 1) / 2 }
	level := func(i int) int {
		l := 0
		for start(l+1) <= i {
			l++
		}
		return l
	}
	for i := 0; i < n; i++ {
		lo, hi := start(level(i)+1), min(start(level(i)+2), n)
		for v := 0; v < nver[i]; v++ {
			var reqs []string
			if v == 0 { // the tree's edges first: dedupByPath keeps them
				for c := 3*i + 1; c <= 3*i+3 && c < n; c++ {
					reqs = append(reqs, fmt.Sprintf("%s@v1.0.0", name(c)))
				}
			}
			for k := rng.Intn(4); k > 0 && lo < hi; k-- {
				j := lo + rng.Intn(hi-lo)
				reqs = append(reqs, fmt.Sprintf("%s@v1.%d.0", name(j), rng.Intn(nver[j])))
			}
			g[fmt.Sprintf("%s@v1.%d.0", name(i), v)] = dedupByPath(reqs)
		}
	}
	return g, []string{name(0) + "@v1.0.0"}
}

func pow3(k int) int {
	p := 1
	for range k {
		p *= 3
	}
	return p
}

// dedupByPath keeps the first requirement of each module path (a go.mod requires a path once).
func dedupByPath(reqs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range reqs {
		p, _, _ := strings.Cut(r, "@")
		if !seen[p] {
			seen[p] = true
			out = append(out, r)
		}
	}
	return out
}
