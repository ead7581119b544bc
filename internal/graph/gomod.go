package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// GoMod is the `gomod` package type: Go modules over the GOPROXY protocol. A package is a module
// path, a version a semantic version; relationships are the `require` lines of the version's
// .mod file, all RUNTIME. Versions of one module coexist during the traversal (select-sync
// claims the module version, not the module), and the build list is settled at the end by
// minimal version selection: the highest version of each module reachable at all, losers'
// requirements included.
type GoMod struct{}

// Name implements [PackageType].
func (GoMod) Name() string { return "gomod" }

// SelectKey implements [PackageType]: the module version.
func (GoMod) SelectKey(pkg, advice string) string { return pkg + "@" + advice }

// Select implements [PackageType]: the override, or the required version itself; "latest" (a
// root's) is the version the GOPROXY protocol answers for it, as `go get m@latest` chooses:
// the highest release in @v/list, else the highest prerelease, else @latest's .info.
func (GoMod) Select(ctx context.Context, f *Fetcher, r *Request, pkg, advice string) (string, string, error) {
	if p, v, ok := r.override(pkg); ok {
		pkg, advice = p, v
	}
	if advice == "latest" {
		v, err := goLatest(ctx, f, r.Source, pkg)
		if err != nil {
			return "", "", err
		}
		advice = v
	}
	if err := module.Check(pkg, advice); err != nil {
		return "", "", &MetadataError{What: pkg + "@" + advice, Reason: err.Error()}
	}
	return pkg, advice, nil
}

// Resolve implements [PackageType]: fetch <source>/<escaped path>/@v/<escaped version>.mod.
func (GoMod) Resolve(ctx context.Context, f *Fetcher, source, pkg, version string) ([]Relationship, error) {
	ep, err := module.EscapePath(pkg)
	if err != nil {
		return nil, &MetadataError{What: pkg, Reason: err.Error()}
	}
	ev, err := module.EscapeVersion(version)
	if err != nil {
		return nil, &MetadataError{What: pkg + "@" + version, Reason: err.Error()}
	}
	rel := ep + "/@v/" + ev + ".mod"
	b, err := f.Fetch(ctx, source, rel)
	if err != nil {
		return nil, err
	}
	mf, err := modfile.ParseLax(rel, b, nil)
	if err != nil {
		return nil, &MetadataError{What: rel, Reason: err.Error()}
	}
	rels := make([]Relationship, 0, len(mf.Require))
	for _, r := range mf.Require {
		rels = append(rels, Relationship{Target: r.Mod.Path, Advice: r.Mod.Version, Scope: ScopeRuntime, Kind: "require"})
	}
	return rels, nil
}

// goLatest returns a module's latest version from the proxy: @v/list's highest release (or
// prerelease, when there is no release), else @latest's .info.
func goLatest(ctx context.Context, f *Fetcher, source, pkg string) (string, error) {
	ep, err := module.EscapePath(pkg)
	if err != nil {
		return "", &MetadataError{What: pkg, Reason: err.Error()}
	}
	b, err := f.Fetch(ctx, source, ep+"/@v/list")
	if err != nil && !errors.Is(err, ErrMissing) {
		return "", err
	}
	best := ""
	for _, v := range strings.Fields(string(b)) {
		if !semver.IsValid(v) || module.IsPseudoVersion(v) {
			continue
		}
		better := best == "" || semver.Compare(v, best) > 0
		if semver.Prerelease(best) == "" && best != "" && semver.Prerelease(v) != "" {
			better = false // a release wins over any prerelease
		} else if semver.Prerelease(best) != "" && semver.Prerelease(v) == "" {
			better = true
		}
		if better {
			best = v
		}
	}
	if best != "" {
		return best, nil
	}
	b, err = f.Fetch(ctx, source, ep+"/@latest")
	if err != nil {
		return "", err
	}
	var info struct{ Version string }
	if err := json.Unmarshal(b, &info); err != nil || !semver.IsValid(info.Version) {
		return "", &MetadataError{What: ep + "/@latest", Reason: fmt.Sprintf("no version in %.100q", b)}
	}
	return info.Version, nil
}

// mvs returns the build list of a set of module versions: the highest version per module.
func mvs(versions map[string][]string) map[string]string {
	out := make(map[string]string, len(versions))
	for pkg, vs := range versions {
		best := ""
		for _, v := range vs {
			if best == "" || semver.Compare(v, best) > 0 {
				best = v
			}
		}
		out[pkg] = best
	}
	return out
}
