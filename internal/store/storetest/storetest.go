// Package storetest is the conformance suite every [store.Store] driver runs, so the embedded
// SQLite store and PostgreSQL are held to one contract: the SQL semantics of DESIGN §4 (keyed,
// idempotent writes; guarded task transitions; leases) expressed as behaviour, not as SQL.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// Exercise runs the conformance suite. open must return a new, empty, migrated store for each call
// and close it when the test ends; subtests run in parallel.
func Exercise(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, b *bundle)
	}{
		{"Workflows", testWorkflows},
		{"Jobs", testJobs},
		{"JobKeyConflictKeepsTx", testJobKeyConflictKeepsTx},
		{"JobHasOpenItems", testJobHasOpenItems},
		{"JobProgress", testJobProgress},
		{"ItemInsert", testItemInsert},
		{"ItemList", testItemList},
		{"ItemSetState", testItemSetState},
		{"ItemUpdateSetOnce", testItemUpdateSetOnce},
		{"ItemUpdateMetadataMerge", testItemUpdateMetadataMerge},
		{"ItemColoredCappedAtShare", testItemColored},
		{"ItemChildren", testItemChildren},
		{"Events", testEvents},
		{"TaskInsert", testTaskInsert},
		{"TaskLeaseOrder", testTaskLeaseOrder},
		{"TaskLeaseLimit", testTaskLeaseLimit},
		{"TaskLeaseRunAfter", testTaskLeaseRunAfter},
		{"TaskFinishGuard", testTaskFinishGuard},
		{"TaskFinishRefund", testTaskFinishRefund},
		{"TaskRenewLeases", testTaskRenewLeases},
		{"TaskListExpired", testTaskListExpired},
		{"TaskLists", testTaskLists},
		{"TaskCancelJob", testTaskCancelJob},
		{"TaskNextRunAfter", testTaskNextRunAfter},
		{"Attempts", testAttempts},
		{"Outputs", testOutputs},
		{"Cache", testCache},
		{"BlobIsReferenced", testBlobIsReferenced},
		{"NotFound", testNotFound},
		{"InTxRollback", testInTxRollback},
		{"InTxReadsOwnWrites", testInTxReadsOwnWrites},
		{"ConcurrentLease", testConcurrentLease},
		{"Wait", testWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, setup(t, open))
		})
	}
}

func testWorkflows(t *testing.T, b *bundle) {
	ctx := t.Context()
	ins := func(name, digest string, now time.Time) *store.Workflow {
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
	if j1.ID <= 0 || j1.Key != "k1" || j1.WorkflowName != "docs" || j1.WorkflowVersion != 2 || j1.State != store.JobRunning || j1.Error != "" || j1.TotalBytes != 0 {
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
	if got.Key != "k1" || got.State != store.JobRunning {
		t.Errorf("JobGet = %+v", got)
	}
	checkJSON(t, "JobGet Metadata", got.Metadata, `{"who":"me","n":1}`)

	// State changes only from running.
	if ok := must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: j2.ID, State: store.JobFailed, Error: "boom", Now: b.at(time.Hour)}))(t); !ok {
		t.Error("JobSetState(running→failed) = false")
	}
	if ok := must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: j2.ID, State: store.JobComplete, Now: b.at(2 * time.Hour)}))(t); ok {
		t.Error("JobSetState on a failed job = true, want false")
	}
	if ok := must(b.s.JobSetState(ctx, store.JobSetStateParams{ID: 1 << 40, State: store.JobComplete, Now: b.now}))(t); ok {
		t.Error("JobSetState on a missing job = true, want false")
	}
	got = must(b.s.JobGet(ctx, j2.ID))(t)
	if got.State != store.JobFailed || got.Error != "boom" {
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
	checkIDs(t, "JobList running", jobIDs(must(b.s.JobList(ctx, store.JobListParams{State: store.JobRunning}))(t)), []int64{j3.ID, j1.ID})
	checkIDs(t, "JobList limit 2", jobIDs(must(b.s.JobList(ctx, store.JobListParams{Limit: 2}))(t)), []int64{j3.ID, j2.ID})
	checkIDs(t, "JobList after j2", jobIDs(must(b.s.JobList(ctx, store.JobListParams{AfterID: j2.ID}))(t)), []int64{j1.ID})
	checkIDs(t, "JobListRunning", jobIDs(must(b.s.JobListRunning(ctx))(t)), []int64{j1.ID, j3.ID})
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
	set := func(id int64, from, to string) {
		t.Helper()
		if !must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: id, From: from, To: to, Now: b.now}))(t) {
			t.Fatalf("ItemSetState(%d %s→%s) = false", id, from, to)
		}
	}
	for _, id := range []int64{r1.ID, r2.ID} {
		set(id, store.ItemWritten, store.ItemProcessed)
	}
	if !open() {
		t.Error("processed items: JobHasOpenItems = false")
	}
	set(r1.ID, store.ItemProcessed, store.ItemIngested)
	if !open() {
		t.Error("one item still processed: JobHasOpenItems = false")
	}
	set(r2.ID, store.ItemProcessed, store.ItemIngested)
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
	c := 100.0
	must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: r2.ID, From: store.ItemWritten, To: store.ItemProcessed, Now: b.now, Colored: &c}))(t)
	p := must(b.s.JobProgress(ctx, j.ID))(t)
	if p.Total != 300 || p.Colored != 125 {
		t.Errorf("JobProgress = total %v colored %v, want 300 125", p.Total, p.Colored)
	}
	if want := map[string]int{store.ItemWritten: 2, store.ItemProcessed: 1}; !mapsEqual(p.Items, want) {
		t.Errorf("JobProgress.Items = %v, want %v", p.Items, want)
	}
	empty := must(b.s.JobProgress(ctx, b.job("").ID))(t)
	if empty.Total != 0 || empty.Colored != 0 || len(empty.Items) != 0 || empty.Items == nil {
		t.Errorf("JobProgress of an empty job = %+v, want zeros and an empty map", empty)
	}
}

func mapsEqual(a, b map[string]int) bool {
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

func testItemInsert(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	text := "hello"
	p := store.ItemInsertParams{
		JobID: j.ID, Ordinal: 0, Depth: 0, SortKey: "0000", Name: "a.zip", ContentType: "application/zip",
		BlobSHA256: "abc", Size: 42, Metadata: []byte(`{"m":1}`), Options: []byte(`{"ocr":true}`), Text: &text,
		ThumbnailSHA: "th", ThumbnailType: "image/jpeg", RangeLo: 10, RangeLen: 90, Now: b.now,
	}
	root, inserted, err := b.s.ItemInsert(ctx, p)
	mustOK(t, err)
	if !inserted {
		t.Error("first ItemInsert: inserted = false")
	}
	if root.ID <= 0 || root.RootID != root.ID || root.ParentID != 0 || root.JobID != j.ID || root.Step != "" {
		t.Errorf("root ids: id %d root %d parent %d job %d step %q", root.ID, root.RootID, root.ParentID, root.JobID, root.Step)
	}
	if root.State != store.ItemWritten || root.Name != "a.zip" || root.ContentType != "application/zip" || root.BlobSHA256 != "abc" ||
		root.Size != 42 || !root.HasText || root.ThumbnailSHA != "th" || root.ThumbnailType != "image/jpeg" || root.SortKey != "0000" ||
		root.RangeLo != 10 || root.RangeLen != 90 || root.Share != 90 || root.Colored != 0 || root.NChildren != 0 || root.Error != "" {
		t.Errorf("root = %+v", root)
	}
	checkJSON(t, "Metadata", root.Metadata, `{"m":1}`)
	checkJSON(t, "Options", root.Options, `{"ocr":true}`)
	checkTime(t, "CreatedAt", root.CreatedAt, b.now)

	// Replay: same key, different content; the stored item is returned unchanged.
	replay := p
	replay.Name, replay.BlobSHA256, replay.Now = "other", "def", b.at(time.Hour)
	again, inserted, err := b.s.ItemInsert(ctx, replay)
	mustOK(t, err)
	if inserted || again.ID != root.ID || again.Name != "a.zip" || again.BlobSHA256 != "abc" || again.RootID != root.ID {
		t.Errorf("replayed ItemInsert = %d %q %q inserted=%v, want %d a.zip abc false", again.ID, again.Name, again.BlobSHA256, inserted, root.ID)
	}
	checkTime(t, "replayed CreatedAt", again.CreatedAt, b.now)
	if got := b.getItem(root.ID); got.Text != "hello" || !got.HasText {
		t.Errorf("ItemGet text = %q (has %v), want hello", got.Text, got.HasText)
	}

	// Children: keyed by (parent, step, ordinal); no text means HasText false.
	cp := store.ItemInsertParams{JobID: j.ID, ParentID: root.ID, RootID: root.ID, Step: "unpack", Ordinal: 0, Depth: 1, SortKey: "0000/0000", Name: "a.zip/x", RangeLo: 10, RangeLen: 30, Now: b.now}
	c1, ins1, err := b.s.ItemInsert(ctx, cp)
	mustOK(t, err)
	cp2 := cp
	cp2.Step = "attachments"
	c2, ins2, err := b.s.ItemInsert(ctx, cp2)
	mustOK(t, err)
	c1again, ins3, err := b.s.ItemInsert(ctx, cp)
	mustOK(t, err)
	if !ins1 || !ins2 || ins3 || c1.ID == c2.ID || c1again.ID != c1.ID {
		t.Errorf("children: %d(%v) %d(%v) replay %d(%v)", c1.ID, ins1, c2.ID, ins2, c1again.ID, ins3)
	}
	if c1.ParentID != root.ID || c1.RootID != root.ID || c1.Depth != 1 || c1.HasText || c1.Step != "unpack" {
		t.Errorf("child = %+v", c1)
	}
	checkJSON(t, "child default Metadata", c1.Metadata, `{}`)
	if got := b.getItem(c1.ID); got.HasText || got.Text != "" {
		t.Errorf("child without text: HasText %v Text %q", got.HasText, got.Text)
	}
	// The same ordinal under another job is another item.
	other, ins, err := b.s.ItemInsert(ctx, store.ItemInsertParams{JobID: b.job("").ID, Ordinal: 0, SortKey: "0000", Name: "a.zip", Now: b.now})
	mustOK(t, err)
	if !ins || other.ID == root.ID || other.RootID != other.ID {
		t.Errorf("root of another job = %d (inserted %v, root %d), want a new root", other.ID, ins, other.RootID)
	}
	// ItemLock returns the current row inside a transaction.
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		it, err := x.ItemLock(ctx, c1.ID)
		if err != nil {
			return err
		}
		if it.ID != c1.ID || it.Name != "a.zip/x" {
			return fmt.Errorf("ItemLock = %d %q", it.ID, it.Name)
		}
		_, err = x.ItemLock(ctx, 1<<40)
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("ItemLock(missing): error = %v, want store.ErrNotFound", err)
		}
		return nil
	}))
}

func testItemList(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	r0, r1 := b.root(j.ID, 0, "0000"), b.root(j.ID, 1, "0001")
	c00 := b.child(r0, "unpack", 0)
	c01 := b.child(r0, "unpack", 1)
	c10 := b.child(r1, "unpack", 0)
	b.root(b.job("").ID, 0, "0000") // another job's item
	text := "txt"
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: c01.ID, Text: &text, Error: "bad"}))
	must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: c10.ID, From: store.ItemWritten, To: store.ItemProcessed, Now: b.now}))(t)

	zero := int64(0)
	for _, tc := range []struct {
		name string
		p    store.ItemListParams
		want []*store.Item
	}{
		{"all in tree order", store.ItemListParams{}, []*store.Item{r0, c00, c01, r1, c10}},
		{"roots", store.ItemListParams{ParentID: &zero}, []*store.Item{r0, r1}},
		{"children of r0", store.ItemListParams{ParentID: &r0.ID}, []*store.Item{c00, c01}},
		{"processed", store.ItemListParams{States: []string{store.ItemProcessed}}, []*store.Item{c10}},
		{"two states", store.ItemListParams{States: []string{store.ItemProcessed, store.ItemWritten}, Limit: 2}, []*store.Item{r0, c00}},
		{"after sort key", store.ItemListParams{AfterSort: c00.SortKey, Limit: 2}, []*store.Item{c01, r1}},
		{"only errored", store.ItemListParams{OnlyErrored: true}, []*store.Item{c01}},
	} {
		tc.p.JobID = j.ID
		checkIDs(t, "ItemList "+tc.name, itemIDs(must(b.s.ItemList(ctx, tc.p))(t)), itemIDs(tc.want))
	}
	for _, with := range []bool{false, true} {
		got := must(b.s.ItemList(ctx, store.ItemListParams{JobID: j.ID, OnlyErrored: true, WithText: with}))(t)
		if len(got) != 1 || !got[0].HasText || got[0].Error != "bad" {
			t.Fatalf("ItemList(errored, WithText %v) = %+v", with, got)
		}
		if want := map[bool]string{false: "", true: "txt"}[with]; got[0].Text != want {
			t.Errorf("ItemList(WithText %v).Text = %q, want %q", with, got[0].Text, want)
		}
	}
}

func testItemSetState(t *testing.T, b *bundle) {
	ctx := t.Context()
	it := b.root(b.job("").ID, 0, "0")
	if must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: it.ID, From: store.ItemProcessed, To: store.ItemIngested, Now: b.now}))(t) {
		t.Error("ItemSetState from the wrong state = true")
	}
	if !must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: it.ID, From: store.ItemWritten, To: store.ItemProcessed, Now: b.now}))(t) {
		t.Error("ItemSetState(written→processed) = false")
	}
	if got := b.getItem(it.ID); got.State != store.ItemProcessed || got.Colored != 0 {
		t.Errorf("after processed: %s colored %v", got.State, got.Colored)
	}
	c := 77.5
	if !must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: it.ID, From: store.ItemProcessed, To: store.ItemIngested, Now: b.now, Colored: &c}))(t) {
		t.Error("ItemSetState(processed→ingested) = false")
	}
	if got := b.getItem(it.ID); got.State != store.ItemIngested || got.Colored != 77.5 {
		t.Errorf("after ingested: %s colored %v, want ingested 77.5", got.State, got.Colored)
	}
	if must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: 1 << 40, From: store.ItemWritten, To: store.ItemProcessed, Now: b.now}))(t) {
		t.Error("ItemSetState of a missing item = true")
	}
}

func testItemUpdateSetOnce(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	it := b.root(j.ID, 0, "0")
	first, second := "first", "second"
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, Text: &first, ThumbnailSHA: "t1", ThumbnailType: "image/png", Error: "e1", ContentType: "a/b"}))
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, Text: &second, ThumbnailSHA: "t2", ThumbnailType: "image/jpeg", Error: "e2", ContentType: "c/d"}))
	got := b.getItem(it.ID)
	if got.Text != "first" || !got.HasText || got.ThumbnailSHA != "t1" || got.ThumbnailType != "image/png" || got.Error != "e1" {
		t.Errorf("set-once fields = text %q thumb %q %q error %q, want first t1 image/png e1", got.Text, got.ThumbnailSHA, got.ThumbnailType, got.Error)
	}
	if got.ContentType != "c/d" {
		t.Errorf("ContentType = %q, want the latest c/d", got.ContentType)
	}
	// Empty values change nothing.
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID}))
	if again := b.getItem(it.ID); again.ContentType != "c/d" || again.Text != "first" || again.Error != "e1" {
		t.Errorf("empty ItemUpdate changed the item: %+v", again)
	}
	// Empty text counts as set.
	empty := ""
	it2 := b.root(j.ID, 1, "1")
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it2.ID, Text: &empty}))
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it2.ID, Text: &second}))
	if got := b.getItem(it2.ID); !got.HasText || got.Text != "" {
		t.Errorf("after empty text then %q: HasText %v Text %q, want true \"\"", second, got.HasText, got.Text)
	}
	// Text given at insert is already set.
	p := store.ItemInsertParams{JobID: j.ID, Ordinal: 2, SortKey: "2", Name: "t", Text: &first, Now: b.now}
	it3, _, err := b.s.ItemInsert(ctx, p)
	mustOK(t, err)
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it3.ID, Text: &second}))
	if got := b.getItem(it3.ID); got.Text != "first" {
		t.Errorf("text set at insert then updated = %q, want first", got.Text)
	}
}

// testItemUpdateMetadataMerge pins the merge rule: the stored metadata is applied as a JSON merge
// patch (RFC 7386) over the new metadata, so keys the item already has win, at every depth.
func testItemUpdateMetadataMerge(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	for i, tc := range []struct {
		name, stored, update, want string
	}{
		{"new keys added", `{}`, `{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`},
		{"existing keys win", `{"a":"user","keep":true}`, `{"a":"action","b":2}`, `{"a":"user","keep":true,"b":2}`},
		{"nested objects merge, existing wins", `{"o":{"x":1,"deep":{"p":1}}}`, `{"o":{"x":2,"y":3,"deep":{"p":2,"q":2}}}`, `{"o":{"x":1,"y":3,"deep":{"p":1,"q":2}}}`},
		{"arrays are values", `{"l":[1,2]}`, `{"l":[3],"m":[4]}`, `{"l":[1,2],"m":[4]}`},
		{"stored scalar beats new object", `{"o":5}`, `{"o":{"x":1}}`, `{"o":5}`},
		{"types survive", `{}`, `{"t":true,"f":false,"n":null,"i":12,"r":1.5,"s":"é"}`, `{"t":true,"f":false,"n":null,"i":12,"r":1.5,"s":"é"}`},
	} {
		it, _, err := b.s.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: i, SortKey: fmt.Sprint(i), Name: tc.name, Metadata: []byte(tc.stored), Now: b.now})
		mustOK(t, err)
		mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, Metadata: []byte(tc.update)}))
		checkJSON(t, "metadata after merge: "+tc.name, b.getItem(it.ID).Metadata, tc.want)
		// Replaying the same update is a no-op.
		mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, Metadata: []byte(tc.update)}))
		checkJSON(t, "metadata after replay: "+tc.name, b.getItem(it.ID).Metadata, tc.want)
	}
}

func testItemColored(t *testing.T, b *bundle) {
	ctx := t.Context()
	it := b.root(b.job("").ID, 0, "0") // range 100, share 100
	mustOK(t, b.s.ItemAddChild(ctx, it.ID, 40))
	got := b.getItem(it.ID)
	if got.NChildren != 1 || got.Share != 60 || got.RangeLen != 100 {
		t.Errorf("after ItemAddChild(40): n %d share %v range %v, want 1 60 100", got.NChildren, got.Share, got.RangeLen)
	}
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, AddColored: 0.5}))
	if got := b.getItem(it.ID); got.Colored != 50 {
		t.Errorf("colored after 0.5 = %v, want 50 (a fraction of the range)", got.Colored)
	}
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, AddColored: 0.5}))
	if got := b.getItem(it.ID); got.Colored != 60 {
		t.Errorf("colored after 0.5 more = %v, want 60 (capped at share)", got.Colored)
	}
	mustOK(t, b.s.ItemAddChild(ctx, it.ID, 100))
	if got := b.getItem(it.ID); got.NChildren != 2 || got.Share != 0 {
		t.Errorf("after ItemAddChild(100): n %d share %v, want 2 0 (never negative)", got.NChildren, got.Share)
	}
}

func testItemChildren(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	r := b.root(j.ID, 0, "0")
	c1 := b.child(r, "unpack", 1)
	c0 := b.child(r, "unpack", 0)
	a0 := b.child(r, "attach", 0)
	b.child(c0, "unpack", 0) // grandchild
	checkIDs(t, "ItemListChildren(unpack)", itemIDs(must(b.s.ItemListChildren(ctx, r.ID, "unpack"))(t)), []int64{c0.ID, c1.ID})
	checkIDs(t, "ItemListChildren(attach)", itemIDs(must(b.s.ItemListChildren(ctx, r.ID, "attach"))(t)), []int64{a0.ID})
	checkIDs(t, "ItemListChildren(none)", itemIDs(must(b.s.ItemListChildren(ctx, r.ID, "nope"))(t)), nil)

	has := func(states ...string) bool {
		t.Helper()
		return must(b.s.ItemHasChildInState(ctx, r.ID, states))(t)
	}
	if !has(store.ItemWritten) || has(store.ItemProcessed) || has(store.ItemIngested, store.ItemCreated) {
		t.Error("ItemHasChildInState with all children written")
	}
	for _, c := range []*store.Item{c0, c1, a0} {
		must(b.s.ItemSetState(ctx, store.ItemSetStateParams{ID: c.ID, From: store.ItemWritten, To: store.ItemProcessed, Now: b.now}))(t)
	}
	if has(store.ItemCreated, store.ItemWritten) || !has(store.ItemWritten, store.ItemProcessed) {
		t.Error("ItemHasChildInState with all children processed (the grandchild is not a child)")
	}
}

func testEvents(t *testing.T, b *bundle) {
	ctx := t.Context()
	it := b.root(b.job("").ID, 0, "0")
	other := b.root(b.job("").ID, 0, "0")
	for _, tc := range []struct {
		name string
		want bool
	}{{"start", true}, {"detected.pdf", true}, {"start", false}, {"detected.pdf", false}} {
		if got := must(b.s.EventInsert(ctx, it.ID, tc.name, b.now))(t); got != tc.want {
			t.Errorf("EventInsert(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	must(b.s.EventInsert(ctx, other.ID, "other", b.now))(t)
	got := must(b.s.EventListByItem(ctx, it.ID))(t)
	slices.Sort(got)
	if want := []string{"detected.pdf", "start"}; !slices.Equal(got, want) {
		t.Errorf("EventListByItem = %v, want %v", got, want)
	}
	if got := must(b.s.EventListByItem(ctx, 1<<40))(t); len(got) != 0 {
		t.Errorf("EventListByItem(missing) = %v, want none", got)
	}
}

func testTaskInsert(t *testing.T, b *bundle) {
	ctx := t.Context()
	it := b.root(b.job("").ID, 0, "0007")
	p := store.TaskInsertParams{JobID: it.JobID, ItemID: it.ID, Step: "detect", Action: "detect", Queue: "cpu", MaxAttempts: 3, SortKey: it.SortKey, ProgressWeight: 0.25, Now: b.now}
	if !must(b.s.TaskInsert(ctx, p))(t) {
		t.Error("first TaskInsert = false")
	}
	replay := p
	replay.Action, replay.Queue, replay.MaxAttempts, replay.Now = "other", "io", 9, b.at(time.Hour)
	if must(b.s.TaskInsert(ctx, replay))(t) {
		t.Error("replayed TaskInsert = true")
	}
	ts := must(b.s.TaskListByItem(ctx, it.ID))(t)
	if len(ts) != 1 {
		t.Fatalf("TaskListByItem = %d tasks, want 1", len(ts))
	}
	tk := b.getTask(ts[0].ID)
	if tk.JobID != it.JobID || tk.ItemID != it.ID || tk.Step != "detect" || tk.Action != "detect" || tk.Queue != "cpu" ||
		tk.State != store.TaskReady || tk.Attempt != 0 || tk.MaxAttempts != 3 || tk.SortKey != "0007" || tk.ProgressWeight != 0.25 ||
		tk.LeaseOwner != "" || tk.Error != "" {
		t.Errorf("task = %+v", tk)
	}
	checkTime(t, "CreatedAt", tk.CreatedAt, b.now)
	checkTime(t, "RunAfter", tk.RunAfter, time.Time{})
	checkTime(t, "LeaseExpires", tk.LeaseExpires, time.Time{})
	checkTime(t, "StartedAt", tk.StartedAt, time.Time{})
	checkTime(t, "FinishedAt", tk.FinishedAt, time.Time{})
	// Another step of the same item is another task.
	p.Step = "pdf"
	if !must(b.s.TaskInsert(ctx, p))(t) {
		t.Error("TaskInsert of a second step = false")
	}
}

func testTaskLeaseOrder(t *testing.T, b *bundle) {
	older, newer := b.job(""), b.job("")
	// Insert the newer job's task first: age is the job's, not the task's.
	n0 := b.task(b.s, b.root(newer.ID, 0, "0000"), "s")
	r0 := b.root(older.ID, 0, "0000")
	r1 := b.root(older.ID, 1, "0001")
	t1 := b.task(b.s, r1, "s")
	c := b.child(r0, "unpack", 0) // 0000/0000: sorts between r0 and r1
	tc := b.task(b.s, c, "s")
	t0 := b.task(b.s, r0, "s")
	b.taskIn(b.s, r0, "elsewhere", "other-queue")

	before := b.now.Add(-time.Second)
	got := b.lease("q", 10, "w1", b.now)
	checkIDs(t, "lease order", taskIDs(got), []int64{t0.ID, tc.ID, t1.ID, n0.ID})
	for _, tk := range got {
		if tk.State != store.TaskRunning || tk.Attempt != 1 || tk.LeaseOwner != "w1" || tk.Queue != "q" {
			t.Errorf("leased task = %+v", tk)
		}
		checkTime(t, "LeaseExpires", tk.LeaseExpires, b.now.Add(time.Minute))
		checkTime(t, "StartedAt", tk.StartedAt, b.now)
	}
	if stored := b.getTask(t0.ID); stored.State != store.TaskRunning || stored.Attempt != 1 || stored.LeaseOwner != "w1" {
		t.Errorf("stored leased task = %+v", stored)
	}
	if again := b.lease("q", 10, "w2", b.now); len(again) != 0 {
		t.Errorf("second lease = %v, want none", taskIDs(again))
	}
	if other := b.lease("other-queue", 10, "w2", before); len(other) != 1 || other[0].Step != "elsewhere" {
		t.Errorf("lease of other-queue = %v", taskIDs(other))
	}
}

func testTaskLeaseLimit(t *testing.T, b *bundle) {
	j := b.job("")
	var want []int64
	for i := range 5 {
		want = append(want, b.task(b.s, b.root(j.ID, i, fmt.Sprintf("%04d", i)), "s").ID)
	}
	var got []int64
	for _, n := range []int{2, 2, 1, 0} {
		leased := b.lease("q", 2, "w", b.now)
		if len(leased) != n {
			t.Fatalf("lease with limit 2 = %d tasks, want %d", len(leased), n)
		}
		got = append(got, taskIDs(leased)...)
	}
	checkIDs(t, "leased in batches", got, want)
}

func testTaskLeaseRunAfter(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "0"), "s")
	b.lease("q", 1, "w", b.now)
	later := b.at(time.Minute)
	if !must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 1, State: store.TaskReady, Error: "retry me", RunAfter: later, Now: b.now}))(t) {
		t.Fatal("TaskFinish(ready) = false")
	}
	got := b.getTask(tk.ID)
	if got.State != store.TaskReady || got.Attempt != 1 || got.Error != "retry me" || got.LeaseOwner != "" {
		t.Errorf("after retry: %+v", got)
	}
	checkTime(t, "RunAfter", got.RunAfter, later)
	checkTime(t, "FinishedAt of a retry", got.FinishedAt, time.Time{})
	checkTime(t, "LeaseExpires of a retry", got.LeaseExpires, time.Time{})
	if n := b.lease("q", 1, "w", later.Add(-time.Microsecond)); len(n) != 0 {
		t.Errorf("lease before run_after = %v, want none", taskIDs(n))
	}
	again := b.lease("q", 1, "w", later) // run_after <= now
	if len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("lease at run_after = %+v, want the task at attempt 2", again)
	}
}

func testTaskFinishGuard(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	finish := func(id int64, attempt int, state, msg string, now time.Time) bool {
		t.Helper()
		return must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: id, Attempt: attempt, State: state, Error: msg, Now: now}))(t)
	}
	tk := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	if finish(tk.ID, 0, store.TaskComplete, "", b.now) {
		t.Error("TaskFinish of a ready task = true")
	}
	b.lease("q", 1, "w", b.now)
	if finish(tk.ID, 2, store.TaskComplete, "", b.now) {
		t.Error("TaskFinish with a future attempt = true")
	}
	if !finish(tk.ID, 1, store.TaskComplete, "", b.at(time.Second)) {
		t.Error("TaskFinish(complete) = false")
	}
	if finish(tk.ID, 1, store.TaskFailed, "late", b.at(time.Hour)) {
		t.Error("second TaskFinish = true")
	}
	got := b.getTask(tk.ID)
	if got.State != store.TaskComplete || got.Attempt != 1 || got.Error != "" || got.LeaseOwner != "" {
		t.Errorf("completed task = %+v", got)
	}
	checkTime(t, "FinishedAt", got.FinishedAt, b.at(time.Second))
	checkTime(t, "LeaseExpires", got.LeaseExpires, time.Time{})

	// A stale attempt (its lease was lost and the task re-leased) cannot finish the new one.
	tk2 := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	b.lease("q", 1, "w1", b.now)
	if !finish(tk2.ID, 1, store.TaskReady, "crashed", b.now) {
		t.Fatal("TaskFinish(ready) = false")
	}
	b.lease("q", 1, "w2", b.now)
	if finish(tk2.ID, 1, store.TaskComplete, "", b.now) {
		t.Error("stale attempt 1 finished attempt 2")
	}
	if !finish(tk2.ID, 2, store.TaskFailed, "gave up", b.at(time.Minute)) {
		t.Error("TaskFinish(failed) of attempt 2 = false")
	}
	got = b.getTask(tk2.ID)
	if got.State != store.TaskFailed || got.Error != "gave up" || got.Attempt != 2 {
		t.Errorf("failed task = %+v", got)
	}
	checkTime(t, "FinishedAt", got.FinishedAt, b.at(time.Minute))
	// Canceled is a final state too.
	tk3 := b.task(b.s, b.root(j.ID, 2, "2"), "s")
	b.lease("q", 1, "w", b.now)
	if !finish(tk3.ID, 1, store.TaskCanceled, "canceled", b.now) || b.getTask(tk3.ID).State != store.TaskCanceled {
		t.Error("TaskFinish(canceled) did not cancel")
	}
}

func testTaskFinishRefund(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "0"), "s")
	b.lease("q", 1, "w", b.now)
	if !must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 1, State: store.TaskReady, RunAfter: b.now, Refund: true, Now: b.now}))(t) {
		t.Fatal("TaskFinish(ready, refund) = false")
	}
	if got := b.getTask(tk.ID); got.State != store.TaskReady || got.Attempt != 0 {
		t.Errorf("after refund: %s attempt %d, want ready 0", got.State, got.Attempt)
	}
	if again := b.lease("q", 1, "w", b.now); len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("lease after refund = %+v, want attempt 1 again", again)
	}
	// A refunded attempt number can finish only the attempt that now runs.
	if must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 0, State: store.TaskComplete, Now: b.now}))(t) {
		t.Error("TaskFinish with attempt 0 after refund and re-lease = true")
	}
}

func testTaskRenewLeases(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	a1 := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	a2 := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	done := b.task(b.s, b.root(j.ID, 2, "2"), "s")
	bt := b.task(b.s, b.root(j.ID, 3, "3"), "s")
	ready := b.task(b.s, b.root(j.ID, 4, "4"), "s")
	b.lease("q", 3, "A", b.now) // a1, a2, done
	b.lease("q", 1, "B", b.now)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: done.ID, Attempt: 1, State: store.TaskComplete, Now: b.now}))(t)
	until := b.at(time.Hour)
	if n := must(b.s.TaskRenewLeases(ctx, "A", until))(t); n != 2 {
		t.Errorf("TaskRenewLeases(A) = %d, want 2", n)
	}
	for _, tc := range []struct {
		tk   *store.Task
		want time.Time
	}{{a1, until}, {a2, until}, {bt, b.at(time.Minute)}, {done, time.Time{}}, {ready, time.Time{}}} {
		checkTime(t, fmt.Sprintf("LeaseExpires of task %d", tc.tk.ID), b.getTask(tc.tk.ID).LeaseExpires, tc.want)
	}
	if n := must(b.s.TaskRenewLeases(ctx, "nobody", until))(t); n != 0 {
		t.Errorf("TaskRenewLeases(nobody) = %d, want 0", n)
	}
}

func testTaskListExpired(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	var ts []*store.Task
	for i := range 5 {
		ts = append(ts, b.task(b.s, b.root(j.ID, i, fmt.Sprint(i)), "s"))
	}
	// Leases expiring at +3m, +1m, +2m, +10m, and one finished.
	for i, until := range []time.Duration{3, 1, 2, 10, 1} {
		leased := must(b.s.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: 1, Owner: "w", Now: b.now, LeaseUntil: b.at(until * time.Minute)}))(t)
		if len(leased) != 1 || leased[0].ID != ts[i].ID {
			t.Fatalf("lease %d = %v", i, taskIDs(leased))
		}
	}
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: ts[4].ID, Attempt: 1, State: store.TaskComplete, Now: b.now}))(t)
	at := b.at(3 * time.Minute) // +3m itself is not expired yet
	checkIDs(t, "TaskListExpired", taskIDs(must(b.s.TaskListExpired(ctx, at, 10))(t)), []int64{ts[1].ID, ts[2].ID})
	checkIDs(t, "TaskListExpired limit 1", taskIDs(must(b.s.TaskListExpired(ctx, at, 1))(t)), []int64{ts[1].ID})
	checkIDs(t, "TaskListExpired later", taskIDs(must(b.s.TaskListExpired(ctx, b.at(time.Hour), 10))(t)), []int64{ts[1].ID, ts[2].ID, ts[0].ID, ts[3].ID})
	checkIDs(t, "TaskListExpired before any", taskIDs(must(b.s.TaskListExpired(ctx, b.now, 10))(t)), nil)
	if got := must(b.s.TaskListExpired(ctx, at, 10))(t); len(got) > 0 && (got[0].State != store.TaskRunning || got[0].LeaseOwner != "w") {
		t.Errorf("expired task = %+v", got[0])
	}
}

func testTaskLists(t *testing.T, b *bundle) {
	ctx := t.Context()
	j, other := b.job(""), b.job("")
	it := b.root(j.ID, 0, "0")
	s1, s2, s3 := b.task(b.s, it, "s1"), b.task(b.s, it, "s2"), b.task(b.s, it, "s3")
	s4 := b.task(b.s, b.root(j.ID, 1, "1"), "s1")
	b.task(b.s, b.root(other.ID, 0, "0"), "s1")
	b.lease("q", 1, "w", b.now) // s1
	leased2 := b.lease("q", 1, "w", b.now)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: leased2[0].ID, Attempt: 1, State: store.TaskComplete, Now: b.now}))(t) // s2

	if n := must(b.s.TaskCountActive(ctx, it.ID))(t); n != 2 {
		t.Errorf("TaskCountActive = %d, want 2 (running s1, ready s3)", n)
	}
	checkIDs(t, "TaskListByItem", taskIDs(must(b.s.TaskListByItem(ctx, it.ID))(t)), []int64{s1.ID, s2.ID, s3.ID})
	checkIDs(t, "TaskListByJob", taskIDs(must(b.s.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID}))(t)), []int64{s1.ID, s2.ID, s3.ID, s4.ID})
	checkIDs(t, "TaskListByJob ready", taskIDs(must(b.s.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, State: store.TaskReady}))(t)), []int64{s3.ID, s4.ID})
	checkIDs(t, "TaskListByJob page", taskIDs(must(b.s.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, AfterID: s1.ID, Limit: 2}))(t)), []int64{s2.ID, s3.ID})
	stats := must(b.s.TaskStats(ctx, j.ID))(t)
	if want := map[string]int{store.TaskRunning: 1, store.TaskComplete: 1, store.TaskReady: 2}; !mapsEqual(stats, want) {
		t.Errorf("TaskStats = %v, want %v", stats, want)
	}
	if empty := must(b.s.TaskStats(ctx, 1<<40))(t); len(empty) != 0 {
		t.Errorf("TaskStats of a missing job = %v, want empty", empty)
	}
}

func testTaskCancelJob(t *testing.T, b *bundle) {
	ctx := t.Context()
	j, other := b.job(""), b.job("")
	running := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	done := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	b.lease("q", 2, "w", b.now)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: done.ID, Attempt: 1, State: store.TaskComplete, Now: b.now}))(t)
	ready := b.task(b.s, b.root(j.ID, 2, "2"), "s")
	otherReady := b.task(b.s, b.root(other.ID, 0, "0"), "s")

	ids := must(b.s.TaskCancelJob(ctx, j.ID, "canceled", b.at(time.Second)))(t)
	checkIDs(t, "TaskCancelJob running ids", ids, []int64{running.ID})
	got := b.getTask(ready.ID)
	if got.State != store.TaskCanceled || got.Error != "canceled" {
		t.Errorf("canceled task = %s %q", got.State, got.Error)
	}
	checkTime(t, "FinishedAt of canceled", got.FinishedAt, b.at(time.Second))
	for _, tc := range []struct {
		tk   *store.Task
		want string
	}{{running, store.TaskRunning}, {done, store.TaskComplete}, {otherReady, store.TaskReady}} {
		if s := b.getTask(tc.tk.ID).State; s != tc.want {
			t.Errorf("task %d after cancel = %s, want %s", tc.tk.ID, s, tc.want)
		}
	}
	// Replaying the cancel changes nothing more.
	checkIDs(t, "second TaskCancelJob", must(b.s.TaskCancelJob(ctx, j.ID, "again", b.at(time.Hour)))(t), []int64{running.ID})
	if got := b.getTask(ready.ID); got.Error != "canceled" {
		t.Errorf("replayed cancel rewrote the error: %q", got.Error)
	}
}

func testTaskNextRunAfter(t *testing.T, b *bundle) {
	ctx := t.Context()
	checkTime(t, "TaskNextRunAfter with no tasks", must(b.s.TaskNextRunAfter(ctx))(t), time.Time{})
	j := b.job("")
	t1 := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	t2 := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	b.lease("q", 2, "w", b.now)
	checkTime(t, "TaskNextRunAfter with only running tasks", must(b.s.TaskNextRunAfter(ctx))(t), time.Time{})
	for _, tc := range []struct {
		tk *store.Task
		d  time.Duration
	}{{t1, time.Hour}, {t2, time.Minute}} {
		must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tc.tk.ID, Attempt: 1, State: store.TaskReady, RunAfter: b.at(tc.d), Now: b.now}))(t)
	}
	checkTime(t, "TaskNextRunAfter", must(b.s.TaskNextRunAfter(ctx))(t), b.at(time.Minute))
}

func testAttempts(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "0"), "s")
	a2 := store.AttemptInsertParams{TaskID: tk.ID, Attempt: 2, Owner: "w2", StartedAt: b.at(time.Minute), FinishedAt: b.at(2 * time.Minute), Error: "boom", Stack: "goroutine 1"}
	a1 := store.AttemptInsertParams{TaskID: tk.ID, Attempt: 1, Owner: "w1", StartedAt: b.now, FinishedAt: b.at(time.Second), Error: "timeout"}
	mustOK(t, b.s.AttemptInsert(ctx, a2))
	mustOK(t, b.s.AttemptInsert(ctx, a1))
	replay := a1
	replay.Error, replay.Owner = "other", "w9"
	mustOK(t, b.s.AttemptInsert(ctx, replay))
	got := must(b.s.AttemptList(ctx, tk.ID))(t)
	if len(got) != 2 {
		t.Fatalf("AttemptList = %d attempts, want 2", len(got))
	}
	for i, want := range []store.Attempt{a1, a2} {
		g := got[i]
		if g.TaskID != want.TaskID || g.Attempt != want.Attempt || g.Owner != want.Owner || g.Error != want.Error || g.Stack != want.Stack {
			t.Errorf("attempt %d = %+v, want %+v", i, g, want)
		}
		checkTime(t, "StartedAt", g.StartedAt, want.StartedAt)
		checkTime(t, "FinishedAt", g.FinishedAt, want.FinishedAt)
	}
	if none := must(b.s.AttemptList(ctx, 1<<40))(t); len(none) != 0 {
		t.Errorf("AttemptList(missing) = %v", none)
	}
}

func testOutputs(t *testing.T, b *bundle) {
	ctx := t.Context()
	j1, j2 := b.job(""), b.job("")
	i1, i2 := b.root(j1.ID, 0, "0"), b.root(j1.ID, 1, "1")
	i3 := b.root(j2.ID, 0, "0")
	put := func(it *store.Item, kind, value string) {
		t.Helper()
		mustOK(t, b.s.OutputPut(ctx, store.OutputPutParams{ItemID: it.ID, JobID: it.JobID, Kind: kind, Value: []byte(value), Now: b.now}))
	}
	put(i2, "document", `{"n":2}`)
	put(i1, "error", `{"e":1}`)
	put(i1, "document", `{"n":1}`)
	put(i3, "document", `{"n":3}`)
	put(i1, "document", `{"n":"replayed"}`) // first write wins

	type key struct {
		item int64
		kind string
	}
	list := func(p store.OutputListParams) []key {
		t.Helper()
		var out []key
		for _, o := range must(b.s.OutputList(ctx, p))(t) {
			out = append(out, key{o.ItemID, o.Kind})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    store.OutputListParams
		want []key
	}{
		{"job 1", store.OutputListParams{JobID: j1.ID}, []key{{i1.ID, "document"}, {i1.ID, "error"}, {i2.ID, "document"}}},
		{"job 1 documents", store.OutputListParams{JobID: j1.ID, Kind: "document"}, []key{{i1.ID, "document"}, {i2.ID, "document"}}},
		{"all documents", store.OutputListParams{Kind: "document"}, []key{{i1.ID, "document"}, {i2.ID, "document"}, {i3.ID, "document"}}},
		{"page 1", store.OutputListParams{Kind: "document", Limit: 2}, []key{{i1.ID, "document"}, {i2.ID, "document"}}},
		{"page 2", store.OutputListParams{Kind: "document", AfterItem: i2.ID, Limit: 2}, []key{{i3.ID, "document"}}},
		{"job 2 errors", store.OutputListParams{JobID: j2.ID, Kind: "error"}, nil},
	} {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("OutputList %s = %v, want %v", tc.name, got, tc.want)
		}
	}
	got := must(b.s.OutputList(ctx, store.OutputListParams{JobID: j1.ID, Kind: "document", Limit: 1}))(t)
	if len(got) != 1 || got[0].JobID != j1.ID {
		t.Fatalf("OutputList = %+v", got)
	}
	checkBytes(t, "output value", got[0].Value, `{"n":1}`)
	checkTime(t, "output CreatedAt", got[0].CreatedAt, b.now)
}

func testCache(t *testing.T, b *bundle) {
	ctx := t.Context()
	_, err := b.s.CacheGet(ctx, "k")
	checkNotFound(t, "CacheGet(missing)", err)
	mustOK(t, b.s.CachePut(ctx, "k", []byte(`{"pages":3}`), b.now))
	mustOK(t, b.s.CachePut(ctx, "k", []byte(`{"pages":4}`), b.at(time.Hour))) // first wins
	mustOK(t, b.s.CachePut(ctx, "empty", []byte{}, b.now))
	checkBytes(t, "CacheGet(k)", must(b.s.CacheGet(ctx, "k"))(t), `{"pages":3}`)
	checkBytes(t, "CacheGet(empty)", must(b.s.CacheGet(ctx, "empty"))(t), "")
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		if err := x.CachePut(ctx, "tx", []byte("v"), b.now); err != nil {
			return err
		}
		v, err := x.CacheGet(ctx, "tx")
		if err != nil || string(v) != "v" {
			return fmt.Errorf("CacheGet in tx = %q, %v", v, err)
		}
		return nil
	}))
}

func testBlobIsReferenced(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	sha := func(c byte) string { return string(slices.Repeat([]byte{c}, 64)) }
	_, _, err := b.s.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, SortKey: "0", Name: "x", BlobSHA256: sha('a'), Now: b.now})
	mustOK(t, err)
	it := b.root(j.ID, 1, "1")
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, ThumbnailSHA: sha('b'), ThumbnailType: "image/jpeg"}))
	mustOK(t, b.s.CachePut(ctx, "conv", []byte(`{"pdf":"`+sha('c')+`"}`), b.now))
	for _, tc := range []struct {
		sha  string
		want bool
	}{{sha('a'), true}, {sha('b'), true}, {sha('c'), true}, {sha('d'), false}} {
		if got := must(b.s.BlobIsReferenced(ctx, tc.sha))(t); got != tc.want {
			t.Errorf("BlobIsReferenced(%c…) = %v, want %v", tc.sha[0], got, tc.want)
		}
	}
}

func testNotFound(t *testing.T, b *bundle) {
	ctx := t.Context()
	const missing = int64(1) << 40
	for _, tc := range []struct {
		name string
		fn   func(x store.Executor) error
	}{
		{"WorkflowGet", func(x store.Executor) error { _, err := x.WorkflowGet(ctx, "nope", 1); return err }},
		{"WorkflowGet latest", func(x store.Executor) error { _, err := x.WorkflowGet(ctx, "nope", 0); return err }},
		{"JobGet", func(x store.Executor) error { _, err := x.JobGet(ctx, missing); return err }},
		{"JobGetByKey", func(x store.Executor) error { _, err := x.JobGetByKey(ctx, "nope"); return err }},
		{"JobProgress", func(x store.Executor) error { _, err := x.JobProgress(ctx, missing); return err }},
		{"ItemGet", func(x store.Executor) error { _, err := x.ItemGet(ctx, missing); return err }},
		{"ItemLock", func(x store.Executor) error { _, err := x.ItemLock(ctx, missing); return err }},
		{"TaskGet", func(x store.Executor) error { _, err := x.TaskGet(ctx, missing); return err }},
		{"CacheGet", func(x store.Executor) error { _, err := x.CacheGet(ctx, "nope"); return err }},
	} {
		checkNotFound(t, tc.name, tc.fn(b.s))
		var inTx error
		mustOK(t, b.s.InTx(ctx, func(x store.Executor) error { inTx = tc.fn(x); return nil }))
		checkNotFound(t, tc.name+" in tx", inTx)
	}
}

func testInTxRollback(t *testing.T, b *bundle) {
	ctx := t.Context()
	keep := b.job("keep")
	keepItem := b.root(keep.ID, 0, "0")
	errBoom := errors.New("boom")
	var jobID, itemID, taskID int64
	err := b.s.InTx(ctx, func(x store.Executor) error {
		j, err := x.JobInsert(ctx, store.JobInsertParams{Key: "gone", WorkflowName: "wf", WorkflowVersion: 1, Now: b.now})
		if err != nil {
			return err
		}
		jobID = j.ID
		it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, SortKey: "0", Name: "x", Now: b.now})
		if err != nil {
			return err
		}
		itemID = it.ID
		taskID = b.task(x, it, "s").ID
		if _, err := x.EventInsert(ctx, it.ID, "start", b.now); err != nil {
			return err
		}
		if _, err := x.WorkflowInsert(ctx, store.WorkflowInsertParams{Name: "wf", Digest: "d", Definition: []byte("{}"), Source: []byte("s"), Now: b.now}); err != nil {
			return err
		}
		if err := x.CachePut(ctx, "gone", []byte("v"), b.now); err != nil {
			return err
		}
		if err := x.OutputPut(ctx, store.OutputPutParams{ItemID: it.ID, JobID: j.ID, Kind: "document", Value: []byte("{}"), Now: b.now}); err != nil {
			return err
		}
		mustOK(t, x.ItemUpdate(ctx, store.ItemUpdateParams{ID: keepItem.ID, Error: "set in a rolled back tx", Metadata: []byte(`{"x":1}`)}))
		if ok, err := x.JobSetState(ctx, store.JobSetStateParams{ID: keep.ID, State: store.JobCanceled, Now: b.now}); err != nil || !ok {
			return fmt.Errorf("JobSetState in tx = %v, %v", ok, err)
		}
		return fmt.Errorf("wrapped: %w", errBoom)
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("InTx error = %v, want fn's error", err)
	}
	_, err = b.s.JobGet(ctx, jobID)
	checkNotFound(t, "JobGet of rolled back job", err)
	_, err = b.s.JobGetByKey(ctx, "gone")
	checkNotFound(t, "JobGetByKey of rolled back job", err)
	_, err = b.s.ItemGet(ctx, itemID)
	checkNotFound(t, "ItemGet of rolled back item", err)
	_, err = b.s.TaskGet(ctx, taskID)
	checkNotFound(t, "TaskGet of rolled back task", err)
	_, err = b.s.CacheGet(ctx, "gone")
	checkNotFound(t, "CacheGet of rolled back entry", err)
	_, err = b.s.WorkflowGet(ctx, "wf", 0)
	checkNotFound(t, "WorkflowGet of rolled back workflow", err)
	if evs := must(b.s.EventListByItem(ctx, itemID))(t); len(evs) != 0 {
		t.Errorf("rolled back events: %v", evs)
	}
	if outs := must(b.s.OutputList(ctx, store.OutputListParams{}))(t); len(outs) != 0 {
		t.Errorf("rolled back outputs: %d", len(outs))
	}
	checkIDs(t, "jobs after rollback", jobIDs(must(b.s.JobList(ctx, store.JobListParams{}))(t)), []int64{keep.ID})
	if got := must(b.s.JobGet(ctx, keep.ID))(t); got.State != store.JobRunning {
		t.Errorf("job state after rollback = %s, want running", got.State)
	}
	if got := b.getItem(keepItem.ID); got.Error != "" {
		t.Errorf("item error after rollback = %q", got.Error)
	} else {
		checkJSON(t, "metadata after rollback", got.Metadata, `{}`)
	}
	if n := b.lease("q", 10, "w", b.now); len(n) != 0 {
		t.Errorf("leased %d rolled back tasks", len(n))
	}
	// The store is still usable after a rollback.
	b.job("after")
}

func testInTxReadsOwnWrites(t *testing.T, b *bundle) {
	ctx := t.Context()
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		j, err := x.JobInsert(ctx, store.JobInsertParams{Key: "k", WorkflowName: "wf", WorkflowVersion: 1, Now: b.now})
		if err != nil {
			return err
		}
		if _, err := x.JobGet(ctx, j.ID); err != nil {
			return fmt.Errorf("JobGet in tx: %w", err)
		}
		if _, err := x.JobGetByKey(ctx, "k"); err != nil {
			return fmt.Errorf("JobGetByKey in tx: %w", err)
		}
		text := "t"
		it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, SortKey: "0", Name: "x", Text: &text, Now: b.now})
		if err != nil {
			return err
		}
		if got, err := x.ItemGet(ctx, it.ID); err != nil || got.Text != "t" {
			return fmt.Errorf("ItemGet in tx = %v, %v", got, err)
		}
		if got, err := x.ItemList(ctx, store.ItemListParams{JobID: j.ID}); err != nil || len(got) != 1 {
			return fmt.Errorf("ItemList in tx = %d items, %v", len(got), err)
		}
		tk := b.task(x, it, "s")
		if got, err := x.TaskGet(ctx, tk.ID); err != nil || got.State != store.TaskReady {
			return fmt.Errorf("TaskGet in tx = %v, %v", got, err)
		}
		leased, err := x.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: 5, Owner: "w", Now: b.now, LeaseUntil: b.at(time.Minute)})
		if err != nil || len(leased) != 1 {
			return fmt.Errorf("TaskLease in tx = %d tasks, %v", len(leased), err)
		}
		if ok, err := x.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 1, State: store.TaskComplete, Now: b.now}); err != nil || !ok {
			return fmt.Errorf("TaskFinish in tx = %v, %v", ok, err)
		}
		if st, err := x.TaskStats(ctx, j.ID); err != nil || st[store.TaskComplete] != 1 {
			return fmt.Errorf("TaskStats in tx = %v, %v", st, err)
		}
		if _, err := x.EventInsert(ctx, it.ID, "start", b.now); err != nil {
			return err
		}
		if evs, err := x.EventListByItem(ctx, it.ID); err != nil || len(evs) != 1 {
			return fmt.Errorf("EventListByItem in tx = %v, %v", evs, err)
		}
		if open, err := x.JobHasOpenItems(ctx, j.ID); err != nil || !open {
			return fmt.Errorf("JobHasOpenItems in tx = %v, %v", open, err)
		}
		return nil
	}))
	if got := must(b.s.JobGetByKey(ctx, "k"))(t); got.State != store.JobRunning {
		t.Errorf("committed job = %+v", got)
	}
}

// testConcurrentLease: leasers racing in separate transactions never get the same task.
func testConcurrentLease(t *testing.T, b *bundle) {
	ctx := t.Context()
	const tasks, leasers, batch = 240, 8, 7
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		for i := range 4 {
			j, err := x.JobInsert(ctx, store.JobInsertParams{WorkflowName: "wf", WorkflowVersion: 1, Now: b.now})
			if err != nil {
				return err
			}
			for k := range tasks / 4 {
				it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: k, SortKey: fmt.Sprintf("%04d", k), Name: "x", Now: b.now})
				if err != nil {
					return err
				}
				if _, err := x.TaskInsert(ctx, store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "s", Action: "a", Queue: "q", MaxAttempts: 3, SortKey: it.SortKey, Now: b.now}); err != nil {
					return err
				}
			}
			_ = i
		}
		return nil
	}))
	var (
		mu     sync.Mutex
		seen   = map[int64]string{}
		dups   []int64
		wg     sync.WaitGroup
		errs   []error
		start  = make(chan struct{})
		totals = make([]int, leasers)
	)
	for w := range leasers {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			<-start
			for {
				var got []*store.Task
				err := b.s.InTx(ctx, func(x store.Executor) error {
					var err error
					got, err = x.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: batch, Owner: owner, Now: b.now, LeaseUntil: b.at(time.Minute)})
					return err
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if _, ok := seen[tk.ID]; ok {
						dups = append(dups, tk.ID)
					}
					seen[tk.ID] = owner
					if tk.Attempt != 1 || tk.LeaseOwner != owner {
						errs = append(errs, fmt.Errorf("task %d leased by %s: attempt %d owner %s", tk.ID, owner, tk.Attempt, tk.LeaseOwner))
					}
				}
				totals[w] += len(got)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if i == 5 {
			t.Errorf("… and %d more errors", len(errs)-i)
			break
		}
		t.Error(err)
	}
	if len(dups) > 0 {
		t.Errorf("tasks leased twice: %v", dups)
	}
	if len(seen) != tasks {
		t.Errorf("leased %d distinct tasks, want %d (per leaser %v)", len(seen), tasks, totals)
	}
	for id, owner := range seen {
		if got := b.getTask(id); got.LeaseOwner != owner || got.Attempt != 1 {
			t.Errorf("task %d stored owner %s attempt %d, want %s 1", id, got.LeaseOwner, got.Attempt, owner)
			break
		}
	}
}

// testWait: Wait honours d and ctx; a driver that can Listen wakes waiters on new ready work.
func testWait(t *testing.T, b *bundle) {
	start := time.Now()
	b.s.Wait(t.Context(), 20*time.Millisecond)
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("Wait(20ms) returned after %v", el)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start = time.Now()
	b.s.Wait(ctx, time.Minute)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("Wait with a canceled ctx took %v", el)
	}
	if !b.s.Capabilities().Listen {
		return
	}
	// A notification sent before the waiter listens is lost by design (Wait is never the only way
	// to find work), so keep making work until a waiter wakes: every TaskInsert must notify.
	it := b.root(b.job("").ID, 0, "0")
	woke := make(chan time.Duration, 1)
	waitCtx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() {
		s := time.Now()
		b.s.Wait(waitCtx, time.Minute)
		woke <- time.Since(s)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for i := 0; ; i++ {
		select {
		case el := <-woke:
			if el >= time.Minute {
				t.Errorf("Wait returned after %v: not woken by TaskInsert", el)
			}
			return
		case <-tick.C:
			b.task(b.s, it, fmt.Sprintf("s%d", i))
		case <-deadline:
			t.Fatal("Wait not woken by TaskInsert within 20s")
		}
	}
}
