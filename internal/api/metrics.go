package api

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// durationBuckets are the upper bounds (seconds) of the request duration histogram.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics counts HTTP requests by route and status and observes their durations. Everything else
// on /metrics is derived from the database when scraped.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64  // route, status → count
	hist     map[string]*histogram // route → durations
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]uint64{}, hist: map[string]*histogram{}}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(c int) {
	if s.status == 0 {
		s.status = c
	}
	s.ResponseWriter.WriteHeader(c)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (m *metrics) instrument(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		d := time.Since(start).Seconds()
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.requests[[2]string{name, fmt.Sprint(sw.status)}]++
		hs := m.hist[name]
		if hs == nil {
			hs = &histogram{counts: make([]uint64, len(durationBuckets))}
			m.hist[name] = hs
		}
		for i, b := range durationBuckets {
			if d <= b {
				hs.counts[i]++
				break
			}
		}
		hs.sum += d
		hs.n++
	})
}

func escLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// scraped are the task states counted in sluice_tasks and sluice_task_retries.
var scraped = []string{store.TaskReady, store.TaskRunning, store.TaskFailed, store.TaskComplete}

// serveMetrics writes the Prometheus text format (version 0.0.4) by hand.
func (a *API) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	st := a.b.Engine().Store()
	jobs, err := st.JobListRunning(ctx)
	if err != nil {
		return err
	}
	type key struct{ state, action string }
	tasks := map[key]int{}
	queues := map[string]int{}
	retries := 0
	var b strings.Builder
	b.WriteString("# HELP sluice_job_progress Fraction of a running job's work done.\n# TYPE sluice_job_progress gauge\n")
	for _, j := range jobs {
		// One aggregate of the job's tasks (in Progress), whatever its size.
		p, err := a.b.Engine().Progress(ctx, j.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "sluice_job_progress{job_id=\"%d\",workflow=\"%s\"} %g\n", j.ID, escLabel(j.WorkflowName), p.Fraction)
		for _, c := range p.Counts {
			if !slices.Contains(scraped, c.State) {
				continue
			}
			tasks[key{c.State, c.Action}] += c.Tasks
			if c.State == store.TaskReady {
				queues[c.Queue] += c.Tasks
			}
			retries += c.Retries
		}
	}
	fmt.Fprintf(&b, "# HELP sluice_jobs_running Jobs in the running state.\n# TYPE sluice_jobs_running gauge\nsluice_jobs_running %d\n", len(jobs))
	b.WriteString("# HELP sluice_tasks Tasks of running jobs by state and action.\n# TYPE sluice_tasks gauge\n")
	keys := make([]key, 0, len(tasks))
	for k := range tasks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].state != keys[j].state {
			return keys[i].state < keys[j].state
		}
		return keys[i].action < keys[j].action
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "sluice_tasks{state=\"%s\",action=\"%s\"} %d\n", escLabel(k.state), escLabel(k.action), tasks[k])
	}
	b.WriteString("# HELP sluice_queue_depth Ready tasks of running jobs by queue.\n# TYPE sluice_queue_depth gauge\n")
	qs := make([]string, 0, len(queues))
	for q := range queues {
		qs = append(qs, q)
	}
	sort.Strings(qs)
	for _, q := range qs {
		fmt.Fprintf(&b, "sluice_queue_depth{queue=\"%s\"} %d\n", escLabel(q), queues[q])
	}
	fmt.Fprintf(&b, "# HELP sluice_task_retries Attempts beyond the first of running jobs' tasks.\n# TYPE sluice_task_retries gauge\nsluice_task_retries %d\n", retries)
	if a.cfg.Workers != nil {
		fmt.Fprintf(&b, "# HELP sluice_remote_tasks Tasks handed out to remote workers.\n# TYPE sluice_remote_tasks gauge\nsluice_remote_tasks %d\n", a.cfg.Workers.Sessions())
	}
	if a.cfg.Leader != nil {
		v := 0
		if a.cfg.Leader() {
			v = 1
		}
		fmt.Fprintf(&b, "# HELP sluice_maintenance_leader 1 when this process leads maintenance (lease reaping, blob collection).\n# TYPE sluice_maintenance_leader gauge\nsluice_maintenance_leader %d\n", v)
	}
	if a.cfg.MoreMetrics != nil {
		if err := a.cfg.MoreMetrics(ctx, &b); err != nil {
			return err
		}
	}
	a.metrics.write(&b)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, err = io.WriteString(w, b.String())
	return err
}

func (m *metrics) write(b *strings.Builder) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b.WriteString("# HELP sluice_http_requests_total HTTP requests by route and status.\n# TYPE sluice_http_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(b, "sluice_http_requests_total{route=\"%s\",status=\"%s\"} %d\n", escLabel(k[0]), k[1], m.requests[k])
	}
	b.WriteString("# HELP sluice_http_request_duration_seconds HTTP request durations by route.\n# TYPE sluice_http_request_duration_seconds histogram\n")
	names := make([]string, 0, len(m.hist))
	for n := range m.hist {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := m.hist[n]
		var cum uint64
		for i, ub := range durationBuckets {
			cum += h.counts[i]
			fmt.Fprintf(b, "sluice_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %d\n", escLabel(n), ub, cum)
		}
		fmt.Fprintf(b, "sluice_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %d\n", escLabel(n), h.n)
		fmt.Fprintf(b, "sluice_http_request_duration_seconds_sum{route=\"%s\"} %g\n", escLabel(n), h.sum)
		fmt.Fprintf(b, "sluice_http_request_duration_seconds_count{route=\"%s\"} %d\n", escLabel(n), h.n)
	}
}
