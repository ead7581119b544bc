package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-project/sluice/internal/poll"
)

// documented is one row of the table in docs/metrics.md.
type documented struct {
	name   string
	typ    dto.MetricType
	labels []string
}

// readMetricsDoc returns the metrics docs/metrics.md documents.
func readMetricsDoc(t *testing.T) []documented {
	t.Helper()
	f, err := os.Open("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| (gauge|counter|histogram) \\| ([^|]*)\\|")
	types := map[string]dto.MetricType{"gauge": dto.MetricType_GAUGE, "counter": dto.MetricType_COUNTER, "histogram": dto.MetricType_HISTOGRAM}
	var out []documented
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		d := documented{name: m[1], typ: types[m[2]]}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				d.labels = append(d.labels, l)
			}
		}
		sort.Strings(d.labels)
		out = append(out, d)
	}
	if len(out) < 10 {
		t.Fatalf("docs/metrics.md documents %d metrics; the table did not parse", len(out))
	}
	return out
}

// scrape gets /metrics and parses it with the Prometheus text parser.
func (b *bundle) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	code, data := b.do(t, "GET", "/metrics", b.reader, "", nil)
	if code != 200 {
		t.Fatalf("GET /metrics = %d %s", code, data)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, data)
	}
	return mfs
}

// value returns the value of the family's sample whose labels include want (a histogram's
// sample count), and whether there is one.
func value(mf *dto.MetricFamily, want map[string]string) (float64, bool) {
next:
	for _, m := range mf.GetMetric() {
		for k, v := range want {
			if !slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool { return lp.GetName() == k && lp.GetValue() == v }) {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsDocumented scrapes /metrics with the Prometheus text parser while a job runs: every
// metric docs/metrics.md documents is served with its type and labels, every sluice_ metric
// served is documented, and the figures are those of the job (tasks by state, progress, queue
// depth, attempts observed by the worker, requests counted).
func TestMetricsDocumented(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	// A step for a remote worker nobody runs: its tasks stay ready, in the queue.
	b.json(t, "POST", "/v1/workflows", "name: queued\nsteps:\n  conv: {action: remote, needs: [start], with: {name: Nobody}}\n", 201, nil)
	for wf, names := range map[string][]string{"docs": {"a.txt", "b.txt"}, "queued": {"c.txt"}} {
		b.upload(t, wf, names...)
	}
	var mfs map[string]*dto.MetricFamily
	poll.Until(t, 20*time.Second, "both doc tasks counted complete and observed", func() (bool, string) {
		mfs = b.scrape(t)
		done, _ := value(mfs["sluice_tasks"], map[string]string{"state": "complete", "action": "doc"})
		observed, _ := value(mfs["sluice_task_duration_seconds"], map[string]string{"action": "doc", "outcome": "succeeded"})
		return done == 2 && observed == 2, fmt.Sprintf("complete %v, observed %v", done, observed)
	})
	for _, d := range readMetricsDoc(t) {
		mf := mfs[d.name]
		if mf == nil {
			t.Errorf("documented metric %s is not served", d.name)
			continue
		}
		if mf.GetType() != d.typ {
			t.Errorf("%s is a %v, documented as a %v", d.name, mf.GetType(), d.typ)
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName())
			}
			sort.Strings(labels)
			if !slices.Equal(labels, d.labels) {
				t.Errorf("%s has labels %v, documented %v", d.name, labels, d.labels)
				break
			}
		}
	}
	docs := map[string]bool{}
	for _, d := range readMetricsDoc(t) {
		docs[d.name] = true
	}
	for name := range mfs {
		if strings.HasPrefix(name, "sluice_") && !docs[name] {
			t.Errorf("%s is served but not in docs/metrics.md", name)
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sluice_jobs_running", nil, 2},
		{"sluice_task_queue_wait_seconds", map[string]string{"action": "doc"}, 2},
		{"sluice_http_requests_total", map[string]string{"route": "POST /v1/jobs", "status": "201"}, 2},
		{"sluice_http_request_duration_seconds", map[string]string{"route": "POST /v1/jobs"}, 2},
		{"sluice_maintenance_leader", nil, 0},
		{"sluice_remote_tasks", nil, 0},
	} {
		if got, ok := value(mfs[c.name], c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	var depth float64
	for _, m := range mfs["sluice_queue_depth"].GetMetric() {
		depth += m.GetGauge().GetValue()
	}
	if depth != 1 {
		t.Errorf("sluice_queue_depth sums to %v, want 1 (the remote task nobody takes): %v", depth, mfs["sluice_queue_depth"])
	}
	if n, ok := value(mfs["sluice_job_progress"], map[string]string{"workflow": "docs"}); !ok || n <= 0 || n >= 1 {
		t.Errorf("sluice_job_progress of the docs job = %v (present %v), want between 0 and 1 (waiting for approval)", n, ok)
	}
	b.leader.Store(true)
	if got, _ := value(b.scrape(t)["sluice_maintenance_leader"], nil); got != 1 {
		t.Errorf("sluice_maintenance_leader of the leader = %v, want 1", got)
	}
}

// TestDashboardUsesDocumentedMetrics: the Grafana dashboard in docs/ is valid JSON whose queries
// name only documented sluice_ metrics (a histogram by its _bucket, _count or _sum series), and
// every documented sluice_ metric is on it.
func TestDashboardUsesDocumentedMetrics(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(src, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	docs := map[string]documented{}
	for _, d := range readMetricsDoc(t) {
		docs[d.name] = d
	}
	used := map[string]bool{}
	name := regexp.MustCompile(`\bsluice_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := n
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(n, suffix); ok && docs[b].typ == dto.MetricType_HISTOGRAM {
						base = b
					}
				}
				if _, ok := docs[base]; !ok {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not document", p.Title, n)
				}
				used[base] = true
			}
		}
	}
	for n := range docs {
		if strings.HasPrefix(n, "sluice_") && !used[n] {
			t.Errorf("documented metric %s is on no panel of the dashboard", n)
		}
	}
}
