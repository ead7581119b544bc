package graph

import (
	"strings"
	"testing"
)

// TestMavenVersionOrder: versions in ascending order as Maven 3.8's ComparableVersion sorts them
// (its documented examples), and equal spellings.
func TestMavenVersionOrder(t *testing.T) {
	t.Parallel()
	asc := []string{"1-alpha-1", "1-alpha2", "1-beta-1", "1-milestone-1", "1-rc-1", "1-SNAPSHOT", "1", "1-sp1", "1-abc", "1.0.1", "1.1", "1.9", "1.10", "2.0-beta-1", "2.0", "10"}
	for i := 0; i+1 < len(asc); i++ {
		if c := compareMavenVersions(asc[i], asc[i+1]); c >= 0 {
			t.Errorf("compare(%s, %s) = %d, want < 0", asc[i], asc[i+1], c)
		}
		if c := compareMavenVersions(asc[i+1], asc[i]); c <= 0 {
			t.Errorf("compare(%s, %s) = %d, want > 0", asc[i+1], asc[i], c)
		}
	}
	for _, eq := range [][2]string{{"1", "1.0.0"}, {"1.0", "1-ga"}, {"1-final", "1"}, {"1-cr1", "1-rc1"}, {"1a1", "1-alpha-1"}, {"1.0-RELEASE", "1"}} {
		if c := compareMavenVersions(eq[0], eq[1]); c != 0 {
			t.Errorf("compare(%s, %s) = %d, want 0", eq[0], eq[1], c)
		}
	}
}

func TestMavenRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		spec     string
		in, out  []string
		errMatch string
	}{
		{spec: "[1.0,2.0)", in: []string{"1.0", "1.5", "2.0-beta-1"}, out: []string{"0.9", "2.0", "2.1"}},
		{spec: "[1.0]", in: []string{"1.0", "1"}, out: []string{"1.0.1"}},
		{spec: "(,1.0],[1.2,)", in: []string{"0.1", "1.0", "1.2", "9"}, out: []string{"1.1"}},
		{spec: "(1.0,)", in: []string{"1.0.1"}, out: []string{"1.0"}},
		{spec: "[2.0,1.0]", errMatch: "above upper bound"},
		{spec: "[1.0", errMatch: "not closed"},
		{spec: "(1.0)", errMatch: "single version"},
		{spec: "[1,2,3]", errMatch: "more than two bounds"},
	} {
		r, err := parseMavenRange(tt.spec)
		if tt.errMatch != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errMatch) {
				t.Errorf("%s: error %v, want %q", tt.spec, err, tt.errMatch)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.spec, err)
			continue
		}
		for _, v := range tt.in {
			if !r.contains(v) {
				t.Errorf("%s does not hold %s", tt.spec, v)
			}
		}
		for _, v := range tt.out {
			if r.contains(v) {
				t.Errorf("%s holds %s", tt.spec, v)
			}
		}
	}
}

func TestMavenRootSpelling(t *testing.T) {
	t.Parallel()
	r := Request{Type: "maven", Source: "/x", Roots: []string{"org.example:app:1.0", "org.example:lib@2.0"}}
	if err := r.Normalize(); err != nil {
		t.Fatal(err)
	}
	if r.Roots[0] != "org.example:app@1.0" || r.Roots[1] != "org.example:lib@2.0" {
		t.Errorf("roots %q", r.Roots)
	}
	bad := Request{Type: "maven", Source: "/x", Roots: []string{"org.example:app"}}
	if err := bad.Normalize(); err == nil || !strings.Contains(err.Error(), "want groupId:artifactId:version") {
		t.Errorf("error %v, want one naming the spelling", err)
	}
}
