package fileset

import (
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/workerproto/remotetest"
)

// TestRemoteFileset runs the requests of every status, twice (the second time each archived one
// is success-existing, read from fileset_results), with every fileset action served by remote
// workers (the worker protocol, in process) — which read the requests' files, fileset_results and
// the blob store through their tasks' read ports, and store the files' blobs through the server
// — and gets the statuses and files of the all-local run.
func TestRemoteFileset(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		f := newFakes(t)
		cs := statusCases(f)
		cfg := f.config(t)
		cfg.MaxFileSize = 1 << 20
		reqs := make([]Request, len(cs))
		for i, c := range cs {
			reqs[i] = Request{IngestType: "dataset", BaseURL: c.url, LinkSource: "test", LinkSourceID: c.name}
		}
		twice := func(k *enginetest.Kit) [2][]Result {
			_, first := runRequests(t, k, reqs, time.Minute)
			_, second := runRequests(t, k, reqs, time.Minute)
			return [2][]Result{first, second}
		}
		lk, _ := startKit(t, open, cfg)
		local := twice(lk)

		var names []string
		for _, a := range New(cfg).Actions() {
			names = append(names, a.Spec().Name)
		}
		k := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{DomainName: Domain{}},
			Engine: remotetest.Route(names...)}, New(cfg).Actions()...)
		// The remote process has actions of its own: nothing but HTTP joins them to the engine.
		r := remotetest.Serve(t, k, New(cfg).Actions(), 2, names...)
		remote := twice(k)
		for _, name := range names {
			// The engine runs these inline (action.InlineAlways), wherever the step is routed.
			if r.Ran(name) == 0 && name != "fileset-platform" && name != "fileset-limits" {
				t.Errorf("no task of %s ran remotely", name)
			}
		}
		existing := 0
		for run := range 2 {
			for i, c := range cs {
				l, rm := local[run][i], remote[run][i]
				if rm.Status != l.Status || rm.Hit != l.Hit || rm.PlatformName != l.PlatformName || len(rm.Manifest) != len(l.Manifest) {
					t.Errorf("run %d, %s: remote %s (hit %v, %s, %d files), local %s (hit %v, %s, %d files)", run+1, c.name,
						rm.Status, rm.Hit, rm.PlatformName, len(rm.Manifest), l.Status, l.Hit, l.PlatformName, len(l.Manifest))
					continue
				}
				for j := range l.Manifest {
					if rm.Manifest[j].SHA256 != l.Manifest[j].SHA256 {
						t.Errorf("run %d, %s: file %d sha256 %s, local %s", run+1, c.name, j, rm.Manifest[j].SHA256, l.Manifest[j].SHA256)
					}
				}
				if run == 1 && rm.Status == StatusSuccessExisting {
					existing++
				}
			}
		}
		if existing == 0 {
			t.Error("no request was success-existing the second time: fileset_results was not read remotely")
		}
	})
}
