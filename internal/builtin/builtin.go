// Package builtin holds the workflows that ship with Sluice (documents, fileset, graph, objects)
// and applies them to an installation, so `sluice ingest` and the other commands work with no
// set-up.
package builtin

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sluice-project/sluice/internal/engine"
)

//go:embed *.yaml
var files embed.FS

// Names lists the built-in workflows.
func Names() []string {
	names, _ := fs.Glob(files, "*.yaml")
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".yaml")
	}
	return names
}

// Source returns a built-in workflow's YAML.
func Source(name string) ([]byte, bool) {
	b, err := files.ReadFile(name + ".yaml")
	return b, err == nil
}

// Apply stores the named built-in workflow (a no-op when this version is already stored).
func Apply(ctx context.Context, e *engine.Engine, name string) error {
	src, ok := Source(name)
	if !ok {
		return fmt.Errorf("no built-in workflow %q", name)
	}
	_, _, err := e.ApplyWorkflow(ctx, src, name+".yaml")
	if err != nil {
		return fmt.Errorf("apply built-in workflow %q: %w", name, err)
	}
	return nil
}

// Owner returns the built-in workflow an action belongs to — one whose name starts with the
// workflow's name and "-" or "." (fileset-download, objects.digests), which only that workflow's
// steps use — or "" for an action any workflow may use.
func Owner(action string) string {
	for _, n := range Names() {
		if rest, ok := strings.CutPrefix(action, n); ok && rest != "" && (rest[0] == '-' || rest[0] == '.') {
			return n
		}
	}
	return ""
}
