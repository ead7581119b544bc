package fileset

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// gatedFiles is a file server that counts the GETs of each file and holds every answer until
// the test opens its gate.
type gatedFiles struct {
	mu   sync.Mutex
	gets map[string]int
	gate chan struct{}
}

func (g *gatedFiles) server(t *testing.T, f *fakes) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/f/")
		g.mu.Lock()
		g.gets[key]++
		g.mu.Unlock()
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return
		}
		f.serveFile(w, r, key)
	}))
	t.Cleanup(s.Close)
	return s
}

func (g *gatedFiles) count(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gets[key]
}

// TestConcurrentRequestsDownloadOnce: two requests for the same (ingest_type, base_url) in
// flight at once — two roots of one job, or two jobs (on PostgreSQL, of two processes sharing
// the store) — download each file once: the first download of a file claims it and the other
// parks and takes its outcome. Both are success (neither found the other's result: the file
// server holds every download until all four file tasks exist). A later request with
// force_recrawl finds the row they wrote, so its claims are new and it downloads again.
func TestConcurrentRequestsDownloadOnce(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, open enginetest.Open, kits int, sameJob bool) {
		f := newFakes(t)
		g := &gatedFiles{gets: map[string]int{}, gate: make(chan struct{})}
		srv := g.server(t, f)
		keys := []string{"twice/a.csv", "twice/b.csv"}
		var files []map[string]any
		for _, key := range keys {
			m := f.file(key, content(key, 3000), "")
			m["links"] = map[string]any{"self": baseOf(srv) + "/f/" + key}
			files = append(files, m)
		}
		url := f.zenodoRecord(901, "open", files...)
		root := func(force bool) engine.Root {
			return engine.Root{Name: url, Metadata: map[string]any{"request": asMap(Request{IngestType: "dataset", BaseURL: url, ForceRecrawl: force})}}
		}
		var ks []*enginetest.Kit
		for range kits {
			k, _ := startKit(t, open, f.config(t))
			ks = append(ks, k)
		}
		src := workflowSource(t)
		var jobs []*record.Job
		if sameJob {
			jobs = append(jobs, ks[0].StartJob(t, src, root(false), root(false)))
		} else {
			for i := range 2 {
				jobs = append(jobs, ks[i%kits].StartJob(t, src, root(false)))
			}
		}
		poll.Until(t, time.Minute, "both requests' file tasks", func() (bool, string) {
			n := 0
			for _, j := range jobs {
				for _, tk := range ks[0].Tasks(t, j.ID) {
					if tk.Step == downloadStep && tk.State != record.TaskSkipped {
						n++
					}
				}
			}
			return n == 2*len(keys), fmt.Sprintf("%d download tasks", n)
		})
		close(g.gate)
		var results []Result
		for _, j := range jobs {
			if got := ks[0].WaitJob(t, j.ID, time.Minute); got.State != record.JobComplete {
				t.Fatalf("job %d %s: %s", got.ID, got.State, got.Error)
			}
			results = append(results, jobResults(t, ks[0], j.ID, 2/len(jobs))...)
		}
		for i, r := range results {
			if r.Status != StatusSuccess || len(r.Manifest) != len(keys) {
				t.Fatalf("request %d: %s (%s) with %d files, want success with %d", i, r.Status, r.ErrorMessage, len(r.Manifest), len(keys))
			}
			checkSuccess(t, fmt.Sprint("request ", i), r)
			for j, m := range r.Manifest {
				if m.SHA256 != results[0].Manifest[j].SHA256 {
					t.Errorf("request %d, file %s: sha256 %s, the other's %s", i, m.Path, m.SHA256, results[0].Manifest[j].SHA256)
				}
			}
		}
		for _, key := range keys {
			if n := g.count(key); n != 1 {
				t.Errorf("%s downloaded %d times by two requests in flight at once, want once", key, n)
			}
		}

		// Later, a request with force_recrawl ingests the dataset again: new claims.
		again := ks[len(ks)-1].StartJob(t, src, root(true))
		if got := ks[0].WaitJob(t, again.ID, time.Minute); got.State != record.JobComplete {
			t.Fatalf("job %d %s: %s", got.ID, got.State, got.Error)
		}
		if r := jobResults(t, ks[0], again.ID, 1)[0]; r.Status != StatusSuccess {
			t.Errorf("force_recrawl: %s (%s), want success", r.Status, r.ErrorMessage)
		}
		for _, key := range keys {
			if n := g.count(key); n != 2 {
				t.Errorf("%s downloaded %d times in all after a force_recrawl, want twice", key, n)
			}
		}
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Run("one job", func(t *testing.T) { run(t, open, 1, true) })
		t.Run("two jobs", func(t *testing.T) { run(t, open, 1, false) })
	})
	t.Run("postgres two processes", func(t *testing.T) {
		t.Parallel()
		run(t, drivertest.SharedPostgres(t), 2, false)
	})
}
