package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigPrecedence: a flag beats its environment variable, which beats sluice.yaml in the
// data dir, which beats the default; a command's section beats the top level; config show says
// where each value came from and masks passwords and secret variables.
func TestConfigPrecedence(t *testing.T) {
	clearEnv(t)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, ConfigFile), []byte(`lease: 45s
log-format: json
database: postgres://file@db/x
blobs: s3://from-file/p
max-item-depth: 7
config:
  max-item-depth: 9
`), 0o644)
	t.Setenv("SLUICE_DATABASE", "postgres://sluice:hunter2@db/sluice?password=hunter3")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hunter4")
	code, out, errs := run(t, "config", "show", "--data", data, "--blobs", "s3://from-flag/p", "--output", "json")
	if code != 0 {
		t.Fatalf("config show: exit %d, %s", code, errs)
	}
	if strings.Contains(out, "hunter") {
		t.Errorf("config show prints a secret:\n%s", out)
	}
	var got configShowJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]setting{
		"lease":                 {Value: "45s", Source: "file"},
		"log-format":            {Value: "json", Source: "file"},
		"blobs":                 {Value: "s3://from-flag/p", Source: "flag"},
		"database":              {Value: "postgres://sluice:xxxxx@db/sluice?password=xxxxx", Source: "env"},
		"max-item-depth":        {Value: "9", Source: "file"},
		"v":                     {Value: "false", Source: "default"},
		"AWS_SECRET_ACCESS_KEY": {Value: "******** (set)", Source: "env"},
	}
	for _, s := range got.Settings {
		if w, ok := want[s.Name]; ok {
			if s.Value != w.Value || s.Source != w.Source {
				t.Errorf("%s = %q from %s, want %q from %s", s.Name, s.Value, s.Source, w.Value, w.Source)
			}
			delete(want, s.Name)
		}
	}
	for name := range want {
		t.Errorf("config show lacks %s", name)
	}
	if got.File != filepath.Join(data, ConfigFile) {
		t.Errorf("file = %q", got.File)
	}
	// An explicit --config must exist; a data dir's file may not move the data dir.
	if code, _, errs := run(t, "config", "show", "--config", filepath.Join(data, "nope.yaml")); code != ExitFailed || !strings.Contains(errs, "nope.yaml") {
		t.Errorf("missing --config: exit %d, %q", code, errs)
	}
	os.WriteFile(filepath.Join(data, ConfigFile), []byte("data: /elsewhere\n"), 0o644)
	if code, _, errs := run(t, "token", "list", "--data", data); code != ExitUsage || !strings.Contains(errs, "cannot move it") {
		t.Errorf("data in the data dir's file: exit %d, %q", code, errs)
	}
}
