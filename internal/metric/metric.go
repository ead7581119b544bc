// Package metric holds the Prometheus collectors a Sluice process keeps in memory: HTTP requests,
// task attempts (their run time and how long they waited in their queue) and lease renewals,
// beside the Go runtime's and the process's collectors. The figures derived from the database
// when /metrics is scraped (tasks by state, queue depth, job progress) are the API's (package api).
//
// Every name is documented in docs/metrics.md; a test in package api scrapes /metrics with the
// Prometheus text parser and checks each one.
package metric

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// durationBuckets are the upper bounds (seconds) of the HTTP request duration histogram, as
// before client_golang: a scrape's history stays comparable.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// taskBuckets are the upper bounds (seconds) of the task duration and queue wait histograms:
// from the microseconds of a brief action to the hour a converter may take on a large file.
var taskBuckets = []float64{0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600}

// Outcomes of a task attempt, the outcome label of sluice_task_duration_seconds.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
)

// Set is one process's collectors, registered in its own registry (never the global one, so
// that tests and several servers in one process do not share counts). A nil *Set records
// nothing: every method may be called on it. It is safe for concurrent use.
type Set struct {
	// Registry holds the collectors below and the Go and process collectors.
	Registry *prometheus.Registry

	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	taskDuration  *prometheus.HistogramVec
	queueWait     *prometheus.HistogramVec
	leaseRenewals prometheus.Counter
	leasesRenewed prometheus.Counter
}

// New returns a Set with every collector registered.
func New() *Set {
	s := &Set{
		Registry: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_http_request_duration_seconds", Help: "HTTP request durations by route.", Buckets: durationBuckets,
		}, []string{"route"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_task_duration_seconds", Help: "Run time of the task attempts this process ran, by action and outcome (succeeded or failed).",
			Buckets: taskBuckets,
		}, []string{"action", "outcome"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_task_queue_wait_seconds", Help: "Time from a task becoming ready (or its retry backoff ending) to this process leasing it, by action.",
			Buckets: taskBuckets,
		}, []string{"action"}),
		leaseRenewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_lease_renewals_total", Help: "Lease renewal statements this process ran (one every third of the lease, for all its tasks).",
		}),
		leasesRenewed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_lease_renewed_tasks_total", Help: "Task leases and held-batch records extended by those renewals.",
		}),
	}
	s.Registry.MustRegister(s.httpRequests, s.httpDuration, s.taskDuration, s.queueWait, s.leaseRenewals, s.leasesRenewed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s
}

// TaskAttempt records one attempt of a task of action: how long it waited in its queue before
// it was leased and how long it ran.
func (s *Set) TaskAttempt(action string, wait, run time.Duration, failed bool) {
	if s == nil {
		return
	}
	outcome := OutcomeSucceeded
	if failed {
		outcome = OutcomeFailed
	}
	s.queueWait.WithLabelValues(action).Observe(max(wait, 0).Seconds())
	s.taskDuration.WithLabelValues(action, outcome).Observe(run.Seconds())
}

// LeasesRenewed records one renewal statement that extended n leases.
func (s *Set) LeasesRenewed(n int) {
	if s == nil {
		return
	}
	s.leaseRenewals.Inc()
	s.leasesRenewed.Add(float64(n))
}

// Instrument counts the requests h serves under the route's name and observes their durations.
func (s *Set) Instrument(route string, h http.Handler) http.Handler {
	if s == nil {
		return h
	}
	dur := s.httpDuration.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		dur.Observe(time.Since(start).Seconds())
		s.httpRequests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
	})
}

// statusWriter remembers the status of a response.
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
