package graph

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// Relationship is one declared relationship of a package version (a `require` line, a POM
// dependency or parent): it points at a package, not a version, with the version advice the
// declaration gives, so each request's selection chooses the version.
type Relationship struct {
	Target string `json:"target"`
	Advice string `json:"advice"`
	// Scope is RUNTIME, BUILD_TIME or EXTRA (stored, never followed).
	Scope string `json:"scope"`
	// Kind is the declaration: require (gomod); dependency, parent, managed (maven).
	Kind string `json:"kind"`
	// Exclusions are packages this relationship's subtree leaves out (maven).
	Exclusions []string `json:"exclusions,omitempty"`
}

// PackageType is what the graph knows of one kind of package: how a request selects a version
// and how a version's relationships are resolved from its metadata. Implementations are safe for
// concurrent use.
type PackageType interface {
	// Name is the type's name, as requests and work items give it ("gomod").
	Name() string
	// SelectKey is the key select-sync claims within a request for a work item targeting pkg with
	// the version advice: the package version for a type whose versions coexist in a selection
	// decided at the end (gomod's MVS), the package for one that selects once (maven).
	SelectKey(pkg, advice string) string
	// Select chooses the package and version a work item traverses, from the request's overrides
	// and the advice (a range read against the request's source through f). An error wrapping
	// ErrMissing or a *MetadataError is the node's FAILED.
	Select(ctx context.Context, f *Fetcher, r *Request, pkg, advice string) (string, string, error)
	// Resolve fetches a version's metadata from the request's source and returns its
	// relationships in declaration order. An error wrapping [ErrMissing] is FAILED (no
	// metadata), a [*MetadataError] is ERROR (metadata unusable); any other error is transient.
	Resolve(ctx context.Context, f *Fetcher, source, pkg, version string) ([]Relationship, error)
}

// ErrMissing is returned (wrapped) when a package version's metadata does not exist at the source.
var ErrMissing = errors.New("metadata missing")

// MetadataError is metadata that exists but cannot be used: it does not parse, is too large, or
// is cyclic. It is permanent: the same bytes give the same error.
type MetadataError struct {
	What   string // the file or package version
	Reason string
}

func (e *MetadataError) Error() string { return e.What + ": " + e.Reason }

// Types is a registry of package types by name. The zero value is empty; Add is not safe to call
// concurrently with lookups (a registry is built at wiring time).
type Types struct {
	m map[string]PackageType
}

// Add registers package types. It panics on a duplicate name: a wiring mistake.
func (ts *Types) Add(types ...PackageType) {
	if ts.m == nil {
		ts.m = map[string]PackageType{}
	}
	for _, t := range types {
		if _, dup := ts.m[t.Name()]; dup {
			panic(fmt.Sprintf("graph: package type %q registered twice", t.Name()))
		}
		ts.m[t.Name()] = t
	}
}

// Lookup returns the package type called name.
func (ts *Types) Lookup(name string) (PackageType, bool) {
	t, ok := ts.m[name]
	return t, ok
}

// Names lists the registered types, sorted.
func (ts *Types) Names() []string {
	var out []string
	for n := range ts.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
