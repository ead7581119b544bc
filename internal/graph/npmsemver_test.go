package graph

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNpmRanges: node-semver's documented desugarings and prerelease rule, in loose mode.
func TestNpmRanges(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rng     string
		in, out []string
	}{
		{"^1.2.3", []string{"1.2.3", "1.9.0"}, []string{"2.0.0", "1.2.2", "2.0.0-0", "1.3.0-beta"}},
		{"^0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.3.0"}},
		{"^0.0.3", []string{"0.0.3"}, []string{"0.0.4"}},
		{"^0.x", []string{"0.0.1", "0.9.9"}, []string{"1.0.0"}},
		{"^0.0.x", []string{"0.0.9"}, []string{"0.1.0"}},
		{"^1.2.3-beta.2", []string{"1.2.3-beta.2", "1.2.3-beta.4", "1.2.3", "1.5.0"}, []string{"1.2.4-beta.2", "1.2.3-beta.1"}},
		{"~1.2.3", []string{"1.2.3", "1.2.9"}, []string{"1.3.0"}},
		{"~1.2", []string{"1.2.0", "1.2.9"}, []string{"1.3.0"}},
		{"~1", []string{"1.0.0", "1.9.9"}, []string{"2.0.0"}},
		{"~0.2.3", []string{"0.2.5"}, []string{"0.3.0"}},
		{"1.x", []string{"1.0.0", "1.99.0"}, []string{"2.0.0", "0.9.0"}},
		{"1.2.*", []string{"1.2.0", "1.2.9"}, []string{"1.3.0"}},
		{"*", []string{"0.0.0", "9.9.9"}, []string{"1.0.0-beta"}},
		{"", []string{"1.0.0"}, []string{"1.0.0-beta"}},
		{"1.2.3 - 2.3.4", []string{"1.2.3", "2.3.4"}, []string{"2.3.5", "1.2.2"}},
		{"1.2 - 2.3.4", []string{"1.2.0"}, []string{"1.1.9"}},
		{"1.2.3 - 2.3", []string{"2.3.9"}, []string{"2.4.0"}},
		{"1.2.3 - 2", []string{"2.9.9"}, []string{"3.0.0"}},
		{">=1.2.7 <1.3.0", []string{"1.2.7", "1.2.99"}, []string{"1.3.0", "1.2.6"}},
		{">= 1.2.7", []string{"1.2.7"}, []string{"1.2.6"}},
		{"1.2.7 || >=1.2.9 <2.0.0", []string{"1.2.7", "1.2.9", "1.4.6"}, []string{"1.2.8", "2.0.0"}},
		{">1.2", []string{"1.3.0"}, []string{"1.2.9"}},
		{"<=1.2", []string{"1.2.9"}, []string{"1.3.0"}},
		{"<1.2", []string{"1.1.9"}, []string{"1.2.0", "1.2.0-beta"}},
		{"=1.2.3", []string{"1.2.3", "v1.2.3"}, []string{"1.2.4"}},
		{">1.2.3-alpha.3", []string{"1.2.3-alpha.7", "3.4.5"}, []string{"3.4.5-alpha.9", "1.2.3-alpha.3"}},
		{"1.2", []string{"1.2.0", "1.2.5"}, []string{"1.3.0"}},
	} {
		r, err := parseNpmRange(tt.rng)
		if err != nil {
			t.Errorf("%q: %v", tt.rng, err)
			continue
		}
		for _, v := range tt.in {
			sv, ok := parseSemver(v)
			if !ok || !r.satisfies(sv) {
				t.Errorf("%q does not hold %s", tt.rng, v)
			}
		}
		for _, v := range tt.out {
			sv, ok := parseSemver(v)
			if !ok {
				t.Fatalf("version %q does not parse", v)
			}
			if r.satisfies(sv) {
				t.Errorf("%q holds %s", tt.rng, v)
			}
		}
	}
	for _, bad := range []string{"git+https://x/y.git", "file:../x", "npm:other@1", "1.2.3.4", ">=a"} {
		if _, err := parseNpmRange(bad); err == nil {
			t.Errorf("%q parsed as a range", bad)
		}
	}
}

// TestPickManifest: npm-pick-manifest's choices — latest when the range holds it (below a higher
// version that also matches), else the highest, deprecated versions last; dist-tags; a spec npm
// would fetch another way is refused, naming it.
func TestPickManifest(t *testing.T) {
	t.Parallel()
	p := &packument{DistTags: map[string]string{"latest": "1.2.0", "next": "2.0.0-rc.1"}, Versions: map[string]json.RawMessage{
		"1.0.0": []byte(`{}`), "1.2.0": []byte(`{}`), "1.3.0": []byte(`{}`), "1.4.0": []byte(`{"deprecated":"no"}`),
		"2.0.0-rc.1": []byte(`{}`), "0.9.0": []byte(`{}`)}}
	for spec, want := range map[string]string{"^1.0.0": "1.2.0", "*": "1.2.0", "": "1.2.0", ">=1.3.0 <2": "1.3.0", "~1.4.0": "1.4.0",
		"next": "2.0.0-rc.1", "latest": "1.2.0", "^0.9.0": "0.9.0", "^2.0.0-rc.0": "2.0.0-rc.1"} {
		got, err := pickManifest(p, spec)
		if err != nil || got != want {
			t.Errorf("pick %q = %q, %v; want %s", spec, got, err, want)
		}
	}
	for spec, msg := range map[string]string{"^3.0.0": "no version satisfies", "beta": `no dist-tag "beta"`, "git+https://x/y.git": "not a range nor a dist-tag"} {
		if _, err := pickManifest(p, spec); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("pick %q: %v, want %q", spec, err, msg)
		}
	}
}
