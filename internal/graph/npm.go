package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Npm is the `npm` package type: packages of an npm registry, read by its protocol — a package's
// packument at GET /{name} (a scoped name's slash escaped, /@scope%2fname), whose "versions" hold
// each version's manifest. A version's relationships are its dependencies (kind dependency),
// optionalDependencies (kind optional; installed, as npm does where the platform allows), and
// peerDependencies (kind peer; installed, as npm 7 and later do, unless peerDependenciesMeta marks
// them optional: kind peer-optional, EXTRA), all RUNTIME; and devDependencies (kind dev,
// BUILD_TIME: followed only from a root traversed at BUILD_TIME, as `npm install` in that package
// would).
//
// Any number of versions of a package coexist: select-sync claims the package and range (each
// declared range is selected once in a request), and select picks a version as npm-pick-manifest
// does — the dist-tag latest when the range holds it (or is *), else the highest version the range
// holds, a deprecated version only when no other does; a dist-tag name selects its version. The
// request's result is the tree `npm install` would build from those selections (see [npmTree]):
// a dependency a package can already see at a version its range holds is not added again.
type Npm struct{}

// Name implements [PackageType].
func (Npm) Name() string { return "npm" }

// SelectKey implements [PackageType]: the package and the range, which select one version.
func (Npm) SelectKey(pkg, advice string) string { return pkg + "@" + advice }

// The bounds of a packument: its bytes (a popular package's abbreviated packument is a few MiB),
// its versions and one version's relationships.
const (
	maxPackumentBytes = 32 << 20
	maxNpmVersions    = 20000
	maxNpmDeps        = 5000
)

// npmAccept asks a registry for the abbreviated packument (what npm install reads), or the full one.
const npmAccept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"

type packument struct {
	DistTags map[string]string          `json:"dist-tags"`
	Versions map[string]json.RawMessage `json:"versions"`
}

type npmManifest struct {
	Deprecated           any                                `json:"deprecated"`
	Dependencies         map[string]string                  `json:"dependencies"`
	OptionalDependencies map[string]string                  `json:"optionalDependencies"`
	PeerDependencies     map[string]string                  `json:"peerDependencies"`
	PeerDependenciesMeta map[string]struct{ Optional bool } `json:"peerDependenciesMeta"`
	DevDependencies      map[string]string                  `json:"devDependencies"`
}

// deprecated reports whether the manifest is deprecated (a non-empty message).
func (m *npmManifest) deprecated() bool {
	switch d := m.Deprecated.(type) {
	case string:
		return d != ""
	case bool:
		return d
	}
	return false
}

// packumentPath is a package's packument path in a registry.
func packumentPath(pkg string) (string, error) {
	name := pkg
	scope := ""
	if strings.HasPrefix(pkg, "@") {
		s, n, ok := strings.Cut(pkg[1:], "/")
		if !ok || s == "" {
			return "", &MetadataError{What: pkg, Reason: "a scoped package name is @scope/name"}
		}
		scope, name = "@"+s+"%2f", n
	}
	if name == "" || len(pkg) > 214 || strings.ContainsAny(name, "/\\") || name == "." || name == ".." || strings.HasPrefix(name, ".") ||
		url.PathEscape(name) != name {
		return "", &MetadataError{What: pkg, Reason: "not an npm package name"}
	}
	return scope + name, nil
}

// loadPackument fetches and parses a package's packument.
func loadPackument(ctx context.Context, f *Fetcher, source, pkg string) (*packument, string, error) {
	rel, err := packumentPath(pkg)
	if err != nil {
		return nil, "", err
	}
	b, err := f.fetch(ctx, source, rel, fetchOpts{accept: npmAccept, maxBytes: maxPackumentBytes})
	if err != nil {
		return nil, rel, err
	}
	var p packument
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, rel, &MetadataError{What: rel, Reason: err.Error()}
	}
	if len(p.Versions) > maxNpmVersions {
		return nil, rel, &MetadataError{What: rel, Reason: fmt.Sprintf("%d versions, more than the limit of %d", len(p.Versions), maxNpmVersions)}
	}
	return &p, rel, nil
}

// Select implements [PackageType]: the override, or npm-pick-manifest's choice for the range or
// dist-tag.
func (Npm) Select(ctx context.Context, f *Fetcher, r *Request, pkg, advice string) (string, string, error) {
	if p, v, ok := r.override(pkg); ok {
		pkg, advice = p, v
	}
	p, rel, err := loadPackument(ctx, f, r.Source, pkg)
	if err != nil {
		return "", "", err
	}
	v, err := pickManifest(p, advice)
	if err != nil {
		return "", "", &MetadataError{What: rel, Reason: err.Error()}
	}
	return pkg, v, nil
}

// pickManifest chooses a version for a spec as npm-pick-manifest does (its engine and publish-time
// rules aside): a dist-tag's version; for a range, the latest tag's version when the range holds
// it (or is *) and it is not deprecated, else the highest version the range holds, those not
// deprecated first.
func pickManifest(p *packument, spec string) (string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		spec = "*"
	}
	rng, err := parseNpmRange(spec)
	if err != nil {
		if !isTagName(spec) {
			return "", fmt.Errorf("version spec %q: not a range nor a dist-tag (git, file, URL and alias specs are not supported)", spec)
		}
		v, ok := p.DistTags[spec]
		if !ok {
			return "", fmt.Errorf("no dist-tag %q", spec)
		}
		if _, ok := p.Versions[v]; !ok {
			return "", fmt.Errorf("dist-tag %s is version %s, which the packument does not hold", spec, v)
		}
		return v, nil
	}
	manifest := func(v string) *npmManifest {
		var m npmManifest
		_ = json.Unmarshal(p.Versions[v], &m)
		return &m
	}
	if latest, ok := p.DistTags["latest"]; ok {
		if lv, ok := parseSemver(latest); ok && (spec == "*" || rng.satisfies(lv)) {
			if _, ok := p.Versions[latest]; ok && !manifest(latest).deprecated() {
				return latest, nil
			}
		}
	}
	type cand struct {
		s    string
		v    semverV
		depr bool
	}
	var cs []cand
	for s := range p.Versions {
		if v, ok := parseSemver(s); ok && rng.satisfies(v) {
			cs = append(cs, cand{s, v, manifest(s).deprecated()})
		}
	}
	if len(cs) == 0 {
		return "", fmt.Errorf("no version satisfies %q among %d", spec, len(p.Versions))
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].depr != cs[j].depr {
			return !cs[i].depr
		}
		return compareSemver(cs[i].v, cs[j].v) > 0
	})
	return cs[0].s, nil
}

// isTagName reports whether s can be a dist-tag (npm-package-arg: it needs no URI encoding).
func isTagName(s string) bool {
	return s != "" && url.QueryEscape(s) == s && !strings.ContainsAny(s, ":")
}

// Resolve implements [PackageType]: the version's manifest in the packument.
func (Npm) Resolve(ctx context.Context, f *Fetcher, source, pkg, version string) ([]Relationship, error) {
	p, rel, err := loadPackument(ctx, f, source, pkg)
	if err != nil {
		return nil, err
	}
	raw, ok := p.Versions[version]
	if !ok {
		return nil, fmt.Errorf("%s: no version %s: %w", rel, version, ErrMissing)
	}
	var m npmManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &MetadataError{What: rel, Reason: fmt.Sprintf("version %s: %v", version, err)}
	}
	return m.relationships(rel + "@" + version)
}

// relationships lists the manifest's relationships sorted by name (npm places a package's
// dependencies in name order); a name in optionalDependencies is optional even when
// dependencies repeats it, as npm publishes them.
func (m *npmManifest) relationships(what string) ([]Relationship, error) {
	type dep struct{ spec, kind, scope string }
	all := map[string]dep{}
	for n, s := range m.DevDependencies {
		all[n] = dep{s, "dev", ScopeBuildTime}
	}
	for n, s := range m.PeerDependencies {
		if m.PeerDependenciesMeta[n].Optional {
			all[n] = dep{s, "peer-optional", ScopeExtra}
		} else {
			all[n] = dep{s, "peer", ScopeRuntime}
		}
	}
	for n, s := range m.Dependencies {
		all[n] = dep{s, "dependency", ScopeRuntime}
	}
	for n, s := range m.OptionalDependencies {
		all[n] = dep{s, "optional", ScopeRuntime}
	}
	if len(all) > maxNpmDeps {
		return nil, &MetadataError{What: what, Reason: fmt.Sprintf("%d dependencies, more than the limit of %d", len(all), maxNpmDeps)}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	rels := make([]Relationship, 0, len(names))
	for _, n := range names {
		d := all[n]
		rels = append(rels, Relationship{Target: n, Advice: d.spec, Scope: d.scope, Kind: d.kind})
	}
	return rels, nil
}
