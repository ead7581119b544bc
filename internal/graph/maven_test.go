package graph_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
)

// repo is a synthetic Maven repository: "group:artifact:version" → the POM's inner XML (what goes
// between <project> and </project> after the coordinates).
type repo map[string]string

func writeRepo(t testing.TB, dir string, r repo) {
	t.Helper()
	for gav, body := range r {
		f := strings.Split(gav, ":")
		p := filepath.Join(dir, strings.ReplaceAll(f[0], ".", "/"), f[1], f[2], f[1]+"-"+f[2]+".pom")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		xml := fmt.Sprintf("<project>\n  <modelVersion>4.0.0</modelVersion>\n  <groupId>%s</groupId>\n  <artifactId>%s</artifactId>\n  <version>%s</version>\n%s\n</project>\n", f[0], f[1], f[2], body)
		if err := os.WriteFile(p, []byte(xml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// deps renders <dependencies> from "g:a:v[:scope]" entries; "!g:a" after an entry adds an exclusion to it.
func deps(entries ...string) string {
	var b strings.Builder
	b.WriteString("<dependencies>")
	open := false
	for _, e := range entries {
		if strings.HasPrefix(e, "!") {
			x := strings.Split(e[1:], ":")
			fmt.Fprintf(&b, "<exclusions><exclusion><groupId>%s</groupId><artifactId>%s</artifactId></exclusion></exclusions>", x[0], x[1])
			continue
		}
		if open {
			b.WriteString("</dependency>")
		}
		f := strings.Split(e, ":")
		fmt.Fprintf(&b, "<dependency><groupId>%s</groupId><artifactId>%s</artifactId>", f[0], f[1])
		if len(f) > 2 && f[2] != "" {
			fmt.Fprintf(&b, "<version>%s</version>", f[2])
		}
		if len(f) > 3 {
			if f[3] == "optional" {
				b.WriteString("<optional>true</optional>")
			} else {
				fmt.Fprintf(&b, "<scope>%s</scope>", f[3])
			}
		}
		open = true
	}
	if open {
		b.WriteString("</dependency>")
	}
	b.WriteString("</dependencies>")
	return b.String()
}

func parent(gav string) string {
	f := strings.Split(gav, ":")
	return fmt.Sprintf("<parent><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></parent>", f[0], f[1], f[2])
}

func managed(entries ...string) string {
	return "<dependencyManagement>" + deps(entries...) + "</dependencyManagement>"
}

// mavenRepo holds every case's POMs (own coordinates, written for these tests).
var mavenRepo = repo{
	// The carto2 exclusion walkthrough re-created: jhttpc excludes commons-logging from
	// httpclient's subtree only; another path (via legacy-log) still brings it in. httpclient
	// takes its dependencies' versions from its parent's dependencyManagement.
	"org.commonjava:commonjava:12": "<packaging>pom</packaging>",
	"org.commonjava.util:jhttpc:1.6": parent("org.commonjava:commonjava:12") +
		deps("org.apache.httpcomponents:httpclient:4.5.3", "!commons-logging:commons-logging", "org.example:legacy-log:1.0"),
	"org.apache.httpcomponents:httpcomponents-client:4.5.3": "<properties><httpcore.version>4.4.6</httpcore.version></properties>" +
		managed("org.apache.httpcomponents:httpcore:${httpcore.version}", "commons-codec:commons-codec:1.9", "commons-logging:commons-logging:1.2"),
	"org.apache.httpcomponents:httpclient:4.5.3": parent("org.apache.httpcomponents:httpcomponents-client:4.5.3") +
		deps("org.apache.httpcomponents:httpcore", "commons-logging:commons-logging", "commons-codec:commons-codec"),
	"org.apache.httpcomponents:httpcore:4.4.6": "",
	"commons-codec:commons-codec:1.9":          "",
	"commons-logging:commons-logging:1.2":      "",
	"commons-logging:commons-logging:1.1":      "",
	"org.example:legacy-log:1.0":               deps("commons-logging:commons-logging:1.1"),

	// Scopes.
	"s:app:1": deps("s:compile:1", "s:runtime:1:runtime", "s:test:1:test", "s:provided:1:provided", "s:optional:1:optional") +
		"<build><plugins><plugin><groupId>s</groupId><artifactId>plugin</artifactId><version>1</version></plugin></plugins></build>",
	"s:compile:1":   deps("s:deep-test:1:test", "s:deep:1"),
	"s:runtime:1":   "",
	"s:test:1":      deps("s:test-dep:1"),
	"s:test-dep:1":  "",
	"s:provided:1":  "",
	"s:optional:1":  "",
	"s:deep:1":      "",
	"s:deep-test:1": "",
	"s:plugin:1":    "",

	// Nearest wins: c 1.0 at depth 2 beats c 2.0 at depth 3; z 1.0 beats z 2.0 at the same depth
	// by declaration order, and z 2.0's subtree (w) is never traversed.
	"n:app:1": deps("n:a:1", "n:b:1", "n:x:1", "n:y:1"),
	"n:a:1":   deps("n:c:1.0"),
	"n:b:1":   deps("n:d:1"),
	"n:d:1":   deps("n:c:2.0"),
	"n:c:1.0": "",
	"n:c:2.0": "",
	"n:x:1":   deps("n:z:1.0"),
	"n:y:1":   deps("n:z:2.0"),
	"n:z:1.0": "",
	"n:z:2.0": deps("n:w:1"),
	"n:w:1":   "",

	// Relocation, dependencyManagement of the root over a transitive version, max depth.
	"r:app:1":  deps("r:old:1") + managed("r:leaf:3"),
	"r:old:1":  "<distributionManagement><relocation><groupId>r2</groupId><artifactId>new</artifactId><version>2</version></relocation></distributionManagement>",
	"r2:new:2": deps("r:leaf:1"),
	"r:leaf:1": "",
	"r:leaf:3": "",

	// A BOM import: the version of a dependency declared without one.
	"b:app:1": deps("b:lib") + "<dependencyManagement><dependencies><dependency><groupId>b</groupId><artifactId>bom</artifactId><version>1</version><type>pom</type><scope>import</scope></dependency></dependencies></dependencyManagement>",
	"b:bom:1": managed("b:lib:5"),
	"b:lib:5": "",

	// A parent cycle.
	"c:app:1":   deps("c:child:1"),
	"c:child:1": parent("c:p1:1"),
	"c:p1:1":    parent("c:p2:1"),
	"c:p2:1":    parent("c:p1:1"),
}

// TestMavenLite checks the maven-lite rules on POMs written for it, each case on 1 and 16
// workers with the same result.
func TestMavenLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRepo(t, dir, mavenRepo)
	cases := []struct {
		name      string
		req       graph.Request
		nodes     []string
		paths     []string // some paths the result must hold
		reason    string
		errSubstr string
		notFetch  string // a POM path never fetched
	}{
		{name: "exclusion-along-a-path", req: graph.Request{Roots: []string{"org.commonjava.util:jhttpc@1.6"}},
			nodes: []string{"commons-codec:commons-codec@1.9", "commons-logging:commons-logging@1.1", "org.apache.httpcomponents:httpclient@4.5.3",
				"org.apache.httpcomponents:httpcomponents-client@4.5.3", "org.apache.httpcomponents:httpcore@4.4.6",
				"org.commonjava.util:jhttpc@1.6", "org.commonjava:commonjava@12", "org.example:legacy-log@1.0"},
			paths: []string{"org.commonjava.util:jhttpc@1.6 > org.example:legacy-log@1.0 > commons-logging:commons-logging@1.1"}},
		{name: "scope-runtime", req: graph.Request{Roots: []string{"s:app@1"}},
			nodes: []string{"s:app@1", "s:compile@1", "s:deep@1", "s:runtime@1"}},
		{name: "scope-build", req: graph.Request{Roots: []string{"s:app@1"}, Scope: "build"},
			nodes: []string{"s:app@1", "s:compile@1", "s:deep@1", "s:plugin@1", "s:provided@1", "s:runtime@1", "s:test-dep@1", "s:test@1"}},
		{name: "nearest-wins", req: graph.Request{Roots: []string{"n:app@1"}},
			nodes:    []string{"n:a@1", "n:app@1", "n:b@1", "n:c@1.0", "n:d@1", "n:x@1", "n:y@1", "n:z@1.0"},
			notFetch: "/n/z/2.0/z-2.0.pom"},
		{name: "relocation-and-managed", req: graph.Request{Roots: []string{"r:app@1"}},
			nodes: []string{"r2:new@2", "r:app@1", "r:leaf@3"},
			paths: []string{"r:app@1 > r2:new@2 > r:leaf@3"}},
		{name: "override-relocates", req: graph.Request{Roots: []string{"n:app@1"}, Overrides: map[string]string{"n:b": "r:leaf@1", "n:c": "2.0"}},
			nodes: []string{"n:a@1", "n:app@1", "n:c@2.0", "n:x@1", "n:y@1", "n:z@1.0", "r:leaf@1"}},
		{name: "max-depth", req: graph.Request{Roots: []string{"n:app@1"}, MaxDepth: 1},
			nodes: []string{"n:a@1", "n:app@1", "n:b@1", "n:x@1", "n:y@1"}, reason: "MAX_DEPTH_REACHED"},
		{name: "bom-import", req: graph.Request{Roots: []string{"b:app@1"}},
			nodes: []string{"b:app@1", "b:lib@5"}},
		{name: "parent-cycle", req: graph.Request{Roots: []string{"c:app@1"}},
			nodes: []string{"c:app@1", "c:child@1"}, errSubstr: "parent cycle: c:child@1 -> c:p1@1 -> c:p2@1 -> c:p1@1"},
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		proxy := newCountingProxy(t, dir, nil)
		kits := []*kit{startKit(t, open, 1, graph.Config{Egress: loopback(t)}), startKit(t, open, 16, graph.Config{Egress: loopback(t)})}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				c.req.Type, c.req.Source = "maven", proxy.URL
				var first *graph.Result
				for i, k := range kits {
					res := k.run(t, c.req)
					if !reflect.DeepEqual(res.Nodes, c.nodes) {
						t.Errorf("kit %d: nodes\n%v, want\n%v", i, res.Nodes, c.nodes)
					}
					if want := firstOr(c.reason, "TRAVERSE_COMPLETE"); res.EndDetectReason != want {
						t.Errorf("kit %d: end-detect-reason %s, want %s", i, res.EndDetectReason, want)
					}
					rendered, _ := graph.Render(res, "path")
					for _, p := range c.paths {
						if !strings.Contains(rendered, p+"\n") {
							t.Errorf("kit %d: no path %q in\n%s", i, p, rendered)
						}
					}
					switch {
					case c.errSubstr == "" && len(res.Errors) > 0:
						t.Errorf("kit %d: node errors %+v", i, res.Errors)
					case c.errSubstr != "" && (len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error, c.errSubstr)):
						t.Errorf("kit %d: node errors %+v, want one with %q", i, res.Errors, c.errSubstr)
					}
					// Item ids are each store's own: a store that reserved ids for a
					// stream of roots gives the next item a later one.
					for i := range res.Errors {
						res.Errors[i].Item = 0
					}
					if first == nil {
						first = res
					} else if res.Counts = first.Counts; !reflect.DeepEqual(res, first) {
						t.Errorf("1 and 16 workers differ:\n%+v\n%+v", first, res)
					}
				}
				if c.notFetch != "" && proxy.fetches()[c.notFetch] != 0 {
					t.Errorf("%s fetched: a loser's subtree was traversed", c.notFetch)
				}
			})
		}
	})
}
