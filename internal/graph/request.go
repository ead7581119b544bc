package graph

import (
	"fmt"
	"slices"
	"strings"
)

// Request is a user's traversal request (Cartographer's UserRequest): what `sluice graph` and
// `POST /v1/graphs` take, recorded in the request's workspace by register.
type Request struct {
	// Type is the package type of the roots: "gomod" or "maven". Defaults to gomod.
	Type string `json:"type,omitempty"`
	// Source is where metadata comes from: a GOPROXY or a Maven repository, as an http(s):// URL,
	// a file:// URL or a directory.
	Source string `json:"source"`
	// Roots are the packages to traverse from, each "name@version"; a maven root may be written
	// "groupId:artifactId:version", which Normalize rewrites as "groupId:artifactId@version".
	Roots []string `json:"roots"`
	// Scope is the traverse scope of the roots: RUNTIME (the default) or BUILD_TIME.
	Scope string `json:"scope,omitempty"`
	// MaxDepth, when positive, stops the traversal below that depth (the roots are depth 0).
	MaxDepth int `json:"max_depth,omitempty"`
	// Overrides map a package to the version every request of it selects: "VERSION", or
	// "OTHERPKG@VERSION" to relocate it to another package.
	Overrides map[string]string `json:"overrides,omitempty"`
	// Excludes are packages never traversed.
	Excludes []string `json:"excludes,omitempty"`
	// Format is the result's default rendering: node, path, dot, json or template. Defaults to node.
	Format string `json:"format,omitempty"`
	// Template is the Go text/template the template format renders the result with (see
	// [ParseTemplate]).
	Template string `json:"template,omitempty"`
}

// Traverse scopes and relationship scopes (Cartographer's TraverseScope, plus EXTRA for
// relationships stored and never followed).
const (
	ScopeRuntime   = "RUNTIME"
	ScopeBuildTime = "BUILD_TIME"
	ScopeExtra     = "EXTRA"
)

// Formats are the renderings of a result.
var Formats = []string{"node", "path", "dot", "json", "template"}

// Normalize fills defaults and checks the request, returning an error that names the field.
func (r *Request) Normalize() error {
	if r.Type == "" {
		r.Type = "gomod"
	}
	switch strings.ToUpper(strings.ReplaceAll(r.Scope, "-", "_")) {
	case "", "RUNTIME":
		r.Scope = ScopeRuntime
	case "BUILD", "BUILD_TIME":
		r.Scope = ScopeBuildTime
	default:
		return fmt.Errorf("scope %q: want runtime or build", r.Scope)
	}
	if r.Format == "" {
		r.Format = "node"
	}
	if !slices.Contains(Formats, r.Format) {
		return fmt.Errorf("format %q: want one of %s", r.Format, strings.Join(Formats, ", "))
	}
	if r.Format == "template" || r.Template != "" {
		if r.Format != "template" {
			return fmt.Errorf("template: given with format %q; want format template", r.Format)
		}
		if r.Template == "" {
			return fmt.Errorf("format template: the template is empty")
		}
		if _, err := ParseTemplate(r.Template); err != nil {
			return err
		}
	}
	if r.MaxDepth < 0 {
		return fmt.Errorf("max_depth %d: must not be negative", r.MaxDepth)
	}
	if len(r.Roots) == 0 {
		return fmt.Errorf("roots: at least one root (name@version) is needed")
	}
	for i, root := range r.Roots {
		if r.Type == "maven" && !strings.Contains(root, "@") && strings.Count(root, ":") == 2 {
			// Maven's own spelling, groupId:artifactId:version.
			j := strings.LastIndexByte(root, ':')
			root = root[:j] + "@" + root[j+1:]
			r.Roots[i] = root
		}
		if _, _, ok := splitVersion(root); !ok {
			if r.Type == "maven" {
				return fmt.Errorf("root %q: want groupId:artifactId:version (or groupId:artifactId@version)", root)
			}
			return fmt.Errorf("root %q: want name@version", root)
		}
	}
	for pkg, to := range r.Overrides {
		if pkg == "" || to == "" {
			return fmt.Errorf("override %q=%q: want PKG=VERSION or PKG=OTHERPKG@VERSION", pkg, to)
		}
	}
	if r.Source == "" {
		return fmt.Errorf("source: a proxy or repository URL, or a directory, is needed")
	}
	return nil
}

// override returns what the request's overrides make of pkg: the package and version to select
// instead, and whether there is an override.
func (r *Request) override(pkg string) (string, string, bool) {
	to, ok := r.Overrides[pkg]
	if !ok {
		return "", "", false
	}
	if p, v, ok := splitVersion(to); ok {
		return p, v, true
	}
	return pkg, to, true
}

// excluded reports whether the request excludes pkg.
func (r *Request) excluded(pkg string) bool { return slices.Contains(r.Excludes, pkg) }

// splitVersion splits "name@version" at its last @.
func splitVersion(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, '@')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}
