package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGraphCommand runs `sluice graph` on a directory proxy: the paths on stdout, progress and
// counts on stderr; the same request again is fully AVOIDED; a bad flag value is a usage error.
func TestGraphCommand(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	proxy := filepath.Join(dir, "proxy")
	for path, mod := range map[string]string{
		"example.com/a/@v/v1.0.0.mod":     "module example.com/a\nrequire example.com/Big v1.0.0\n",
		"example.com/!big/@v/v1.0.0.mod":  "module example.com/Big\n",
		"example.com/!big/@v/v1.0.0.info": `{"Version":"v1.0.0"}`,
		"example.com/a/@v/v1.0.0.info":    `{"Version":"v1.0.0"}`,
	} {
		p := filepath.Join(proxy, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(mod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	args := []string{"graph", "--data", data, "--source", proxy, "example.com/a@v1.0.0", "--format", "path"}
	code, out, errs := run(t, args...)
	if code != 0 || out != "example.com/a@v1.0.0\nexample.com/a@v1.0.0 > example.com/Big@v1.0.0\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	if !strings.Contains(errs, "2 work items: 2 resolved, 0 avoided, 0 failed") {
		t.Errorf("stderr: %s", errs)
	}
	code, out2, errs := run(t, args...)
	if code != 0 || out2 != out || !strings.Contains(errs, "2 work items: 0 resolved, 2 avoided") {
		t.Errorf("second run: exit %d, %q, %s", code, out2, errs)
	}
	if code, _, errs := run(t, "graph", "--data", data, "--source", proxy, "--format", "svg", "example.com/a@v1.0.0"); code != ExitUsage || !strings.Contains(errs, `format "svg"`) {
		t.Errorf("bad format: exit %d, %s", code, errs)
	}
	tmpl := filepath.Join(dir, "edges.tmpl")
	if err := os.WriteFile(tmpl, []byte("{{range .Edges}}{{.From}} needs {{.To}}\n{{end}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, "graph", "--data", data, "--source", proxy, "--format", "template="+tmpl, "example.com/a@v1.0.0"); code != 0 || out != "example.com/a@v1.0.0 needs example.com/Big@v1.0.0\n" {
		t.Errorf("template: exit %d, %q, %s", code, out, errs)
	}
	missing := filepath.Join(dir, "nope.tmpl")
	if code, _, errs := run(t, "graph", "--data", data, "--source", proxy, "--format", "template="+missing, "example.com/a@v1.0.0"); code != ExitUsage || !strings.Contains(errs, missing) {
		t.Errorf("missing template file: exit %d, %s", code, errs)
	}
}
