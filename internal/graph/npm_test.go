package graph_test

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// npmVersion is one version of a package in a registry fake.
type npmVersion struct {
	Deps, Optional, Peer, Dev map[string]string
	Deprecated                string
}

// npmPackage is a package in a registry fake.
type npmPackage struct {
	Versions map[string]*npmVersion
	Tags     map[string]string
}

// npmRegistry is a registry fake: packages by name, served by the npm registry protocol.
type npmRegistry map[string]*npmPackage

// packument renders a package's packument (what GET /{name} answers).
func (reg npmRegistry) packument(base, name string) []byte {
	p := reg[name]
	versions := map[string]any{}
	for v, m := range p.Versions {
		doc := map[string]any{"name": name, "version": v,
			"dist": map[string]any{"tarball": fmt.Sprintf("%s/%s/-/x-%s.tgz", base, name, v), "shasum": fmt.Sprintf("%x", sha1.Sum([]byte(name+"@"+v)))}} // npm takes equal digests for one package
		if len(m.Deps) > 0 {
			doc["dependencies"] = m.Deps
		}
		if len(m.Optional) > 0 {
			doc["optionalDependencies"] = m.Optional
		}
		if len(m.Peer) > 0 {
			doc["peerDependencies"] = m.Peer
		}
		if len(m.Dev) > 0 {
			doc["devDependencies"] = m.Dev
		}
		if m.Deprecated != "" {
			doc["deprecated"] = m.Deprecated
		}
		versions[v] = doc
	}
	b, _ := json.Marshal(map[string]any{"name": name, "dist-tags": p.Tags, "versions": versions})
	return b
}

// serveNpm serves the registry on loopback, counting the fetches of each packument.
func serveNpm(t testing.TB, reg npmRegistry) (*httptest.Server, func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		mu.Lock()
		counts[name]++
		mu.Unlock()
		if _, ok := reg[name]; !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reg.packument(srv.URL, name))
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range counts {
			out[k] = v
		}
		return out
	}
}

// randomNpm makes a registry of n packages (some scoped) with several versions each, dist-tags
// (latest not always the highest, a next tag on a prerelease), deprecated versions, ranges of
// every form npm writes (^, ~, x-ranges, comparators, ||, hyphen ranges, *, a dist-tag), diamonds,
// a few cycles, optional dependencies and peer dependencies on two hosts; and the roots.
func randomNpm(seed int64, n int) (npmRegistry, []string) {
	rng := rand.New(rand.NewSource(seed))
	pool := []string{"0.1.0", "0.1.4", "0.2.0", "0.2.1", "1.0.0", "1.0.3", "1.1.0", "1.2.0", "1.10.0", "2.0.0", "2.3.1", "3.0.0-beta.1", "3.0.0"}
	name := func(i int) string {
		if i%11 == 5 {
			return fmt.Sprintf("@scope/pkg-%d", i)
		}
		return fmt.Sprintf("pkg-%d", i)
	}
	reg := npmRegistry{}
	vers := make([][]string, n)
	for i := 0; i < n; i++ {
		var vs []string
		for _, v := range pool {
			if rng.Intn(3) == 0 {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 || strings.Contains(vs[len(vs)-1], "-") && len(vs) == 1 {
			vs = append(vs, pool[4+rng.Intn(5)])
		}
		vs = uniqSorted(vs)
		vers[i] = vs
		p := &npmPackage{Versions: map[string]*npmVersion{}, Tags: map[string]string{}}
		var releases []string
		for _, v := range vs {
			if !strings.Contains(v, "-") {
				releases = append(releases, v)
			}
		}
		p.Tags["latest"] = releases[len(releases)-1]
		if len(releases) > 1 && rng.Intn(5) == 0 {
			p.Tags["latest"] = releases[len(releases)-2] // latest below the highest
		}
		if pre := vs[len(vs)-1]; strings.Contains(pre, "-") {
			p.Tags["next"] = pre
		}
		for _, v := range vs {
			m := &npmVersion{Deps: map[string]string{}, Optional: map[string]string{}, Peer: map[string]string{}}
			if v != p.Tags["latest"] && rng.Intn(8) == 0 {
				m.Deprecated = "use a later version"
			}
			p.Versions[v] = m
		}
		reg[name(i)] = p
	}
	for _, h := range []string{"host-a", "host-b"} {
		reg[h] = &npmPackage{Versions: map[string]*npmVersion{"1.0.0": {}, "1.5.0": {}, "2.0.0": {}, "2.2.0": {}}, Tags: map[string]string{"latest": "2.2.0"}}
	}
	// A spec some version of package j satisfies.
	spec := func(j int) string {
		vs := vers[j]
		v := vs[rng.Intn(len(vs))]
		major := strings.Split(v, ".")[0]
		pre := strings.Contains(v, "-")
		switch k := rng.Intn(12); {
		case k < 3:
			return "^" + v
		case k < 5:
			return "~" + v
		case k == 5:
			return v
		case k == 6 && !pre:
			return major + ".x"
		case k == 7:
			return ">=" + v + " <" + fmt.Sprint(atoi(major)+1) + ".0.0"
		case k == 8:
			return "^" + vs[0] + " || ^" + v
		case k == 9 && !pre:
			return v + " - " + major + ".99.99"
		case k == 10:
			return "*"
		case k == 11:
			return "latest"
		}
		return "^" + v
	}
	for i := 0; i < n; i++ {
		p := reg[name(i)]
		for _, v := range vers[i] {
			m := p.Versions[v]
			for k := 1 + rng.Intn(3); k > 0; k-- {
				j := i + 1 + rng.Intn(min(15, n-i))
				if j >= n {
					continue
				}
				if rng.Intn(6) == 0 {
					m.Optional[name(j)] = spec(j)
				} else {
					m.Deps[name(j)] = spec(j)
				}
			}
			if i > 10 && rng.Intn(40) == 0 { // a cycle back up
				j := rng.Intn(i)
				m.Deps[name(j)] = "*"
			}
			// Peers on root pkg-1 only: host-a, which a root provides, and host-b, which npm
			// installs beside pkg-1. (Peers of packages nested deep in the tree make npm 11 warn
			// ERESOLVE "overriding peer dependency" and write a tree npm ls finds invalid: no
			// oracle. The oracle checks its tree.)
			if i == 1 {
				m.Peer["host-a"], m.Peer["host-b"] = "^1.0.0 || ^2.0.0", "^2.0.0"
			}
		}
	}
	return reg, []string{name(0) + "@" + reg[name(0)].Tags["latest"], name(1) + "@" + vers[1][0], "host-a@2.0.0"}
}

func atoi(s string) int {
	n := 0
	fmt.Sscan(s, &n)
	return n
}

func uniqSorted(vs []string) []string {
	sort.Strings(vs)
	out := vs[:0]
	for i, v := range vs {
		if i == 0 || v != vs[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// npmOracle runs `npm install --package-lock-only` against the registry for a package requiring
// the roots, and returns the package versions of its lockfile (name@version, sorted).
func npmOracle(t testing.TB, registry string, roots []string) []string {
	t.Helper()
	requireTool(t, "npm", func() error { _, err := exec.LookPath("npm"); return err })
	dir := t.TempDir()
	deps := map[string]string{}
	for _, r := range roots {
		i := strings.LastIndexByte(r, '@')
		deps[r[:i]] = r[i+1:]
	}
	pj, _ := json.Marshal(map[string]any{"name": "oracle-root", "version": "1.0.0", "dependencies": deps})
	if err := os.WriteFile(filepath.Join(dir, "package.json"), pj, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("npm", "install", "--package-lock-only", "--registry", registry+"/", "--ignore-scripts", "--no-audit", "--no-fund",
		"--cache", filepath.Join(dir, "cache"), "--userconfig", filepath.Join(dir, "npmrc"), "--loglevel", "error")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install: %v\n%s", err, out)
	}
	// npm's tree must be valid (every dependency resolving to a version its range holds), or it
	// is no oracle.
	ls := exec.Command("npm", "ls", "--all", "--package-lock-only", "--cache", filepath.Join(dir, "cache"), "--userconfig", filepath.Join(dir, "npmrc"))
	ls.Dir = dir
	if out, err := ls.CombinedOutput(); err != nil {
		t.Fatalf("npm ls: npm's tree is not valid: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for loc, p := range lock.Packages {
		if loc == "" {
			continue
		}
		i := strings.LastIndex(loc, "node_modules/")
		set[loc[i+len("node_modules/"):]+"@"+p.Version] = true
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestNpmOracle: on registry fakes of 150 packages (ranges of every form, dist-tags, deprecated
// versions, peer and optional dependencies, diamonds, cycles, several versions of a package;
// 250–300 package versions installed), the package versions Sluice selects equal those of the
// lockfile `npm install --package-lock-only` writes against the same registry, on four seeded
// graphs ([npmSeeds]).
func TestNpmOracle(t *testing.T) {
	t.Parallel()
	for _, seed := range npmSeeds() {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			reg, roots := randomNpm(seed, 150)
			srv, _ := serveNpm(t, reg)
			want := npmOracle(t, srv.URL, roots)
			k := startKit(t, drivertest.OpenSQLite, 8, graph.Config{Egress: loopback(t)})
			res := k.result(t, k.startRequest(t, graph.Request{Type: "npm", Source: srv.URL, Roots: roots}), 3*time.Minute)
			if len(res.Errors) > 0 {
				t.Errorf("node errors: %+v", res.Errors[:min(5, len(res.Errors))])
			}
			if !reflect.DeepEqual(res.Nodes, want) {
				t.Errorf("%d versions, npm's lockfile %d:\nonly Sluice: %v\nonly npm: %v", len(res.Nodes), len(want), minus(res.Nodes, want), minus(want, res.Nodes))
			}
			t.Logf("%d package versions, %d edges; %d work items", len(res.Nodes), len(res.Edges), res.Counts.Items)
		})
	}
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// TestNpmOverlappingRequestsFetchOnce: two requests over overlapping npm graphs, run at the same
// time, fetch each packument once between them (select and resolve of any version of a package,
// in either request, read one fetch); a third request later fetches nothing: what was fetched
// is kept in the store by URL.
func TestNpmOverlappingRequestsFetchOnce(t *testing.T) {
	t.Parallel()
	reg, _ := randomNpm(5, 80)
	srv, counts := serveNpm(t, reg)
	k := startKit(t, drivertest.OpenSQLite, 8, graph.Config{Egress: loopback(t)})
	a := graph.Request{Type: "npm", Source: srv.URL, Roots: []string{"pkg-0@" + reg["pkg-0"].Tags["latest"], "host-a@2.0.0"}}
	b := graph.Request{Type: "npm", Source: srv.URL, Roots: []string{"pkg-1@" + reg["pkg-1"].Tags["latest"], "pkg-3@" + reg["pkg-3"].Tags["latest"]}}
	ja, jb := k.startRequest(t, a), k.startRequest(t, b)
	ra, rb := k.result(t, ja, 3*time.Minute), k.result(t, jb, 3*time.Minute)
	if len(ra.Errors)+len(rb.Errors) > 0 || len(ra.Nodes) < 20 || len(rb.Nodes) < 20 {
		t.Fatalf("results: %d and %d nodes, errors %+v %+v", len(ra.Nodes), len(rb.Nodes), ra.Errors, rb.Errors)
	}
	shared := len(ra.Nodes) + len(rb.Nodes) - len(union(ra.Nodes, rb.Nodes))
	first := counts()
	for name, n := range first {
		if n != 1 {
			t.Errorf("packument %s fetched %d times", name, n)
		}
	}
	t.Logf("%d and %d package versions (%d in both), %d packuments fetched", len(ra.Nodes), len(rb.Nodes), shared, len(first))
	if shared == 0 {
		t.Error("the graphs do not overlap")
	}
	rc := k.result(t, k.startRequest(t, a), 3*time.Minute)
	if !reflect.DeepEqual(rc.Nodes, ra.Nodes) {
		t.Errorf("the same request again selects\n%v\nnot\n%v", rc.Nodes, ra.Nodes)
	}
	if again := counts(); !reflect.DeepEqual(again, first) {
		t.Errorf("a later request fetched again: %d packuments before, now %v", len(first), again)
	}
}

func union(a, b []string) []string {
	set := map[string]bool{}
	for _, x := range append(append([]string{}, a...), b...) {
		set[x] = true
	}
	out := make([]string, 0, len(set))
	for x := range set {
		out = append(out, x)
	}
	return out
}

// TestNpmRules: max depth counts dependencies from the roots (not node_modules levels), build
// scope follows a root's devDependencies (not a dependency's), a peer is installed, a dist-tag
// selects its version, and a spec npm would fetch another way (git) is a node error naming it.
func TestNpmRules(t *testing.T) {
	t.Parallel()
	pkg := func(tags map[string]string, vs map[string]*npmVersion) *npmPackage {
		return &npmPackage{Versions: vs, Tags: tags}
	}
	reg := npmRegistry{
		"app": pkg(map[string]string{"latest": "1.0.0"}, map[string]*npmVersion{"1.0.0": {
			Deps: map[string]string{"lib": "^1.0.0", "tagged": "beta"}, Peer: map[string]string{"host": "^2.0.0"}, Dev: map[string]string{"devtool": "1.0.0"}}}),
		"lib":     pkg(map[string]string{"latest": "1.1.0"}, map[string]*npmVersion{"1.0.0": {}, "1.1.0": {Deps: map[string]string{"deep": "*"}}}),
		"deep":    pkg(map[string]string{"latest": "1.0.0"}, map[string]*npmVersion{"1.0.0": {}}),
		"host":    pkg(map[string]string{"latest": "2.1.0"}, map[string]*npmVersion{"2.1.0": {}}),
		"tagged":  pkg(map[string]string{"latest": "1.0.0", "beta": "2.0.0-beta.1"}, map[string]*npmVersion{"1.0.0": {}, "2.0.0-beta.1": {}}),
		"devtool": pkg(map[string]string{"latest": "1.0.0"}, map[string]*npmVersion{"1.0.0": {Dev: map[string]string{"deep": "1.0.0"}, Deps: map[string]string{"gitdep": "git+https://example.com/x.git"}}}),
		"gitdep":  pkg(map[string]string{"latest": "1.0.0"}, map[string]*npmVersion{"1.0.0": {}}),
	}
	srv, _ := serveNpm(t, reg)
	k := startKit(t, drivertest.OpenSQLite, 4, graph.Config{Egress: loopback(t)})
	for _, c := range []struct {
		name  string
		req   graph.Request
		nodes []string
		err   string
	}{
		{name: "runtime", req: graph.Request{Roots: []string{"app@1.0.0"}},
			nodes: []string{"app@1.0.0", "deep@1.0.0", "host@2.1.0", "lib@1.1.0", "tagged@2.0.0-beta.1"}},
		{name: "max-depth", req: graph.Request{Roots: []string{"app@1.0.0"}, MaxDepth: 1},
			nodes: []string{"app@1.0.0", "host@2.1.0", "lib@1.1.0", "tagged@2.0.0-beta.1"}},
		{name: "build", req: graph.Request{Roots: []string{"app@1.0.0"}, Scope: "build"},
			nodes: []string{"app@1.0.0", "deep@1.0.0", "devtool@1.0.0", "host@2.1.0", "lib@1.1.0", "tagged@2.0.0-beta.1"},
			err:   `gitdep@git+https://example.com/x.git: FAILED: gitdep: version spec "git+https://example.com/x.git": not a range nor a dist-tag`},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Type, c.req.Source = "npm", srv.URL
			res := k.run(t, c.req)
			if !reflect.DeepEqual(res.Nodes, c.nodes) {
				t.Errorf("nodes %v, want %v", res.Nodes, c.nodes)
			}
			var errs []string
			for _, e := range res.Errors {
				errs = append(errs, e.Node+": "+e.Status+": "+e.Error)
			}
			if c.err == "" && len(errs) > 0 || c.err != "" && (len(errs) != 1 || !strings.HasPrefix(errs[0], c.err)) {
				t.Errorf("node errors %q, want %q", errs, c.err)
			}
		})
	}
}

// npmSeeds are TestNpmOracle's graphs: seeds 1 to 4 (seed 4 once differed: a replaced
// version's dependency another package still relied on was pruned), or those in
// $SLUICE_NPM_SEEDS ("5,6,7").
func npmSeeds() []int64 {
	if s := os.Getenv("SLUICE_NPM_SEEDS"); s != "" {
		var out []int64
		for _, f := range strings.Split(s, ",") {
			out = append(out, int64(atoi(f)))
		}
		return out
	}
	return []int64{1, 2, 3, 4}
}
