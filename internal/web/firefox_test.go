package web_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// puppeteerDir returns $SLUICE_TEST_PUPPETEER, a directory whose node_modules holds
// puppeteer-core (.ci/run installs it from npm), skipping the test without it, or failing it
// when SLUICE_TEST_REQUIRE_TOOLS=1.
func puppeteerDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("SLUICE_TEST_PUPPETEER")
	if d != "" {
		if _, err := os.Stat(filepath.Join(d, "node_modules", "puppeteer-core", "package.json")); err == nil {
			return d
		}
	}
	why := "SLUICE_TEST_PUPPETEER is not a directory with node_modules/puppeteer-core " +
		"(npm install --prefix DIR puppeteer-core; SLUICE_TEST_PUPPETEER=DIR)"
	if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s, but SLUICE_TEST_REQUIRE_TOOLS=1", why)
	}
	t.Skip(why)
	return ""
}

// TestFirefox drives Debian's Firefox ESR through the UI over WebDriver BiDi (puppeteer-core,
// run by node: testdata/firefox.cjs): sign in; the jobs, workflows, a workflow, search and
// operations pages; the editor building a workflow and saving it, with the changes it shows; a
// file uploaded and its job followed to 100 %; its documents and timeline (zoomed); the jobs and
// timeline pages at phone width. No page may log a console error, throw, fail a request, miss
// its stylesheet or an image, violate the Content-Security-Policy, or break a rule of axe-core.
func TestFirefox(t *testing.T) {
	tools := requireTools(t, "firefox-esr", "node")
	pup := puppeteerDir(t)
	b := setup(t)
	upload := filepath.Join(t.TempDir(), "note.txt")
	if err := os.WriteFile(upload, []byte("A note about the mill race, read in Firefox.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tools["node"], filepath.Join("testdata", "firefox.cjs"))
	cmd.Env = append(os.Environ(), "SLUICE_URL="+b.url, "SLUICE_TOKEN="+b.admin, "SLUICE_UPLOAD="+upload,
		"FIREFOX="+tools["firefox-esr"], "PUPPETEER="+pup, "SCREENSHOTS="+screenshotDir(t))
	if axeScript(t) != "" {
		cmd.Env = append(cmd.Env, "AXE="+os.Getenv("SLUICE_TEST_AXE"))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep struct {
		Browser string `json:"browser"`
		Visited []struct {
			Label, URL, H1 string
		} `json:"visited"`
		Canary     []string `json:"canary"`
		AxeChecked int      `json:"axe_checked"`
		Problems   []string `json:"problems"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		t.Fatalf("firefox.cjs: %v (%v)\nstdout: %s\nstderr: %s", err, jerr, out, stderr.String())
	}
	t.Logf("%s visited %d pages; an inline script injected as a canary was blocked and reported: %q", rep.Browser, len(rep.Visited), rep.Canary)
	for _, v := range rep.Visited {
		t.Logf("  %s: %s (%q)", v.Label, v.URL, v.H1)
	}
	if axeScript(t) != "" && rep.AxeChecked != len(rep.Visited) {
		t.Errorf("axe-core checked %d of the %d pages Firefox visited", rep.AxeChecked, len(rep.Visited))
	}
	for _, p := range rep.Problems {
		t.Errorf("Firefox: %s", p)
	}
	if err != nil && len(rep.Problems) == 0 {
		t.Errorf("firefox.cjs: %v\n%s", err, stderr.String())
	}
	if len(rep.Visited) < 15 {
		t.Errorf("Firefox visited %d pages, want 15", len(rep.Visited))
	}
}
