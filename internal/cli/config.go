package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/outbox"
	"github.com/sluice-project/sluice/internal/redact"
	"github.com/sluice-project/sluice/internal/source"
	"github.com/sluice-project/sluice/internal/worker"
)

// ConfigFile is the configuration file read from the data dir when --config names none.
const ConfigFile = "sluice.yaml"

// flagEnv names the environment variable of each flag that has one: it overrides the
// configuration file, and a flag overrides it.
var flagEnv = map[string]string{
	"data": "SLUICE_DATA", "database": "SLUICE_DATABASE", "blobs": "SLUICE_BLOBS", "config": "SLUICE_CONFIG",
	"log-format": "SLUICE_LOG_FORMAT", "egress-allow": "SLUICE_EGRESS_ALLOW", "egress-deny": "SLUICE_EGRESS_DENY",
	"host-delay": "SLUICE_HOST_DELAY", "drain": "SLUICE_DRAIN",
}

// configPath returns the configuration file of the flag set: --config, or sluice.yaml in the
// data dir; and whether it was named explicitly (then it must exist).
func configPath(fset *flag.FlagSet) (string, bool) {
	if f := fset.Lookup("config"); f != nil && f.Value.String() != "" {
		return f.Value.String(), true
	}
	if f := fset.Lookup("data"); f != nil {
		return filepath.Join(f.Value.String(), ConfigFile), false
	}
	return "", false
}

// readConfigFile reads the configuration file: flag names to values, and sections named after a
// command ("serve") or a command and subcommand ("job list") holding flags of that command only.
func readConfigFile(path string) (map[string]any, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(src, &m); err != nil {
		return nil, fmt.Errorf("configuration file %s: %w", path, err)
	}
	return m, nil
}

// applyConfigFile applies the configuration file (see readConfigFile) to the flags of fset
// that neither the command line nor their environment variable set, and returns their names.
func applyConfigFile(fset *flag.FlagSet) error {
	_, err := applyConfig(fset)
	return err
}

func applyConfig(fset *flag.FlagSet) ([]string, error) {
	path, explicit := configPath(fset)
	if path == "" {
		return nil, nil
	}
	m, err := readConfigFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	values := map[string]any{}
	cmd, _, _ := strings.Cut(fset.Name(), " ")
	for _, scope := range []string{"", cmd, fset.Name()} { // the narrower wins
		sec := m
		if scope != "" {
			s, ok := m[scope].(map[string]any)
			if !ok {
				continue
			}
			sec = s
		}
		for k, v := range sec {
			if _, isSection := v.(map[string]any); !isSection {
				values[k] = v
			}
		}
	}
	if _, ok := values["data"]; ok && !explicit {
		return nil, usagef("%s sets data: the data dir's own configuration file cannot move it (use --config FILE)", path)
	}
	var applied []string
	for _, k := range slices.Sorted(mapsKeys(values)) {
		f := fset.Lookup(k)
		if f == nil || set[k] || k == "config" || os.Getenv(flagEnv[k]) != "" && flagEnv[k] != "" {
			continue
		}
		for _, s := range configStrings(values[k]) {
			if err := fset.Set(k, s); err != nil {
				return nil, usagef("%s: %s: %v", path, k, err)
			}
		}
		applied = append(applied, k)
	}
	return applied, nil
}

// configStrings turns a configuration value into flag values: a list sets a repeatable flag
// once per element.
func configStrings(v any) []string {
	if l, ok := v.([]any); ok {
		var out []string
		for _, e := range l {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// zeroDefaults are the values the components apply for the flags whose zero value stands for
// a default, read from the components themselves: config show prints what is in effect.
func zeroDefaults() map[string]string {
	fl := fileset.DefaultLimits()
	return map[string]string{
		"lease":           worker.DefaultLeaseDuration.String(),
		"max-item-depth":  strconv.Itoa(engine.DefaultMaxItemDepth),
		"max-job-items":   strconv.Itoa(engine.DefaultMaxJobItems),
		"max-backlog":     strconv.Itoa(engine.DefaultMaxBacklog),
		"outbox-max":      strconv.Itoa(outbox.DefaultMaxPending),
		"source-ack-wait": source.DefaultAckWait.String(),
		"max-total-size":  byteSize(fl.MaxTotalSize).String(),
		"max-file-count":  strconv.Itoa(fl.MaxFileCount),
	}
}

// withDefault returns a flag's usage ending with the default its component applies when the
// flag is zero, from [zeroDefaults]: help and config show cannot disagree.
func withDefault(name, usage string) string {
	d, ok := zeroDefaults()[name]
	if !ok {
		panic("cli: no default known for --" + name)
	}
	return usage + " (default " + d + ")"
}

// setting is one line of `sluice config show`.
type setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"` // flag, env, file or default
}

// configShowJSON is `sluice config show --output json`.
type configShowJSON struct {
	File     string    `json:"file"`
	Settings []setting `json:"settings"`
}

// secretEnv are environment variables shown by config show as set or not, never their value.
var secretEnv = []string{"SLUICE_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// plainEnv are other environment variables config show prints.
var plainEnv = []string{"AWS_REGION", "AWS_ENDPOINT_URL_S3", "SLUICE_SANDBOX"}

func runConfig(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "show" {
		return usagef("config needs a subcommand: show")
	}
	fset, c := newFlags(e, "config show", "config show [--output table|json]")
	c.addEgressFlags(fset)
	c.addFilesetFlags(fset)
	out := addOutputFlag(fset)
	if err := fset.Parse(args[1:]); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return usagef("config show takes no arguments")
	}
	byFlag := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { byFlag[f.Name] = true })
	fromFile, err := applyConfig(fset)
	if err != nil {
		return err
	}
	path, explicit := configPath(fset)
	if _, err := os.Stat(path); err != nil && !explicit {
		path = ""
	}
	res := configShowJSON{File: path, Settings: []setting{}}
	defaults := zeroDefaults()
	fset.VisitAll(func(f *flag.Flag) {
		if f.Name == "output" || f.Name == "json" {
			return
		}
		src := "default"
		switch {
		case byFlag[f.Name]:
			src = "flag"
		case slices.Contains(fromFile, f.Name):
			src = "file"
		case flagEnv[f.Name] != "" && os.Getenv(flagEnv[f.Name]) != "":
			src = "env"
		}
		v := f.Value.String()
		if d, ok := defaults[f.Name]; ok && (v == "0" || v == "0s") {
			v = d // the component's default, which a zero stands for
		}
		if _, ok := f.Value.(namedURLs); !ok {
			v = maskSecrets(v)
		}
		res.Settings = append(res.Settings, setting{Name: f.Name, Value: v, Source: src})
	})
	for _, k := range secretEnv {
		v := "(unset)"
		if os.Getenv(k) != "" {
			v = "******** (set)"
		}
		res.Settings = append(res.Settings, setting{Name: k, Value: v, Source: "env"})
	}
	for _, k := range plainEnv {
		if v := os.Getenv(k); v != "" {
			res.Settings = append(res.Settings, setting{Name: k, Value: maskSecrets(v), Source: "env"})
		}
	}
	if out.json() {
		return writeJSON(e.stdout, res)
	}
	if res.File != "" {
		fmt.Fprintf(e.stdout, "configuration file: %s\n\n", res.File)
	} else {
		fmt.Fprintf(e.stdout, "configuration file: none (%s in the data dir, or --config FILE)\n\n", ConfigFile)
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tFROM")
	for _, s := range res.Settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Value, s.Source)
	}
	return tw.Flush()
}

// maskSecrets masks the secrets of a URL value (redact.URL); other values are shown as they
// are. A NAME=URL list (--sink, --source) masks its URLs itself.
func maskSecrets(v string) string {
	if !strings.Contains(v, "://") {
		return v
	}
	return redact.URL(v)
}
