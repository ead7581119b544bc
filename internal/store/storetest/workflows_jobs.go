package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

func testWorkflows(t *testing.T, b *bundle) {
	ctx := t.Context()
	ins := func(name, digest string, now time.Time) *record.Workflow {
		t.Helper()
		return must(b.s.WorkflowInsert(ctx, store.WorkflowInsertParams{
			Name: name, Digest: digest, Definition: []byte(`{"d":"` + digest + `"}`), Source: []byte("src " + digest), Now: now,
		}))(t)
	}
	v1 := ins("docs", "aaa", b.now)
	if v1.Version != 1 || v1.Digest != "aaa" {
		t.Fatalf("first insert = v%d %s, want v1 aaa", v1.Version, v1.Digest)
	}
	checkTime(t, "CreatedAt", v1.CreatedAt, b.now)
	if again := ins("docs", "aaa", b.at(time.Hour)); again.Version != 1 {
		t.Errorf("same digest again = v%d, want v1", again.Version)
	} else {
		checkTime(t, "CreatedAt of replayed insert", again.CreatedAt, b.now)
	}
	if v2 := ins("docs", "bbb", b.at(time.Minute)); v2.Version != 2 {
		t.Errorf("new digest = v%d, want v2", v2.Version)
	}
	// An old digest maps back to its version: no v3.
	if old := ins("docs", "aaa", b.at(time.Hour)); old.Version != 1 {
		t.Errorf("old digest after v2 = v%d, want v1", old.Version)
	}
	if other := ins("graph", "aaa", b.now); other.Version != 1 {
		t.Errorf("same digest, other name = v%d, want v1", other.Version)
	}

	got := must(b.s.WorkflowGet(ctx, "docs", 1))(t)
	if got.Name != "docs" || got.Version != 1 || got.Digest != "aaa" {
		t.Errorf("WorkflowGet(docs, 1) = %s v%d %s", got.Name, got.Version, got.Digest)
	}
	checkJSON(t, "Definition", got.Definition, `{"d":"aaa"}`)
	checkBytes(t, "Source", got.Source, "src aaa")
	checkTime(t, "CreatedAt", got.CreatedAt, b.now)
	if latest := must(b.s.WorkflowGet(ctx, "docs", 0))(t); latest.Version != 2 || latest.Digest != "bbb" {
		t.Errorf("WorkflowGet(docs, 0) = v%d %s, want latest v2 bbb", latest.Version, latest.Digest)
	}
	_, err := b.s.WorkflowGet(ctx, "docs", 3)
	checkNotFound(t, "WorkflowGet(docs, 3)", err)
	_, err = b.s.WorkflowGet(ctx, "nope", 0)
	checkNotFound(t, "WorkflowGet(nope, 0)", err)

	var list []string
	for _, wf := range must(b.s.WorkflowList(ctx))(t) {
		list = append(list, fmt.Sprintf("%s@%d", wf.Name, wf.Version))
	}
	if want := []string{"docs@1", "docs@2", "graph@1"}; !slices.Equal(list, want) {
		t.Errorf("WorkflowList = %v, want %v", list, want)
	}

	// Concurrent applies of the same new digest agree on one version.
	var wg sync.WaitGroup
	versions := make([]int, 4)
	errs := make([]error, 4)
	for i := range versions {
		wg.Go(func() {
			wf, err := b.s.WorkflowInsert(ctx, store.WorkflowInsertParams{Name: "race", Digest: "ccc", Definition: []byte(`{}`), Source: []byte("x"), Now: b.now})
			errs[i] = err
			if err == nil {
				versions[i] = wf.Version
			}
		})
	}
	wg.Wait()
	for i := range versions {
		if errs[i] != nil || versions[i] != 1 {
			t.Errorf("concurrent WorkflowInsert %d = v%d, %v; want v1, nil", i, versions[i], errs[i])
		}
	}
}

func testJobs(t *testing.T, b *bundle) {
	ctx := t.Context()
	j1 := must(b.s.JobInsert(ctx, store.JobInsertParams{
		Key: "k1", WorkflowName: "docs", WorkflowVersion: 2,
		Metadata: []byte(`{"who":"me","n":1}`), Options: []byte(`{"ocr":true}`), Now: b.now,
	}))(t)
	if j1.ID <= 0 || j1.Key != "k1" || j1.WorkflowName != "docs" || j1.WorkflowVersion != 2 || j1.State != record.JobRunning || j1.Error != "" || j1.TotalBytes != 0 {
		t.Errorf("JobInsert = %+v", j1)
	}
	checkJSON(t, "Metadata", j1.Metadata, `{"who":"me","n":1}`)
	checkJSON(t, "Options", j1.Options, `{"ocr":true}`)
	checkTime(t, "CreatedAt", j1.CreatedAt, b.now)
	checkTime(t, "FinishedAt", j1.FinishedAt, time.Time{})

	// No key, no JSON: empty key, empty objects; several jobs may have no key.
	j2 := must(b.s.JobInsert(ctx, store.JobInsertParams{WorkflowName: "docs", WorkflowVersion: 1, Now: b.at(time.Second)}))(t)
	j3 := must(b.s.JobInsert(ctx, store.JobInsertParams{WorkflowName: "docs", WorkflowVersion: 1, Now: b.at(2 * time.Second)}))(t)
	if j2.Key != "" || j3.Key != "" || !(j1.ID < j2.ID && j2.ID < j3.ID) {
		t.Errorf("keyless jobs: %q %d, %q %d after %d", j2.Key, j2.ID, j3.Key, j3.ID, j1.ID)
	}
	checkJSON(t, "default Metadata", j2.Metadata, `{}`)
	checkJSON(t, "default Options", j2.Options, `{}`)

	if _, err := b.s.JobInsert(ctx, store.JobInsertParams{Key: "k1", WorkflowName: "other", WorkflowVersion: 1, Now: b.now}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("JobInsert with a used key: error = %v, want store.ErrConflict", err)
	}
	if got := must(b.s.JobGetByKey(ctx, "k1"))(t); got.ID != j1.ID || got.WorkflowName != "docs" {
		t.Errorf("JobGetByKey(k1) = %d %s, want %d docs", got.ID, got.WorkflowName, j1.ID)
	}
	got := must(b.s.JobGet(ctx, j1.ID))(t)
	if got.Key != "k1" || got.State != record.JobRunning {
		t.Errorf("JobGet = %+v", got)
	}
	checkJSON(t, "JobGet Metadata", got.Metadata, `{"who":"me","n":1}`)

	// State changes only from running.
	if ok := must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: j2.ID, State: record.JobFailed, Error: "boom", Now: b.at(time.Hour)}))(t); !ok {
		t.Error("JobSetState(running→failed) = false")
	}
	if ok := must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: j2.ID, State: record.JobComplete, Now: b.at(2 * time.Hour)}))(t); ok {
		t.Error("JobSetState on a failed job = true, want false")
	}
	if ok := must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: 1 << 40, State: record.JobComplete, Now: b.now}))(t); ok {
		t.Error("JobSetState on a missing job = true, want false")
	}
	got = must(b.s.JobGet(ctx, j2.ID))(t)
	if got.State != record.JobFailed || got.Error != "boom" {
		t.Errorf("after JobSetState: %s %q, want failed boom", got.State, got.Error)
	}
	checkTime(t, "FinishedAt", got.FinishedAt, b.at(time.Hour))

	mustOK(t, b.s.JobAddTotal(ctx, j1.ID, 1000.5))
	mustOK(t, b.s.JobAddTotal(ctx, j1.ID, 24))
	if got := must(b.s.JobGet(ctx, j1.ID))(t); got.TotalBytes != 1024.5 {
		t.Errorf("TotalBytes = %v, want 1024.5", got.TotalBytes)
	}

	// Lists: newest first, state filter, pagination below AfterID, limit.
	checkIDs(t, "JobList", jobIDs(must(b.s.JobList(ctx, store.JobListParams{}))(t)), []int64{j3.ID, j2.ID, j1.ID})
	checkIDs(t, "JobList running", jobIDs(must(b.s.JobList(ctx, store.JobListParams{State: record.JobRunning}))(t)), []int64{j3.ID, j1.ID})
	checkIDs(t, "JobList limit 2", jobIDs(must(b.s.JobList(ctx, store.JobListParams{Limit: 2}))(t)), []int64{j3.ID, j2.ID})
	checkIDs(t, "JobList after j2", jobIDs(must(b.s.JobList(ctx, store.JobListParams{AfterID: j2.ID}))(t)), []int64{j1.ID})
	checkIDs(t, "JobListRunning", jobIDs(must(b.s.JobListRunning(ctx))(t)), []int64{j1.ID, j3.ID})

	// Filters: workflow, creation time, metadata values as text, and free text.
	j4 := must(b.s.JobInsert(ctx, store.JobInsertParams{Key: "batch_7%", WorkflowName: "mail", WorkflowVersion: 1,
		Metadata: []byte(`{"who":"Them","n":7,"ok":true,"a.b":"dotted","big":12345678901234567890}`), Now: b.at(3 * time.Second)}))(t)
	for _, tc := range []struct {
		name string
		p    store.JobListParams
		want []int64
	}{
		{"workflow", store.JobListParams{Workflow: "docs"}, []int64{j3.ID, j2.ID, j1.ID}},
		{"workflow and state", store.JobListParams{Workflow: "docs", State: record.JobFailed}, []int64{j2.ID}},
		{"created from", store.JobListParams{CreatedFrom: b.at(time.Second)}, []int64{j4.ID, j3.ID, j2.ID}},
		{"created until", store.JobListParams{CreatedUntil: b.at(2 * time.Second)}, []int64{j2.ID, j1.ID}},
		{"created in", store.JobListParams{CreatedFrom: b.at(time.Second), CreatedUntil: b.at(3 * time.Second)}, []int64{j3.ID, j2.ID}},
		{"meta string", store.JobListParams{Meta: []store.KeyValue{{Key: "who", Value: "me"}}}, []int64{j1.ID}},
		{"meta number", store.JobListParams{Meta: []store.KeyValue{{Key: "n", Value: "7"}}}, []int64{j4.ID}},
		{"meta big number", store.JobListParams{Meta: []store.KeyValue{{Key: "big", Value: "12345678901234567890"}}}, []int64{j4.ID}},
		{"meta boolean", store.JobListParams{Meta: []store.KeyValue{{Key: "ok", Value: "true"}}}, []int64{j4.ID}},
		{"meta dotted key", store.JobListParams{Meta: []store.KeyValue{{Key: "a.b", Value: "dotted"}}}, []int64{j4.ID}},
		{"meta both", store.JobListParams{Meta: []store.KeyValue{{Key: "who", Value: "Them"}, {Key: "n", Value: "1"}}}, nil},
		{"meta missing key", store.JobListParams{Meta: []store.KeyValue{{Key: "nope", Value: ""}}}, nil},
		{"text id", store.JobListParams{Text: strconv.FormatInt(j2.ID, 10), Workflow: "docs"}, []int64{j2.ID}},
		{"text workflow", store.JobListParams{Text: "MAI"}, []int64{j4.ID}},
		{"text error", store.JobListParams{Text: "boo"}, []int64{j2.ID}},
		{"text metadata", store.JobListParams{Text: "them"}, []int64{j4.ID}},
		{"text wildcard is literal", store.JobListParams{Text: "7%"}, []int64{j4.ID}},
		{"text underscore is literal", store.JobListParams{Text: "k_"}, nil},
		{"filters and pages", store.JobListParams{CreatedFrom: b.at(time.Second), AfterID: j3.ID, Limit: 1}, []int64{j2.ID}},
	} {
		checkIDs(t, "JobList "+tc.name, jobIDs(must(b.s.JobList(ctx, tc.p))(t)), tc.want)
	}
}

// testJobKeyConflictKeepsTx: an ErrConflict inside a transaction leaves it usable, as on SQLite
// (Postgres would abort the transaction on a raised unique violation).
func testJobKeyConflictKeepsTx(t *testing.T, b *bundle) {
	ctx := t.Context()
	b.job("dup")
	err := b.s.InTx(ctx, func(x store.Executor) error {
		if _, err := x.JobInsert(ctx, store.JobInsertParams{Key: "dup", WorkflowName: "wf", WorkflowVersion: 1, Now: b.now}); !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("JobInsert(dup) in tx: error = %v, want store.ErrConflict", err)
		}
		_, err := x.JobInsert(ctx, store.JobInsertParams{Key: "after", WorkflowName: "wf", WorkflowVersion: 1, Now: b.now})
		return err
	})
	mustOK(t, err)
	must(b.s.JobGetByKey(ctx, "after"))(t)
}

func testJobHasOpenItems(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	open := func() bool { t.Helper(); return must(b.s.JobHasOpenItems(ctx, j.ID))(t) }
	if open() {
		t.Error("job without items has open items")
	}
	r1, r2 := b.root(j.ID, 0, "0"), b.root(j.ID, 1, "1")
	other := b.root(b.job("").ID, 0, "0")
	if !open() {
		t.Error("written items: JobHasOpenItems = false")
	}
	set := func(id int64, from, to record.ItemState) {
		t.Helper()
		if !b.move(id, from, to) {
			t.Fatalf("ItemSetStateMany(%d %s→%s) moved none", id, from, to)
		}
	}
	for _, id := range []int64{r1.ID, r2.ID} {
		set(id, record.ItemWritten, record.ItemProcessed)
	}
	if !open() {
		t.Error("processed items: JobHasOpenItems = false")
	}
	set(r1.ID, record.ItemProcessed, record.ItemIngested)
	if !open() {
		t.Error("one item still processed: JobHasOpenItems = false")
	}
	set(r2.ID, record.ItemProcessed, record.ItemIngested)
	if open() {
		t.Errorf("all items ingested (another job's item %d open): JobHasOpenItems = true", other.ID)
	}
}

func testJobProgress(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	mustOK(t, b.s.JobAddTotal(ctx, j.ID, 300))
	r1, r2, r3 := b.root(j.ID, 0, "0"), b.root(j.ID, 1, "1"), b.root(j.ID, 2, "2")
	_ = r3
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: r1.ID, AddColored: 0.25}))
	mustOK(t, b.s.ItemColorMany(ctx, []int64{r2.ID}, []float64{100}))
	b.move(r2.ID, record.ItemWritten, record.ItemProcessed)
	p := must(b.s.JobProgress(ctx, j.ID))(t)
	if p.Total != 300 || p.Colored != 125 {
		t.Errorf("JobProgress = total %v colored %v, want 300 125", p.Total, p.Colored)
	}
	if want := map[record.ItemState]int{record.ItemWritten: 2, record.ItemProcessed: 1}; !mapsEqual(p.Items, want) {
		t.Errorf("JobProgress.Items = %v, want %v", p.Items, want)
	}
	empty := must(b.s.JobProgress(ctx, b.job("").ID))(t)
	if empty.Total != 0 || empty.Colored != 0 || len(empty.Items) != 0 || empty.Items == nil {
		t.Errorf("JobProgress of an empty job = %+v, want zeros and an empty map", empty)
	}
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// testJobSeal: a job created open is unsealed until JobSeal, which is idempotent; a job created
// without Open is sealed from the start.
func testJobSeal(t *testing.T, b *bundle) {
	ctx := t.Context()
	open := must(b.s.JobInsert(ctx, store.JobInsertParams{Open: true, WorkflowName: "w", WorkflowVersion: 1, Now: b.now}))(t)
	if open.Sealed {
		t.Fatalf("an open job is sealed: %+v", open)
	}
	if ok, err := b.s.JobSeal(ctx, open.ID); err != nil || !ok {
		t.Fatalf("JobSeal = %v, %v; want true", ok, err)
	}
	if ok, err := b.s.JobSeal(ctx, open.ID); err != nil || ok {
		t.Fatalf("second JobSeal = %v, %v; want false", ok, err)
	}
	if j := must(b.s.JobGet(ctx, open.ID))(t); !j.Sealed {
		t.Errorf("sealed job reads back unsealed")
	}
	closed := must(b.s.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Now: b.now}))(t)
	if !closed.Sealed {
		t.Errorf("a job created without Open is unsealed")
	}
}

func testJobReopen(t *testing.T, b *bundle) {
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		state record.JobState // "" leaves the job running
		want  bool
	}{
		{"failed", record.JobFailed, true},
		{"complete", record.JobComplete, true},
		{"canceled", record.JobCanceled, true},
		{"running", "", false},
	} {
		j := b.job("")
		if tc.state != "" {
			if !must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: j.ID, State: tc.state, Error: "boom", Now: b.at(time.Minute)}))(t) {
				t.Fatalf("%s: JobSetState = false", tc.name)
			}
		}
		if got := must(b.s.JobReopen(ctx, j.ID))(t); got != tc.want {
			t.Errorf("%s: JobReopen = %v, want %v", tc.name, got, tc.want)
		}
		got := must(b.s.JobGet(ctx, j.ID))(t)
		switch {
		case tc.want:
			if got.State != record.JobRunning || got.Error != "" {
				t.Errorf("%s: reopened job = %s %q, want running with no error", tc.name, got.State, got.Error)
			}
			checkTime(t, tc.name+": FinishedAt of a reopened job", got.FinishedAt, time.Time{})
			// A reopened job ends again like any running job.
			if !must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: j.ID, State: record.JobComplete, Now: b.at(time.Hour)}))(t) {
				t.Errorf("%s: JobSetState after reopen = false", tc.name)
			}
		case tc.state != "":
			if got.State != tc.state || got.Error != "boom" {
				t.Errorf("%s: job after refused reopen = %s %q", tc.name, got.State, got.Error)
			}
		}
	}
	if must(b.s.JobReopen(ctx, 1<<40))(t) {
		t.Error("JobReopen of a missing job = true")
	}
}
