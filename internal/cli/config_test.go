package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/outbox"
	"github.com/sluice-project/sluice/internal/source"
	"github.com/sluice-project/sluice/internal/worker"
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

// TestHostDelaySetting: the fileset workflow's politeness delay is a setting like the others —
// sluice.yaml, then SLUICE_HOST_DELAY, then --host-delay — and a bad value is named.
func TestHostDelaySetting(t *testing.T) {
	clearEnv(t)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, ConfigFile), []byte("host-delay: 250ms\n"), 0o644)
	show := func(args ...string) setting {
		t.Helper()
		code, out, errs := run(t, append([]string{"config", "show", "--data", data, "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("config show: exit %d, %s", code, errs)
		}
		var got configShowJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		for _, s := range got.Settings {
			if s.Name == "host-delay" {
				return s
			}
		}
		t.Fatalf("config show lacks host-delay:\n%s", out)
		return setting{}
	}
	if s := show(); s.Value != "250ms" || s.Source != "file" {
		t.Errorf("host-delay %q from %s, want 250ms from the file", s.Value, s.Source)
	}
	t.Setenv("SLUICE_HOST_DELAY", "2s")
	if s := show(); s.Value != "2s" || s.Source != "env" {
		t.Errorf("host-delay %q from %s, want 2s from the environment", s.Value, s.Source)
	}
	if s := show("--host-delay", "0"); s.Value != "0s" || s.Source != "flag" {
		t.Errorf("host-delay %q from %s, want 0s (none) from the flag", s.Value, s.Source)
	}
	os.Remove(filepath.Join(data, ConfigFile))
	t.Setenv("SLUICE_HOST_DELAY", "")
	if s := show(); s.Value != "1s" || s.Source != "default" {
		t.Errorf("host-delay %q from %s, want the default 1s", s.Value, s.Source)
	}
	if code, _, errs := run(t, "config", "show", "--data", data, "--host-delay", "-1s"); code == 0 || !strings.Contains(errs, "host-delay") {
		t.Errorf("--host-delay -1s: exit %d, %q; want a usage error naming the flag", code, errs)
	}
	t.Setenv("SLUICE_HOST_DELAY", "soon")
	if code, _, errs := run(t, "fileset", "--data", data, "https://zenodo.org/record/1"); code == 0 || !strings.Contains(errs, "SLUICE_HOST_DELAY") {
		t.Errorf("SLUICE_HOST_DELAY=soon: exit %d, %q; want an error naming the variable", code, errs)
	}
}

// TestConfigShowDefaults: with nothing set, config show prints the values the components apply
// (not the flags' zero values), and its text names the file it reads.
func TestConfigShowDefaults(t *testing.T) {
	clearEnv(t)
	data := t.TempDir()
	code, out, errs := run(t, "config", "show", "--data", data, "--output", "json")
	if code != 0 {
		t.Fatalf("config show: exit %d, %s", code, errs)
	}
	var got configShowJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	fl := fileset.DefaultLimits()
	want := map[string]string{
		"lease":           worker.DefaultLeaseDuration.String(),
		"max-item-depth":  strconv.Itoa(engine.DefaultMaxItemDepth),
		"max-job-items":   strconv.Itoa(engine.DefaultMaxJobItems),
		"outbox-max":      strconv.Itoa(outbox.DefaultMaxPending),
		"source-ack-wait": source.DefaultAckWait.String(),
		"max-total-size":  strconv.FormatInt(fl.MaxTotalSize, 10),
		"max-file-count":  strconv.Itoa(fl.MaxFileCount),
	}
	for _, s := range got.Settings {
		if w, ok := want[s.Name]; ok {
			if s.Value != w || s.Source != "default" {
				t.Errorf("%s = %q from %s, want %q from default", s.Name, s.Value, s.Source, w)
			}
			delete(want, s.Name)
		}
	}
	for name := range want {
		t.Errorf("config show lacks %s", name)
	}
	// A value set explicitly is shown as set.
	_, out, _ = run(t, "config", "show", "--data", data, "--lease", "2m")
	if !strings.Contains(out, "2m0s") {
		t.Errorf("--lease 2m not shown:\n%s", out)
	}
	_, out, _ = run(t, "config", "show", "--data", data)
	if !strings.Contains(out, "none ("+ConfigFile+" in the data dir") {
		t.Errorf("config show does not name %s:\n%s", ConfigFile, out)
	}
	_, help, _ := run(t, "config", "show", "-h")
	if !strings.Contains(help, ConfigFile) || strings.Contains(help, ".toml") {
		t.Errorf("config show -h does not name %s:\n%s", ConfigFile, help)
	}
}
