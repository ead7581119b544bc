package graph_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// requireTool skips the test when check fails (a tool is not installed), or fails it when the
// environment sets SLUICE_TEST_REQUIRE_TOOLS=1 (as CI does).
func requireTool(t testing.TB, name string, check func() error) {
	t.Helper()
	if err := check(); err != nil {
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is not installed and SLUICE_TEST_REQUIRE_TOOLS=1: %v", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
}

// mavenLib is where Maven's jars are (Debian's maven package); SLUICE_MAVEN_LIB overrides it.
func mavenLib() string {
	if d := os.Getenv("SLUICE_MAVEN_LIB"); d != "" {
		return d
	}
	return "/usr/share/maven/lib"
}

// mavenOracle runs Maven's own resolver (testdata/MavenOracle.java, on the maven-resolver of the
// installed Maven) on the repository for each case — a root g:a:v, or a plugin and the
// dependencies a project adds to it, "g:a:v|g:a:v…" — and returns each case's selected versions.
func mavenOracle(t testing.TB, dir string, cases ...string) map[string][]string {
	t.Helper()
	requireTool(t, "java and Maven's resolver", func() error {
		if _, err := exec.LookPath("java"); err != nil {
			return err
		}
		_, err := os.Stat(filepath.Join(mavenLib(), "maven-resolver-impl.jar"))
		return err
	})
	src, err := filepath.Abs("testdata/MavenOracle.java")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("java", append([]string{"-cp", mavenLib() + "/*", src, dir}, cases...)...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("Maven's resolver: %v\n%s", err, stderr)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		c, node, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("Maven's resolver printed %q", line)
		}
		got[c] = append(got[c], node)
	}
	return got
}

// writeMavenMetadata writes maven-metadata.xml for each package of the repository (and the
// -local copy Maven reads from a local repository), listing its versions.
func writeMavenMetadata(t testing.TB, dir string, r repo) {
	t.Helper()
	versions := map[string][]string{}
	for gav := range r {
		f := strings.Split(gav, ":")
		versions[f[0]+":"+f[1]] = append(versions[f[0]+":"+f[1]], f[2])
	}
	for ga, vs := range versions {
		sort.Strings(vs)
		g, a, _ := strings.Cut(ga, ":")
		var b strings.Builder
		fmt.Fprintf(&b, "<metadata><groupId>%s</groupId><artifactId>%s</artifactId><versioning><versions>", g, a)
		for _, v := range vs {
			fmt.Fprintf(&b, "<version>%s</version>", v)
		}
		b.WriteString("</versions></versioning></metadata>\n")
		d := filepath.Join(dir, strings.ReplaceAll(g, ".", "/"), a)
		for _, name := range []string{"maven-metadata.xml", "maven-metadata-local.xml"} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func bomImport(gav string) string {
	f := strings.Split(gav, ":")
	return fmt.Sprintf("<dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version><type>pom</type><scope>import</scope></dependency>", f[0], f[1], f[2])
}

// oracleRepo holds the POMs of the cases compared with Maven's resolver.
var oracleRepo = repo{
	// Ranges: the highest version the range holds, as ComparableVersion orders them (1.10 after
	// 1.5; 2.0-beta-1 before 2.0, so inside [1.0,2.0)); a union of restrictions.
	"o:range-app:1":    deps("o:lib:[1.0,2.0)", "o:other:(,1.0],[1.2,1.6)"),
	"o:lib:1.0":        "",
	"o:lib:1.5":        "",
	"o:lib:1.10":       "",
	"o:lib:2.0-beta-1": deps("o:leaf:[1,2]"),
	"o:lib:2.0":        "",
	"o:other:0.9":      "",
	"o:other:1.1":      "",
	"o:other:1.5":      "",
	"o:other:1.6":      "",
	"o:leaf:1":         "",
	"o:leaf:2":         "",
	"o:leaf:3":         "",

	// BOM imports: what the POM manages wins over an import whatever the order written, what its
	// parent manages too; an earlier import wins over a later one; a BOM's own import counts;
	// the root's management reaches a transitive dependency.
	"o:bom-parent:1": "<packaging>pom</packaging>" + managed("o:m-a:1"),
	"o:bom-app:1": parent("o:bom-parent:1") + deps("o:m-a", "o:m-b", "o:m-c", "o:m-d", "o:m-e") +
		"<dependencyManagement><dependencies>" + bomImport("o:bom1:1") + bomImport("o:bom2:1") +
		"<dependency><groupId>o</groupId><artifactId>m-c</artifactId><version>1</version></dependency></dependencies></dependencyManagement>",
	"o:bom1:1": "<packaging>pom</packaging><dependencyManagement><dependencies>" + bomImport("o:bom3:1") +
		"<dependency><groupId>o</groupId><artifactId>m-a</artifactId><version>2</version></dependency>" +
		"<dependency><groupId>o</groupId><artifactId>m-b</artifactId><version>2</version></dependency>" +
		"<dependency><groupId>o</groupId><artifactId>m-c</artifactId><version>2</version></dependency></dependencies></dependencyManagement>",
	"o:bom2:1": "<packaging>pom</packaging>" + managed("o:m-b:3", "o:m-d:3", "o:m-f:5"),
	"o:bom3:1": "<packaging>pom</packaging>" + managed("o:m-e:4"),
	"o:m-a:1":  deps("o:m-f:1"),
	"o:m-a:2":  "",
	"o:m-b:2":  "",
	"o:m-b:3":  "",
	"o:m-c:1":  "",
	"o:m-c:2":  "",
	"o:m-d:3":  "",
	"o:m-e:4":  "",
	"o:m-f:1":  "",
	"o:m-f:5":  "",

	// A plugin's own dependencies: they win over the plugin POM's (pd-b 2), and the plugin
	// POM's pd-c 1 is nearer than pd-a's pd-c 2.
	"o:plug-app:1": "<build><plugins><plugin><groupId>o</groupId><artifactId>plug</artifactId><version>1</version>" +
		deps("o:pd-a:1", "o:pd-b:2") + "</plugin></plugins></build>",
	"o:plug:1": deps("o:pd-b:1", "o:pd-c:1"),
	"o:pd-a:1": deps("o:pd-c:2"),
	"o:pd-b:1": "",
	"o:pd-b:2": "",
	"o:pd-c:1": "",
	"o:pd-c:2": "",
}

// TestMavenOracle: for version ranges, BOM imports and a plugin's dependencies, the versions
// Sluice selects equal those Maven 3.8's resolver selects for the same POMs (Sluice's parent POMs,
// which Maven does not count as dependencies, left out; for the plugin, Maven resolves the
// project's dependencies and the plugin's separately, Sluice's BUILD_TIME graph holds both).
// Roots are written g:a:v, as Maven users write them.
func TestMavenOracle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRepo(t, dir, oracleRepo)
	writeMavenMetadata(t, dir, oracleRepo)
	want := mavenOracle(t, dir, "o:range-app:1", "o:bom-app:1", "o:plug-app:1", "o:plug:1|o:pd-a:1|o:pd-b:2")
	cases := []struct {
		name, root, scope string
		want              []string
		parents           []string
	}{
		{name: "ranges", root: "o:range-app:1", want: want["o:range-app:1"]},
		{name: "bom-imports", root: "o:bom-app:1", want: want["o:bom-app:1"], parents: []string{"o:bom-parent@1"}},
		{name: "plugin-dependencies", root: "o:plug-app:1", scope: "build",
			want: append(want["o:plug-app:1"], want["o:plug:1|o:pd-a:1|o:pd-b:2"]...)},
	}
	k := startKit(t, drivertest.OpenSQLite, 4, graph.Config{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.want) < 2 {
				t.Fatalf("Maven's resolver selected %v: too little to compare", c.want)
			}
			res := k.result(t, k.startRequest(t, graph.Request{Type: "maven", Source: dir, Roots: []string{c.root}, Scope: c.scope}), time.Minute)
			var got []string
			for _, n := range res.Nodes {
				if !slices.Contains(c.parents, n) {
					got = append(got, n)
				}
			}
			sort.Strings(c.want)
			t.Logf("Maven's resolver: %v", c.want)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Sluice selects\n%v\nMaven's resolver\n%v", got, c.want)
			}
			if len(res.Errors) > 0 {
				t.Errorf("node errors: %+v", res.Errors)
			}
		})
	}
}
