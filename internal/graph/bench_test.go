package graph_test

import (
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// BenchmarkGoModGraph traverses a synthetic graph of SLUICE_GRAPH_BENCH_MODULES modules (default
// 5,000; 300 under -short) from a file:// proxy, twice (the second request fully AVOIDED), and
// times `go mod graph` on the same proxy (a cold module cache) in the same run: it reports the
// seconds of each and the ratios to go. SLUICE_GRAPH_BENCH_PROXY keeps the proxy in that
// directory, for timing `sluice graph` on it by hand. One iteration is meaningful
// (-benchtime=1x); SQLite only.
func BenchmarkGoModGraph(b *testing.B) {
	n := 5000
	if testing.Short() {
		n = 300
	}
	if s := os.Getenv("SLUICE_GRAPH_BENCH_MODULES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	g, roots := randomGraph(5000, n)
	dir := os.Getenv("SLUICE_GRAPH_BENCH_PROXY")
	if dir == "" {
		dir = b.TempDir()
	}
	writeProxy(b, dir, g)
	for b.Loop() {
		start := time.Now()
		goTool(b, dir, roots)("mod", "graph")
		goSec := time.Since(start).Seconds()

		k := startKit(b, enginetest.Open(drivertest.OpenSQLite), 8, graph.Config{})
		start = time.Now()
		first := k.result(b, k.startRequest(b, graph.Request{Source: "file://" + dir, Roots: roots}), time.Hour)
		firstSec := time.Since(start).Seconds()
		start = time.Now()
		second := k.result(b, k.startRequest(b, graph.Request{Source: "file://" + dir, Roots: roots}), time.Hour)
		secondSec := time.Since(start).Seconds()
		if len(first.Errors) > 0 || second.Counts.Resolved != 0 || !reflect.DeepEqual(first.Nodes, second.Nodes) {
			b.Fatalf("first request's errors %v; second request: %+v, want every resolve AVOIDED and the same nodes", head(first.Errors), second.Counts)
		}
		b.ReportMetric(float64(len(first.Nodes)), "modules")
		b.ReportMetric(float64(first.Counts.Items), "work_items")
		b.ReportMetric(goSec, "go_mod_graph_s")
		b.ReportMetric(firstSec, "sluice_s")
		b.ReportMetric(secondSec, "sluice_avoided_s")
		b.ReportMetric(firstSec/goSec, "ratio_to_go")
		b.ReportMetric(secondSec/goSec, "avoided_ratio_to_go")
	}
}
