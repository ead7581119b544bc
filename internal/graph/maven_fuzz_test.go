package graph

import (
	"errors"
	"strings"
	"testing"
)

// propsOf reads "name=value" lines into properties.
func propsOf(s string) map[string]string {
	props := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			props[k] = v
		}
	}
	return props
}

// TestInterpolateStops checks that the "billion laughs" stops within its bounds: what was
// substituted before the error is a few times the per-value bound, not the gigabytes the
// value would take.
func TestInterpolateStops(t *testing.T) {
	t.Parallel()
	props := map[string]string{"p3": "lol"}
	for _, p := range [][2]string{{"p0", "${p1}"}, {"p1", "${p2}"}, {"p2", "${p3}"}} {
		props[p[0]] = strings.Repeat(p[1], 1000)
	}
	in := &interpolator{pom: "x.pom", props: props, x: &expansion{}}
	_, err := in.interpolate("${p0}")
	var me *MetadataError
	if !errors.As(err, &me) || me.What != "x.pom" || !strings.Contains(me.Reason, "more than 64 KiB") {
		t.Fatalf("interpolate: %v; want the per-value bound", err)
	}
	if in.x.work > 2*maxPropertyValue {
		t.Errorf("%d bytes substituted before stopping; want at most %d", in.x.work, 2*maxPropertyValue)
	}
}

// FuzzMavenInterpolate: any properties and field expand within the bounds or fail with a
// metadata error naming the POM; text without a reference is left as it is.
func FuzzMavenInterpolate(f *testing.F) {
	f.Add("a=${b}\nb=1.0", "${a}")
	f.Add("a=${a}", "x${a}y")
	f.Add("a=${b}${b}${b}${b}\nb=${c}${c}${c}${c}\nc=${d}${d}${d}${d}\nd=xxxxxxxxxxxxxxxx", "${a}${a}")
	f.Add("a=${", "${a}}${}${")
	f.Add("", "plain 1.0")
	f.Fuzz(func(t *testing.T, props, field string) {
		in := &interpolator{pom: "f.pom", props: propsOf(props), x: &expansion{}}
		out, err := in.interpolate(field)
		if err != nil {
			var me *MetadataError
			if !errors.As(err, &me) || me.What != "f.pom" {
				t.Fatalf("error %v is not a metadata error naming the POM", err)
			}
			return
		}
		if len(out) > maxPropertyValue {
			t.Fatalf("value of %d bytes", len(out))
		}
		if in.x.work > maxExpansion {
			t.Fatalf("%d bytes substituted", in.x.work)
		}
		if !strings.Contains(field, "${") && out != strings.TrimSpace(field) {
			t.Fatalf("%q became %q", field, out)
		}
	})
}
