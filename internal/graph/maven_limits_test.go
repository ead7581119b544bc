package graph_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/graph"
)

// laughs returns a POM whose properties expand to levels+1 levels of 1000 copies each
// (p0 holds 1000 × ${p1}, …): 15 KB that a naive interpolation turns into gigabytes.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("<properties>")
	for i := range levels {
		fmt.Fprintf(&b, "<p%d>%s</p%d>", i, strings.Repeat(fmt.Sprintf("${p%d}", i+1), 1000), i)
	}
	fmt.Fprintf(&b, "<p%d>lol</p%d>", levels, levels)
	b.WriteString("</properties>")
	b.WriteString(deps("l:dep:${p0}"))
	return b.String()
}

// TestMavenPropertyBounds checks that interpolation stops at its bounds with a per-file error
// naming the POM and the bound — the 15 KB "billion laughs" POM among them — and that the
// expansion stopped: the heap grew by far less than the value would take.
func TestMavenPropertyBounds(t *testing.T) {
	t.Parallel()
	chain := func(n int) string { // p0 → p1 → … → pn, each one reference
		var b strings.Builder
		b.WriteString("<properties>")
		for i := range n {
			fmt.Fprintf(&b, "<p%d>${p%d}</p%d>", i, i+1, i)
		}
		fmt.Fprintf(&b, "<p%d>1.0</p%d></properties>", n, n)
		return b.String() + deps("l:dep:${p0}")
	}
	many := "<properties><v>" + strings.Repeat("x", 60<<10) + "</v></properties>" + deps(strings.Split(strings.Repeat("l:d:${v},", 200), ",")[:200]...)
	dir := t.TempDir()
	writeRepo(t, dir, repo{
		"l:laughs:1":  laughs(3),
		"l:chain:1":   chain(40),
		"l:short:1":   chain(10),
		"l:many:1":    many,
		"l:cycle:1":   "<properties><a>${b}</a><b>${a}</b></properties>" + deps("l:dep:${a}"),
		"l:unknown:1": deps("l:dep:${nope}"),
	})
	f := graph.NewFetcher(graph.FetcherConfig{})
	for _, tc := range []struct {
		name, pkg, want, version string
	}{
		{name: "billion-laughs", pkg: "l:laughs", want: "l/laughs/1/laughs-1.pom: property p1 expands to more than 64 KiB (the limit for one value)"},
		{name: "deep", pkg: "l:chain", want: "l/chain/1/chain-1.pom: properties refer to properties more than 32 deep (p0, p1, p2"},
		{name: "total", pkg: "l:many", want: "l/many/1/many-1.pom: properties expand to more than 4 MiB in all"},
		{name: "shallow-chain", pkg: "l:short", version: "1.0"},
		{name: "cycle-kept-as-written", pkg: "l:cycle", version: "${a}"},
		{name: "unknown-kept-as-written", pkg: "l:unknown", version: "${nope}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rels, err := graph.Maven{}.Resolve(t.Context(), f, dir, tc.pkg, "1")
			runtime.ReadMemStats(&after)
			if tc.want == "" {
				if err != nil || len(rels) == 0 || rels[0].Advice != tc.version {
					t.Fatalf("Resolve: %+v, %v; want version %q", rels, err, tc.version)
				}
				return
			}
			var me *graph.MetadataError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Resolve: %v; want a metadata error with %q", err, tc.want)
			}
			// The laughs' p0 is 3 GB expanded; stopping at the bound allocates a few MiB.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<30 {
				t.Errorf("interpolation allocated %d MiB before it stopped", grew>>20)
			}
		})
	}
}

// TestMavenLaughsPOMSize keeps the reproduction's size honest: the POM is about 15 KB.
func TestMavenLaughsPOMSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRepo(t, dir, repo{"l:laughs:1": laughs(3)})
	st, err := os.Stat(filepath.Join(dir, "l/laughs/1/laughs-1.pom"))
	if err != nil || st.Size() < 14<<10 || st.Size() > 20<<10 {
		t.Fatalf("laughs POM: %v, %v bytes; want about 15 KB", err, st)
	}
}
