package when

import (
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	t.Parallel()
	it := Item{Name: "a.txt", Metadata: map[string]any{"package": "left-pad", "version": 1.0, "n": 2.5, "ok": true}}
	for _, tc := range []struct {
		name, src, want, err string
	}{
		{name: "parts", src: "{{metadata.package}}@{{metadata.version}}", want: "left-pad@1"},
		{name: "spaces", src: "k:{{ metadata[\"package\"] }}/{{name}}", want: "k:left-pad/a.txt"},
		{name: "types", src: "{{metadata.n}}-{{metadata.ok}}-{{depth}}", want: "2.5-true-0"},
		{name: "literal", src: "everyone", want: "everyone"},
		{name: "missing", src: "{{metadata.nope}}", err: "is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm, err := ParseTemplate(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tm.Render(it)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Render = %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Render = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "{{", "a}}b", "{{ }}", "{{metadata}}", "{{nope}}", "{{metadata.a ==}}", "{{[1]}}"} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("ParseTemplate(%q) succeeded", bad)
		}
	}
}
