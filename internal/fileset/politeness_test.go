package fileset

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/workflow"
)

// TestWorkflowSource: the workflow a configuration runs has the download step's per-host rate
// and host_delay of its delay (none when negative, DefaultHostDelay when 0), and the publish:
// rules of the sinks configured only.
func TestWorkflowSource(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		delay    time.Duration
		sinks    []string
		interval time.Duration
	}{{0, []string{SinkName, SandcrawlerSinkName}, DefaultHostDelay}, {0, nil, DefaultHostDelay}, {-1, nil, 0},
		{-1, []string{SinkName}, 0}, {250 * time.Millisecond, []string{SandcrawlerSinkName, "other"}, 250 * time.Millisecond}} {
		src, err := WorkflowSource(c.delay, c.sinks...)
		if err != nil {
			t.Fatal(err)
		}
		def, err := workflow.Parse(src, "fileset.json")
		if err != nil {
			t.Fatalf("delay %v sinks %v: %v", c.delay, c.sinks, err)
		}
		dl := def.Step(downloadStep)
		if got := dl.Limit.Rate.Interval(); got != c.interval || dl.Limit.Concurrency != 8 || dl.Limit.Key != "{{metadata.host}}" {
			t.Errorf("delay %v: limit %+v (interval %v), want 8 per host %v apart", c.delay, dl.Limit, got, c.interval)
		}
		if got, ok := dl.With["host_delay"]; c.interval == 0 && ok || c.interval > 0 && got != c.interval.String() {
			t.Errorf("delay %v: host_delay %v, want %v", c.delay, got, c.interval)
		}
		rules := map[string]int{}
		for _, r := range append(slices.Clone(def.Publish), def.Step("result").Publish...) {
			rules[r.Sink]++
			if r.Sink == SandcrawlerSinkName && r.Body == "" {
				t.Errorf("sandcrawler rule %+v publishes the envelope", r)
			}
		}
		for _, sink := range []string{SinkName, SandcrawlerSinkName} {
			if want := 2 * min(1, len(slices.DeleteFunc(slices.Clone(c.sinks), func(s string) bool { return s != sink }))); rules[sink] != want {
				t.Errorf("sinks %v: %d publish rules of %s, want %d", c.sinks, rules[sink], sink, want)
			}
		}
	}
}

// arrivals records when each host of the test's file servers received a request for a file,
// by the server's own clock.
type arrivals struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (a *arrivals) server(t *testing.T, f *fakes, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		a.mu.Lock()
		a.at[name] = append(a.at[name], now)
		a.mu.Unlock()
		f.serveFile(w, r, strings.TrimPrefix(r.URL.Path, "/f/"))
	}))
	t.Cleanup(s.Close)
	return s
}

// TestHostDelay: with a politeness delay, the downloads of one dataset from one host reach it
// at least the delay apart — measured at the host, from its own timestamps — while those of
// another host are not held back by them. On PostgreSQL two engines with their workers (two
// processes, as two `sluice worker`s) share the store and the downloads; the delay holds
// across them, being the engine's limit: rate.
func TestHostDelay(t *testing.T) {
	t.Parallel()
	const delay = 800 * time.Millisecond
	// The delay spaces the downloads' starts, each taken in a transaction before the action
	// runs; the request reaches the host a moment later, a moment that varies with the
	// machine's load (up to 200 ms seen here with the package's other tests running): a gap
	// between two requests is the delay less the first one's lateness. Without a delay the
	// gaps are a few milliseconds.
	const jitter = delay / 2
	const perHost = 4
	run := func(t *testing.T, open enginetest.Open, kits int) {
		f := newFakes(t)
		a := &arrivals{at: map[string][]time.Time{}}
		hosts := map[string]*httptest.Server{"a": a.server(t, f, "a"), "b": a.server(t, f, "b")}
		var files []map[string]any
		for i := range perHost {
			for _, h := range []string{"a", "b"} {
				key := fmt.Sprintf("polite/%s%d.csv", h, i)
				m := f.file(key, content(key, 2000), "")
				m["links"] = map[string]any{"self": baseOf(hosts[h]) + "/f/" + key}
				files = append(files, m)
			}
		}
		url := f.zenodoRecord(900, "open", files...)
		var ks []*enginetest.Kit
		for range kits {
			cfg := f.config(t)
			cfg.HostDelay = delay
			k, _ := startKit(t, open, cfg)
			ks = append(ks, k)
		}
		src, err := WorkflowSource(delay)
		if err != nil {
			t.Fatal(err)
		}
		job := ks[0].StartJob(t, string(src), engine.Root{Name: url, Metadata: map[string]any{"request": asMap(Request{IngestType: "dataset", BaseURL: url})}})
		if j := ks[0].WaitJob(t, job.ID, 2*time.Minute); j.State != record.JobComplete {
			t.Fatalf("job %d %s: %s", j.ID, j.State, j.Error)
		}
		if r := jobResults(t, ks[0], job.ID, 1)[0]; r.Status != StatusSuccess {
			t.Fatalf("status %s (%s), want success", r.Status, r.ErrorMessage)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, h := range []string{"a", "b"} {
			at := a.at[h]
			slices.SortFunc(at, time.Time.Compare)
			if len(at) != perHost {
				t.Fatalf("host %s received %d requests, want %d", h, len(at), perHost)
			}
			var gaps []string
			for i := 1; i < len(at); i++ {
				gap := at[i].Sub(at[i-1])
				gaps = append(gaps, gap.Round(time.Millisecond).String())
				if gap < delay-jitter {
					t.Errorf("host %s: requests %d and %d %v apart, want at least the delay %v (less %v of jitter)", h, i-1, i, gap, delay, jitter)
				}
			}
			if span := at[len(at)-1].Sub(at[0]); span < (perHost-1)*delay-jitter {
				t.Errorf("host %s: %d requests over %v, want at least %v", h, perHost, span, (perHost-1)*delay)
			}
			t.Logf("host %s: gaps %v", h, gaps)
		}
		// The two hosts' first requests came together: neither waited for the other's delay.
		if d := a.at["a"][0].Sub(a.at["b"][0]).Abs(); d >= delay/2 {
			t.Errorf("the hosts' first requests %v apart: one host's delay held the other back", d)
		}
		if kits > 1 {
			ran := 0
			for _, k := range ks {
				if k.Worker.Stats()["fileset-download"].Runs > 0 {
					ran++
				}
			}
			t.Logf("%d of %d processes downloaded", ran, kits)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		run(t, drivertest.OpenSQLite, 1)
	})
	t.Run("postgres two processes", func(t *testing.T) {
		t.Parallel()
		run(t, drivertest.SharedPostgres(t), 2)
	})
}

// TestHostDelayLateCommits: two downloads from one host reach it at least the politeness delay
// apart, by the host's own clock, with eight downloads of the host ready at once, when the
// store grants a download's start in a transaction that commits long after it began
// (enginetest.LateGrants: every other grant of the host's start commits 1.5 delays late), and
// when a request reaches the host late (every other one arrives half a delay after it was
// sent, as over a slow path). The store dates each grant from its transaction's beginning,
// and a request arrives a moment after it starts: spacing the downloads' starts let the late
// one and the next reach the host together.
func TestHostDelayLateCommits(t *testing.T) {
	t.Parallel()
	const delay = 400 * time.Millisecond
	const files = 8
	f := newFakes(t)
	var mu sync.Mutex
	var at []time.Time
	sent := 0
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent++
		late := sent%2 == 1
		mu.Unlock()
		if late {
			// The slow path this host stands for: the request arrives half a delay late.
			select {
			case <-time.After(delay / 2):
			case <-r.Context().Done():
				return
			}
		}
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		f.serveFile(w, r, strings.TrimPrefix(r.URL.Path, "/f/"))
	}))
	t.Cleanup(host.Close)
	var fs []map[string]any
	for i := range files {
		key := fmt.Sprintf("late/a%d.csv", i)
		m := f.file(key, content(key, 2000), "")
		m["links"] = map[string]any{"self": baseOf(host) + "/f/" + key}
		fs = append(fs, m)
	}
	url := f.zenodoRecord(901, "open", fs...)
	cfg := f.config(t)
	cfg.HostDelay = delay
	k, _ := startKit(t, enginetest.LateGrants(drivertest.OpenSQLite, delay*3/2), cfg)
	src, err := WorkflowSource(delay)
	if err != nil {
		t.Fatal(err)
	}
	job := k.StartJob(t, string(src), engine.Root{Name: url, Metadata: map[string]any{"request": asMap(Request{IngestType: "dataset", BaseURL: url})}})
	if j := k.WaitJob(t, job.ID, 2*time.Minute); j.State != record.JobComplete {
		t.Fatalf("job %d %s: %s", j.ID, j.State, j.Error)
	}
	if r := jobResults(t, k, job.ID, 1)[0]; r.Status != StatusSuccess {
		t.Fatalf("status %s (%s), want success", r.Status, r.ErrorMessage)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(at, time.Time.Compare)
	if len(at) != files {
		t.Fatalf("the host received %d requests, want %d", len(at), files)
	}
	var gaps []string
	for i := 1; i < len(at); i++ {
		gap := at[i].Sub(at[i-1])
		gaps = append(gaps, gap.Round(time.Millisecond).String())
		if gap < delay {
			t.Errorf("requests %d and %d reached the host %v apart, want at least the delay %v", i-1, i, gap, delay)
		}
	}
	t.Logf("gaps %v", gaps)
}
