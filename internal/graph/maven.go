package graph

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Maven is the `maven` package type, a "maven-lite": POMs in a Maven repository layout
// (group/as/path/artifact/version/artifact-version.pom). A package is "groupId:artifactId".
// Resolve builds the effective POM — the parent chain's properties, dependencies and
// dependencyManagement inherited, BOM imports merged, ${…} interpolated — and records:
//
//   - the parent (RUNTIME, kind parent);
//   - each dependency, its version from dependencyManagement when it has none: compile and
//     runtime are RUNTIME, provided and test BUILD_TIME, optional and system EXTRA; each with
//     its exclusions;
//   - each plugin (BUILD_TIME, kind plugin);
//   - each managed dependency (EXTRA, kind managed: stored, never followed, read by select);
//   - or, for a relocated POM, one relationship of kind relocation to the new coordinates.
//
// Selection is nearest wins: the work item of a package at the least depth, then first in
// declaration order (its ordinal path), selects; the others are AVOIDED and their subtrees not
// traversed. The roots' dependencyManagement sets the version of every transitive dependency
// it names. Profiles and version ranges are not supported (a range is taken as written).
type Maven struct{}

// Name implements [PackageType].
func (Maven) Name() string { return "maven" }

// SelectKey implements [PackageType]: the package. Select-sync's claim makes one work item per
// package do it; which one wins is decided by select at a per-depth barrier (see [Maven]), not by
// the first claimant, which depends on the workers' order.
func (Maven) SelectKey(pkg, advice string) string { return pkg }

// NearestWins marks the type's selection as nearest wins (see [Maven]).
func (Maven) NearestWins() bool { return true }

// Select implements [PackageType]: the override, or the advice.
func (Maven) Select(_ context.Context, r *Request, pkg, advice string) (string, string, error) {
	if p, v, ok := r.override(pkg); ok {
		return p, v, nil
	}
	if advice == "" {
		return "", "", &MetadataError{What: pkg, Reason: "no version (none declared nor managed)"}
	}
	return pkg, advice, nil
}

// pomPath is a POM's path in a repository.
func pomPath(pkg, version string) (string, error) {
	g, a, ok := strings.Cut(pkg, ":")
	if !ok || g == "" || a == "" || strings.ContainsAny(pkg+version, "/\\") || strings.Contains(version, "..") {
		return "", &MetadataError{What: pkg + "@" + version, Reason: "want groupId:artifactId and a version"}
	}
	return strings.ReplaceAll(g, ".", "/") + "/" + a + "/" + version + "/" + a + "-" + version + ".pom", nil
}

type coords struct {
	GroupID    string `xml:"groupId"`
	ArtifactID string `xml:"artifactId"`
	Version    string `xml:"version"`
}

type pomDep struct {
	coords
	Type       string   `xml:"type"`
	Scope      string   `xml:"scope"`
	Optional   string   `xml:"optional"`
	Exclusions []coords `xml:"exclusions>exclusion"`
}

type pom struct {
	coords
	Parent     *coords `xml:"parent"`
	Properties struct {
		Entries []struct {
			XMLName xml.Name
			Value   string `xml:",chardata"`
		} `xml:",any"`
	} `xml:"properties"`
	Dependencies []pomDep `xml:"dependencies>dependency"`
	Managed      []pomDep `xml:"dependencyManagement>dependencies>dependency"`
	Plugins      []pomDep `xml:"build>plugins>plugin"`
	Relocation   *coords  `xml:"distributionManagement>relocation"`
}

// effective is a POM with its parents' inheritance applied.
type effective struct {
	pkg, version string
	parent       *coords
	props        map[string]string
	deps         []pomDep
	managed      []pomDep
	plugins      []pomDep
	relocation   *coords
}

// maxParents bounds a parent chain (and BOM imports): deeper is treated as a cycle.
const maxParents = 32

// Resolve implements [PackageType].
func (Maven) Resolve(ctx context.Context, f *Fetcher, source, pkg, version string) ([]Relationship, error) {
	e, err := loadEffective(ctx, f, source, pkg, version, nil, &expansion{})
	if err != nil {
		return nil, err
	}
	if r := e.relocation; r != nil {
		to := coords{GroupID: firstNonEmpty(r.GroupID, strings.Split(pkg, ":")[0]), ArtifactID: firstNonEmpty(r.ArtifactID, strings.SplitN(pkg, ":", 2)[1]), Version: firstNonEmpty(r.Version, version)}
		return []Relationship{{Target: to.GroupID + ":" + to.ArtifactID, Advice: to.Version, Scope: ScopeRuntime, Kind: "relocation"}}, nil
	}
	managed := map[string]pomDep{}
	for _, m := range e.managed {
		if _, ok := managed[m.key()]; !ok {
			managed[m.key()] = m
		}
	}
	var rels []Relationship
	if p := e.parent; p != nil {
		rels = append(rels, Relationship{Target: p.GroupID + ":" + p.ArtifactID, Advice: p.Version, Scope: ScopeRuntime, Kind: "parent"})
	}
	for _, d := range e.deps {
		if m, ok := managed[d.key()]; ok {
			d.Version = firstNonEmpty(d.Version, m.Version)
			d.Scope = firstNonEmpty(d.Scope, m.Scope)
			if len(d.Exclusions) == 0 {
				d.Exclusions = m.Exclusions
			}
		}
		scope := ScopeRuntime
		switch {
		case d.Optional == "true" || d.Scope == "system" || d.Scope == "import":
			scope = ScopeExtra
		case d.Scope == "provided" || d.Scope == "test":
			scope = ScopeBuildTime
		}
		var ex []string
		for _, x := range d.Exclusions {
			ex = append(ex, x.GroupID+":"+x.ArtifactID)
		}
		rels = append(rels, Relationship{Target: d.key(), Advice: d.Version, Scope: scope, Kind: "dependency", Exclusions: ex})
	}
	for _, p := range e.plugins {
		if p.GroupID == "" {
			p.GroupID = "org.apache.maven.plugins"
		}
		rels = append(rels, Relationship{Target: p.key(), Advice: p.Version, Scope: ScopeBuildTime, Kind: "plugin"})
	}
	for _, m := range e.managed {
		rels = append(rels, Relationship{Target: m.key(), Advice: m.Version, Scope: ScopeExtra, Kind: "managed"})
	}
	return rels, nil
}

func (d pomDep) key() string { return d.GroupID + ":" + d.ArtifactID }

// loadEffective reads a POM and its parents (chain holds the POMs below it, to find a cycle);
// x is the interpolation budget they share.
func loadEffective(ctx context.Context, f *Fetcher, source, pkg, version string, chain []string, x *expansion) (*effective, error) {
	id := pkg + "@" + version
	for _, c := range chain {
		if c == id {
			return nil, &MetadataError{What: chain[0], Reason: "parent cycle: " + strings.Join(append(chain, id), " -> ")}
		}
	}
	if len(chain) >= maxParents {
		return nil, &MetadataError{What: chain[0], Reason: fmt.Sprintf("more than %d parents or imports", maxParents)}
	}
	chain = append(chain, id)
	rel, err := pomPath(pkg, version)
	if err != nil {
		return nil, err
	}
	b, err := f.Fetch(ctx, source, rel)
	if err != nil {
		if len(chain) > 1 && errors.Is(err, ErrMissing) {
			// A missing parent or BOM makes the POM unusable (ERROR), not missing (FAILED).
			return nil, &MetadataError{What: chain[0], Reason: "parent or import " + id + ": " + err.Error()}
		}
		return nil, err
	}
	var p pom
	if err := xml.Unmarshal(b, &p); err != nil {
		return nil, &MetadataError{What: rel, Reason: err.Error()}
	}
	e := &effective{pkg: pkg, version: version, props: map[string]string{}, parent: p.Parent, relocation: p.Relocation}
	if p.Parent != nil {
		par, err := loadEffective(ctx, f, source, p.Parent.GroupID+":"+p.Parent.ArtifactID, p.Parent.Version, chain, x)
		if err != nil {
			return nil, err
		}
		for k, v := range par.props {
			e.props[k] = v
		}
		e.props["project.parent.version"] = p.Parent.Version
		e.props["parent.version"] = p.Parent.Version
		p.GroupID = firstNonEmpty(p.GroupID, p.Parent.GroupID)
		p.Version = firstNonEmpty(p.Version, p.Parent.Version)
		e.deps, e.managed = par.deps, par.managed
	}
	for _, pe := range p.Properties.Entries {
		e.props[pe.XMLName.Local] = strings.TrimSpace(pe.Value)
	}
	e.props["project.groupId"], e.props["project.artifactId"], e.props["project.version"] = p.GroupID, p.ArtifactID, p.Version
	e.props["pom.version"], e.props["version"] = p.Version, p.Version
	in := &interpolator{pom: rel, props: e.props, x: x}
	interp := func(d pomDep) (pomDep, error) {
		var err error
		for _, f := range []*string{&d.GroupID, &d.ArtifactID, &d.Version} {
			if *f, err = in.interpolate(*f); err != nil {
				return d, err
			}
		}
		d.Scope = strings.TrimSpace(d.Scope)
		return d, nil
	}
	// The child's declarations first (they win by order and by key), then the inherited ones.
	own, err := mapDeps(p.Dependencies, interp)
	if err != nil {
		return nil, err
	}
	e.deps = mergeDeps(own, e.deps)
	ownManaged, err := mapDeps(p.Managed, interp)
	if err != nil {
		return nil, err
	}
	var managed []pomDep
	for _, m := range ownManaged {
		if m.Scope == "import" && (m.Type == "pom") {
			bom, err := loadEffective(ctx, f, source, m.key(), m.Version, chain, x)
			if err != nil {
				return nil, err
			}
			managed = mergeDeps(managed, bom.managed)
			continue
		}
		managed = mergeDeps(managed, []pomDep{m})
	}
	e.managed = mergeDeps(managed, e.managed)
	if e.plugins, err = mapDeps(p.Plugins, interp); err != nil {
		return nil, err
	}
	return e, nil
}

func mapDeps(ds []pomDep, fn func(pomDep) (pomDep, error)) ([]pomDep, error) {
	out := make([]pomDep, len(ds))
	for i, d := range ds {
		var err error
		if out[i], err = fn(d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mergeDeps returns a followed by the entries of b whose package a does not declare.
func mergeDeps(a, b []pomDep) []pomDep {
	seen := map[string]bool{}
	out := append([]pomDep(nil), a...)
	for _, d := range a {
		seen[d.key()] = true
	}
	for _, d := range b {
		if !seen[d.key()] {
			seen[d.key()] = true
			out = append(out, d)
		}
	}
	return out
}

// The bounds of property interpolation. A POM is untrusted input: a property holding a thousand
// references to one holding a thousand references… (a "billion laughs" of 15 KB) expands to
// gigabytes. Each bound, exceeded, is a [*MetadataError] naming the POM.
const (
	// maxPropertyValue bounds one expanded value (a property's or a field's).
	maxPropertyValue = 64 << 10
	// maxPropertyDepth bounds a chain of properties referring to properties.
	maxPropertyDepth = 32
	// maxExpansion bounds the bytes substituted while resolving one POM with its parents and
	// imports: many references to one large value stop here.
	maxExpansion = 4 << 20
)

// expansion is the interpolation budget of one Resolve, shared by the POMs it loads.
type expansion struct{ work int }

// interpolator expands ${name} in one POM's fields. Each property is expanded once (memo), so
// the work is linear in what is substituted.
type interpolator struct {
	pom   string // the POM's path, for errors
	props map[string]string
	memo  map[string]string
	x     *expansion
}

// errKeep marks a reference to a property that is being expanded (a cycle): the reference is
// kept as written.
var errKeep = errors.New("property cycle")

// interpolate replaces ${name} with the property's value, itself interpolated; unknown
// properties and cycles are kept as written.
func (in *interpolator) interpolate(s string) (string, error) {
	return in.expand(strings.TrimSpace(s), nil)
}

// expand interpolates s, stack holding the properties being expanded around it.
func (in *interpolator) expand(s string, stack []string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i+2:], '}')
		if j <= 0 { // no name, or no closing brace: the rest is literal
			if j < 0 {
				break
			}
			b.WriteString(s[:i+3])
			s = s[i+3:]
			continue
		}
		name := s[i+2 : i+2+j]
		b.WriteString(s[:i])
		v, err := in.value(name, stack)
		switch {
		case errors.Is(err, errKeep):
			v = s[i : i+3+j]
		case err != nil:
			return "", err
		}
		if in.x.work += len(v); in.x.work > maxExpansion {
			return "", &MetadataError{What: in.pom, Reason: fmt.Sprintf("properties expand to more than %d MiB in all (the limit per POM)", maxExpansion>>20)}
		}
		b.WriteString(v)
		if b.Len() > maxPropertyValue {
			return "", in.tooLarge(stack)
		}
		s = s[i+3+j:]
	}
	b.WriteString(s)
	if b.Len() > maxPropertyValue {
		return "", in.tooLarge(stack)
	}
	return b.String(), nil
}

// value returns the expanded value of property name: its own text when it is unknown
// ("${name}"), errKeep when it is being expanded already.
func (in *interpolator) value(name string, stack []string) (string, error) {
	raw, ok := in.props[name]
	if !ok {
		return "${" + name + "}", nil
	}
	if v, ok := in.memo[name]; ok {
		return v, nil
	}
	if slices.Contains(stack, name) {
		return "", errKeep
	}
	if len(stack) >= maxPropertyDepth {
		shown := stack[:3]
		return "", &MetadataError{What: in.pom, Reason: fmt.Sprintf("properties refer to properties more than %d deep (%s, …)", maxPropertyDepth, strings.Join(shown, ", "))}
	}
	v, err := in.expand(raw, append(stack, name))
	if err != nil {
		return "", err
	}
	if in.memo == nil {
		in.memo = map[string]string{}
	}
	in.memo[name] = v
	return v, nil
}

// tooLarge is the error of a value over maxPropertyValue: the property being expanded, or the
// field.
func (in *interpolator) tooLarge(stack []string) error {
	what := "a value"
	if len(stack) > 0 {
		what = "property " + stack[len(stack)-1]
	}
	return &MetadataError{What: in.pom, Reason: fmt.Sprintf("%s expands to more than %d KiB (the limit for one value)", what, maxPropertyValue>>10)}
}
