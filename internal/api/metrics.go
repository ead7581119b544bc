package api

import (
	"fmt"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-project/sluice/internal/metric"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/scale"
)

// metrics is the API's side of /metrics: the process's collectors (package metric: HTTP
// requests, task attempts, lease renewals, Go and process) and, per scrape, the figures derived
// from the database.
type metrics struct {
	set *metric.Set
}

// newMetrics returns the API's metrics over set, or over a set of its own when set is nil.
func newMetrics(set *metric.Set) *metrics {
	if set == nil {
		set = metric.New()
	}
	return &metrics{set: set}
}

func (m *metrics) instrument(name string, h http.Handler) http.Handler {
	return m.set.Instrument(name, h)
}

// scraped are the task states counted in sluice_tasks and sluice_task_retries.
var scraped = []record.TaskState{record.TaskReady, record.TaskRunning, record.TaskFailed, record.TaskComplete}

// serveMetrics serves the Prometheus exposition (text, or what the scraper negotiates). The
// database figures are read first, under the request's context, into a registry of this scrape
// only: a failed read is an error answered as any other, not half a scrape.
func (a *API) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	scrape, err := a.scrapeStore(r)
	if err != nil {
		return err
	}
	gs := prometheus.Gatherers{a.metrics.set.Registry, scrape}
	if a.cfg.MoreMetrics != nil {
		more, err := a.moreMetrics(r)
		if err != nil {
			return err
		}
		gs = append(gs, more)
	}
	h := promhttp.HandlerFor(gs, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	h.ServeHTTP(w, r)
	return nil
}

// moreMetrics gathers what MoreMetrics writes in the text format (the outbox's figures).
func (a *API) moreMetrics(r *http.Request) (prometheus.Gatherer, error) {
	var b strings.Builder
	if err := a.cfg.MoreMetrics(r.Context(), &b); err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		out = append(out, f)
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return out, nil }), nil
}

// scrapeStore returns a registry holding the figures of running jobs read from the database, and
// those of this process's remote workers and maintenance leadership.
func (a *API) scrapeStore(r *http.Request) (*prometheus.Registry, error) {
	ctx := r.Context()
	reg := prometheus.NewRegistry()
	progress := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_job_progress", Help: "Fraction of a running job's work done."},
		[]string{"job_id", "workflow"})
	running := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_jobs_running", Help: "Jobs in the running state."})
	tasks := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_tasks", Help: "Tasks of running jobs by state and action."},
		[]string{"state", "action"})
	queues := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_queue_depth", Help: "Ready tasks of running jobs by queue."},
		[]string{"queue"})
	retries := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_task_retries", Help: "Attempts beyond the first of running jobs' tasks."})
	reg.MustRegister(progress, running, tasks, queues, retries)

	jobs, err := a.rec.JobListRunning(ctx)
	if err != nil {
		return nil, err
	}
	running.Set(float64(len(jobs)))
	for _, j := range jobs {
		// One aggregate of the job's tasks (in Progress), whatever its size.
		p, err := a.b.Engine().Progress(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		progress.WithLabelValues(strconv.FormatInt(j.ID, 10), j.WorkflowName).Set(p.Fraction)
		for _, c := range p.Counts {
			if !slices.Contains(scraped, c.State) {
				continue
			}
			tasks.WithLabelValues(string(c.State), c.Action).Add(float64(c.Tasks))
			if c.State == record.TaskReady {
				queues.WithLabelValues(c.Queue).Add(float64(c.Tasks))
			}
			retries.Add(float64(c.Retries))
		}
	}
	if err := scrapeQueues(r, a.rec, reg); err != nil {
		return nil, err
	}
	if a.cfg.Workers != nil {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_remote_tasks", Help: "Tasks handed out to remote workers."})
		g.Set(float64(a.cfg.Workers.Sessions()))
		reg.MustRegister(g)
	}
	if a.cfg.Leader != nil {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_maintenance_leader",
			Help: "1 when this process leads maintenance (lease reaping, blob collection)."})
		if a.cfg.Leader() {
			g.Set(1)
		}
		reg.MustRegister(g)
	}
	return reg, nil
}

// scrapeQueues registers the scaling signal of package scale (GET /v1/queues) on reg, per
// queue and action: sluice_queue_backlog, sluice_queue_oldest_age_seconds, sluice_queue_running,
// sluice_queue_throughput and sluice_queue_recommended_workers, the metric a Kubernetes
// autoscaler scales on (docs/scale-out.md).
func scrapeQueues(r *http.Request, rec Records, reg *prometheus.Registry) error {
	qs, err := scale.Read(r.Context(), rec, time.Now().UTC())
	if err != nil {
		return err
	}
	labels := []string{"queue", "action"}
	backlog := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_queue_backlog", Help: "Ready tasks due now, by queue and action."}, labels)
	age := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_queue_oldest_age_seconds", Help: "How long the longest waiting ready task has waited."}, labels)
	running := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_queue_running", Help: "Tasks running, by queue and action."}, labels)
	through := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_queue_throughput", Help: "Tasks completed in the last minute, by queue and action."}, labels)
	rec2 := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_queue_recommended_workers", Help: "Workers that would clear the backlog within a minute at the last minute's throughput (docs/scale-out.md)."}, labels)
	reg.MustRegister(backlog, age, running, through, rec2)
	for _, q := range qs {
		backlog.WithLabelValues(q.Queue, q.Action).Set(float64(q.Backlog))
		age.WithLabelValues(q.Queue, q.Action).Set(q.OldestAgeSeconds)
		running.WithLabelValues(q.Queue, q.Action).Set(float64(q.Running))
		through.WithLabelValues(q.Queue, q.Action).Set(float64(q.Throughput))
		rec2.WithLabelValues(q.Queue, q.Action).Set(float64(q.RecommendedWorkers))
	}
	return nil
}
