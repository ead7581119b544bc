package graph

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Maven is the `maven` package type, a "maven-lite": POMs in a Maven repository layout
// (group/as/path/artifact/version/artifact-version.pom). A package is "groupId:artifactId".
// Resolve builds the effective POM as Maven 3.8's model builder does — the parent chain's
// properties, dependencies, dependencyManagement and plugins inherited (the child's declarations
// win), then ${…} interpolated with the child's properties, then BOM imports merged (what the
// POM and its parents manage wins over an import, and an earlier import over a later one) — and
// records:
//
//   - the parent (RUNTIME, kind parent);
//   - each dependency, its version from dependencyManagement when it has none: compile and
//     runtime are RUNTIME, provided and test BUILD_TIME, optional and system EXTRA; each with
//     its exclusions;
//   - each plugin (BUILD_TIME, kind plugin), its version from pluginManagement when it has none,
//     and each of the plugin's own <dependencies> (BUILD_TIME, kind plugin-dependency);
//   - each managed dependency (EXTRA, kind managed: stored, never followed, read by select);
//   - or, for a relocated POM, one relationship of kind relocation to the new coordinates.
//
// Selection is nearest wins: the work item of a package at the least depth, then first in
// declaration order (its ordinal path), selects; the others are AVOIDED and their subtrees not
// traversed. The roots' dependencyManagement sets the version of every transitive dependency
// it names. A version range ([1.0,2.0), (,1.0],[1.2,)) selects the highest version in the
// package's maven-metadata.xml that it holds, versions ordered as Maven's ComparableVersion
// orders them. Profiles are not supported.
type Maven struct{}

// Name implements [PackageType].
func (Maven) Name() string { return "maven" }

// SelectKey implements [PackageType]: the package. Select-sync's claim makes one work item per
// package do it; which one wins is decided by select at a per-depth barrier (see [Maven]), not by
// the first claimant, which depends on the workers' order.
func (Maven) SelectKey(pkg, advice string) string { return pkg }

// NearestWins marks the type's selection as nearest wins (see [Maven]).
func (Maven) NearestWins() bool { return true }

// Select implements [PackageType]: the override, or the advice — a range resolved against the
// package's maven-metadata.xml.
func (Maven) Select(ctx context.Context, f *Fetcher, r *Request, pkg, advice string) (string, string, error) {
	if p, v, ok := r.override(pkg); ok {
		pkg, advice = p, v
	}
	if advice == "" {
		return "", "", &MetadataError{What: pkg, Reason: "no version (none declared nor managed)"}
	}
	if isMavenRange(advice) {
		v, err := selectMavenRange(ctx, f, r.Source, pkg, advice)
		return pkg, v, err
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

// pomPlugin is a build plugin with the dependencies the POM adds to it.
type pomPlugin struct {
	coords
	Dependencies []pomDep `xml:"dependencies>dependency"`
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
	Dependencies   []pomDep    `xml:"dependencies>dependency"`
	Managed        []pomDep    `xml:"dependencyManagement>dependencies>dependency"`
	Plugins        []pomPlugin `xml:"build>plugins>plugin"`
	ManagedPlugins []pomPlugin `xml:"build>pluginManagement>plugins>plugin"`
	Relocation     *coords     `xml:"distributionManagement>relocation"`
}

// effective is a POM with its parents' inheritance applied: before interpolation, the
// declarations as written (the child's first), and the properties (the child's winning).
type effective struct {
	pkg, version   string
	parent         *coords
	props          map[string]string
	deps           []pomDep
	managed        []pomDep // dependencyManagement but its imports
	imports        []pomDep // dependencyManagement's imports (scope import, type pom), in order
	plugins        []pomPlugin
	managedPlugins []pomPlugin
	relocation     *coords
}

// maxParents bounds a parent chain (and BOM imports): deeper is treated as a cycle.
const maxParents = 32

// maxPOMs bounds the POMs read to resolve one version, its parents and imports with theirs:
// imports of imports fan out.
const maxPOMs = 256

// Resolve implements [PackageType].
func (Maven) Resolve(ctx context.Context, f *Fetcher, source, pkg, version string) ([]Relationship, error) {
	x := &expansion{}
	e, err := loadEffective(ctx, f, source, pkg, version, nil, x)
	if err != nil {
		return nil, err
	}
	if err := e.interpolate(x); err != nil {
		return nil, err
	}
	if r := e.relocation; r != nil {
		to := coords{GroupID: firstNonEmpty(r.GroupID, strings.Split(pkg, ":")[0]), ArtifactID: firstNonEmpty(r.ArtifactID, strings.SplitN(pkg, ":", 2)[1]), Version: firstNonEmpty(r.Version, version)}
		return []Relationship{{Target: to.GroupID + ":" + to.ArtifactID, Advice: to.Version, Scope: ScopeRuntime, Kind: "relocation"}}, nil
	}
	allManaged, err := e.importBOMs(ctx, f, source, []string{pkg + "@" + version}, x)
	if err != nil {
		return nil, err
	}
	managed := map[string]pomDep{}
	for _, m := range allManaged {
		if _, ok := managed[m.key()]; !ok {
			managed[m.key()] = m
		}
	}
	var rels []Relationship
	if p := e.parent; p != nil {
		rels = append(rels, Relationship{Target: p.GroupID + ":" + p.ArtifactID, Advice: p.Version, Scope: ScopeRuntime, Kind: "parent"})
	}
	for _, d := range e.deps {
		rels = append(rels, dependencyRel(d, managed, "dependency"))
	}
	pluginVersions := map[string]string{}
	for _, p := range e.managedPlugins {
		if _, ok := pluginVersions[p.key()]; !ok {
			pluginVersions[p.key()] = p.Version
		}
	}
	for _, p := range e.plugins {
		rels = append(rels, Relationship{Target: p.key(), Advice: firstNonEmpty(p.Version, pluginVersions[p.key()]), Scope: ScopeBuildTime, Kind: "plugin"})
		for _, d := range p.Dependencies {
			r := dependencyRel(d, managed, "plugin-dependency")
			if r.Scope == ScopeRuntime {
				r.Scope = ScopeBuildTime // on the plugin's classpath: needed to build, not to run
			}
			rels = append(rels, r)
		}
	}
	for _, m := range allManaged {
		rels = append(rels, Relationship{Target: m.key(), Advice: m.Version, Scope: ScopeExtra, Kind: "managed"})
	}
	return rels, nil
}

// dependencyRel is a dependency's relationship, what it does not say taken from the managed
// dependencies.
func dependencyRel(d pomDep, managed map[string]pomDep, kind string) Relationship {
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
	return Relationship{Target: d.key(), Advice: d.Version, Scope: scope, Kind: kind, Exclusions: ex}
}

func (d pomDep) key() string { return d.GroupID + ":" + d.ArtifactID }
func (p pomPlugin) key() string {
	return firstNonEmpty(p.GroupID, "org.apache.maven.plugins") + ":" + p.ArtifactID
}

// loadEffective reads a POM and its parents (chain holds the POMs below it, to find a cycle) and
// applies inheritance; x is the budget they share (POMs read, interpolation).
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
	if x.poms++; x.poms > maxPOMs {
		return nil, &MetadataError{What: firstNonEmpty(append(chain, id)...), Reason: fmt.Sprintf("more than %d POMs to read with its parents and imports", maxPOMs)}
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
		maps.Copy(e.props, par.props)
		e.props["project.parent.version"] = p.Parent.Version
		e.props["parent.version"] = p.Parent.Version
		p.GroupID = firstNonEmpty(p.GroupID, p.Parent.GroupID)
		p.Version = firstNonEmpty(p.Version, p.Parent.Version)
		e.deps, e.managed, e.imports, e.plugins, e.managedPlugins = par.deps, par.managed, par.imports, par.plugins, par.managedPlugins
	}
	for _, pe := range p.Properties.Entries {
		e.props[pe.XMLName.Local] = strings.TrimSpace(pe.Value)
	}
	e.props["project.groupId"], e.props["project.artifactId"], e.props["project.version"] = p.GroupID, p.ArtifactID, p.Version
	e.props["pom.version"], e.props["version"] = p.Version, p.Version
	// The child's declarations first (they win by order and by key), then the inherited ones.
	e.deps = mergeDeps(p.Dependencies, e.deps)
	var own, imports []pomDep
	for _, m := range p.Managed {
		if strings.TrimSpace(m.Scope) == "import" && strings.TrimSpace(m.Type) == "pom" {
			imports = append(imports, m)
		} else {
			own = append(own, m)
		}
	}
	e.managed = mergeDeps(own, e.managed)
	e.imports = append(imports, e.imports...)
	e.plugins = mergePlugins(p.Plugins, e.plugins)
	e.managedPlugins = mergePlugins(p.ManagedPlugins, e.managedPlugins)
	return e, nil
}

// interpolate expands ${…} in the effective POM's declarations with its properties: an
// inherited declaration takes the child's value of a property, as in Maven.
func (e *effective) interpolate(x *expansion) error {
	rel, _ := pomPath(e.pkg, e.version)
	in := &interpolator{pom: rel, props: e.props, x: x}
	dep := func(d *pomDep) error {
		for _, f := range []*string{&d.GroupID, &d.ArtifactID, &d.Version} {
			var err error
			if *f, err = in.interpolate(*f); err != nil {
				return err
			}
		}
		d.Scope, d.Type = strings.TrimSpace(d.Scope), strings.TrimSpace(d.Type)
		return nil
	}
	for _, l := range [][]pomDep{e.deps, e.managed, e.imports} {
		for i := range l {
			if err := dep(&l[i]); err != nil {
				return err
			}
		}
	}
	for _, l := range [][]pomPlugin{e.plugins, e.managedPlugins} {
		for i := range l {
			for _, f := range []*string{&l[i].GroupID, &l[i].ArtifactID, &l[i].Version} {
				var err error
				if *f, err = in.interpolate(*f); err != nil {
					return err
				}
			}
			for j := range l[i].Dependencies {
				if err := dep(&l[i].Dependencies[j]); err != nil {
					return err
				}
			}
		}
	}
	if p := e.parent; p != nil {
		var err error
		if p.Version, err = in.interpolate(p.Version); err != nil {
			return err
		}
	}
	return nil
}

// importBOMs returns the effective POM's dependency management with its imports applied, in
// Maven's order: what the POM and its parents manage, then each import's (itself a BOM
// resolved the same way) for the packages not managed yet, imports in declaration order.
func (e *effective) importBOMs(ctx context.Context, f *Fetcher, source string, chain []string, x *expansion) ([]pomDep, error) {
	managed := slices.Clone(e.managed)
	for _, imp := range e.imports {
		bom, err := loadEffective(ctx, f, source, imp.key(), imp.Version, chain, x)
		if err != nil {
			return nil, err
		}
		if err := bom.interpolate(x); err != nil {
			return nil, err
		}
		bm, err := bom.importBOMs(ctx, f, source, append(slices.Clone(chain), imp.key()+"@"+imp.Version), x)
		if err != nil {
			return nil, err
		}
		managed = mergeDeps(managed, bm)
	}
	return managed, nil
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

// mergePlugins returns a followed by the plugins of b that a does not declare; a plugin a
// declares keeps b's version when it has none, and b's dependencies it does not declare.
func mergePlugins(a, b []pomPlugin) []pomPlugin {
	inherited := map[string]pomPlugin{}
	for _, p := range b {
		inherited[p.key()] = p
	}
	seen := map[string]bool{}
	var out []pomPlugin
	for _, p := range a {
		if q, ok := inherited[p.key()]; ok {
			p.Version = firstNonEmpty(p.Version, q.Version)
			p.Dependencies = mergeDeps(p.Dependencies, q.Dependencies)
		}
		seen[p.key()] = true
		out = append(out, p)
	}
	for _, p := range b {
		if !seen[p.key()] {
			seen[p.key()] = true
			out = append(out, p)
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
type expansion struct{ work, poms int }

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
