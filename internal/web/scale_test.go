package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestOperatorPagesAtScale measures what a user feels on the operator's pages with 50 jobs and
// 100,000 documents (2,000 a job, written straight to the store): each page's time to first
// byte and size, logged, and failed beyond 2 s or 1 MB, on each driver. It runs with
// SLUICE_TEST_SCALE=1 only: filling the store takes a while.
func TestOperatorPagesAtScale(t *testing.T) {
	if os.Getenv("SLUICE_TEST_SCALE") != "1" {
		t.Skip("set SLUICE_TEST_SCALE=1 to measure the pages with 50 jobs and 100,000 documents")
	}
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) { measureAtScale(t, setupOn(t, open)) })
}

func measureAtScale(t *testing.T, b *bundle) {
	ctx := t.Context()
	const jobs, perJob = 50, 2000
	start := time.Now()
	var first *record.Job
	for j := range jobs {
		err := b.n.Store.InTx(ctx, func(x store.Executor) error {
			job, err := x.JobInsert(ctx, store.JobInsertParams{WorkflowName: "documents", WorkflowVersion: 1,
				Metadata: []byte(fmt.Sprintf(`{"batch":"b%d"}`, j%5)), Now: time.Now()})
			if err != nil {
				return err
			}
			if first == nil {
				first = job
			}
			ps := make([]store.ItemInsertParams, perJob)
			for i := range ps {
				name := fmt.Sprintf("doc-%05d.txt", i)
				ps[i] = store.ItemInsertParams{JobID: job.ID, Ordinal: i, SortKey: fmt.Sprintf("%08d", i), Name: name, ContentType: "text/plain", Now: time.Now()}
			}
			items, err := x.ItemInsertMany(ctx, ps)
			if err != nil {
				return err
			}
			for _, it := range items {
				if err := x.OutputPut(ctx, store.OutputPutParams{ItemID: it.ID, JobID: job.ID, Kind: store.OutputDocument,
					Value: []byte(fmt.Sprintf(`{"title":%q}`, it.Name)), Now: time.Now()}); err != nil {
					return err
				}
			}
			if j%2 == 0 {
				_, err = x.JobSetState(ctx, store.JobSetStateParams{ID: job.ID, State: record.JobComplete, Now: time.Now()})
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d jobs and %d documents in %s", jobs, jobs*perJob, time.Since(start).Round(time.Millisecond))
	c := b.client(t)
	c.signIn(b.admin)
	id := itoa(first.ID)
	for _, path := range []string{"/jobs", "/jobs?sort=errors", "/jobs?sort=duration&dir=asc", "/jobs?meta=batch%3Db3", "/jobs?q=b3",
		"/jobs/" + id, "/jobs/" + id + "/documents", "/jobs/" + id + "/documents?sort=title", "/jobs/" + id + "/history",
		"/documents", "/documents?sort=title", "/documents?sort=size", "/documents?type=text%2Fplain&meta=batch%3Db3", "/documents?job=" + id} {
		var ttfb time.Duration
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotFirstResponseByte: func() { ttfb = time.Since(start) }}), "GET", b.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		res, err := c.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		t.Logf("%-32s %d  first byte after %6.1f ms, %7d bytes", path, res.StatusCode, float64(ttfb.Microseconds())/1000, n)
		if res.StatusCode != 200 || ttfb > 2*time.Second || n > 1<<20 {
			t.Errorf("GET %s: %d after %s, %d bytes; want 200 within 2 s, at most 1 MB", path, res.StatusCode, ttfb, n)
		}
	}
}
