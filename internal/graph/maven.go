package graph

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"regexp"
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
	e, err := loadEffective(ctx, f, source, pkg, version, nil)
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

// loadEffective reads a POM and its parents (chain holds the POMs below it, to find a cycle).
func loadEffective(ctx context.Context, f *Fetcher, source, pkg, version string, chain []string) (*effective, error) {
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
		par, err := loadEffective(ctx, f, source, p.Parent.GroupID+":"+p.Parent.ArtifactID, p.Parent.Version, chain)
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
	interp := func(d pomDep) pomDep {
		d.GroupID, d.ArtifactID = interpolate(d.GroupID, e.props), interpolate(d.ArtifactID, e.props)
		d.Version, d.Scope = interpolate(d.Version, e.props), strings.TrimSpace(d.Scope)
		return d
	}
	// The child's declarations first (they win by order and by key), then the inherited ones.
	e.deps = mergeDeps(mapDeps(p.Dependencies, interp), e.deps)
	var managed []pomDep
	for _, m := range mapDeps(p.Managed, interp) {
		if m.Scope == "import" && (m.Type == "pom") {
			bom, err := loadEffective(ctx, f, source, m.key(), m.Version, chain)
			if err != nil {
				return nil, err
			}
			managed = mergeDeps(managed, bom.managed)
			continue
		}
		managed = mergeDeps(managed, []pomDep{m})
	}
	e.managed = mergeDeps(managed, e.managed)
	e.plugins = mapDeps(p.Plugins, interp)
	return e, nil
}

func mapDeps(ds []pomDep, fn func(pomDep) pomDep) []pomDep {
	out := make([]pomDep, len(ds))
	for i, d := range ds {
		out[i] = fn(d)
	}
	return out
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

var placeholder = regexp.MustCompile(`\$\{([^}]+)\}`)

// interpolate replaces ${name} with the property's value (unknown ones are kept as written).
func interpolate(s string, props map[string]string) string {
	s = strings.TrimSpace(s)
	for range 8 { // properties may refer to properties; a loop of them stops here
		out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := props[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		if out == s {
			break
		}
		s = out
	}
	return s
}
