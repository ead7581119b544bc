package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionJSON is `sluice version --output json`.
type versionJSON struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision"`
	Time     string `json:"time"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

// buildVersion reads the module version and VCS stamp Go recorded in the binary: "(devel)" and
// no revision for a build of a checkout without VCS stamping (-buildvcs=false, go run in some
// set-ups); a tagged `go install …@v1.2.3` says v1.2.3.
func buildVersion() versionJSON {
	v := versionJSON{Version: "(devel)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module = bi.Main.Path
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func runVersion(ctx context.Context, e *env, args []string) error {
	fs, _ := newFlags(e, "version", "version [--output table|json]")
	out := addOutputFlag(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	v := buildVersion()
	if out.json() {
		return writeJSON(e.stdout, v)
	}
	rev := v.Revision
	switch {
	case rev == "":
		rev = "unknown revision"
	case v.Modified:
		rev += " (modified)"
	}
	if v.Time != "" {
		rev += ", " + v.Time
	}
	fmt.Fprintf(e.stdout, "sluice %s (%s; %s)\n", v.Version, rev, v.Go)
	return nil
}
