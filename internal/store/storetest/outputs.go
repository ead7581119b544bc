package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

func testOutputs(t *testing.T, b *bundle) {
	ctx := t.Context()
	j1, j2 := b.job(""), b.job("")
	i1, i2 := b.root(j1.ID, 0, "0"), b.root(j1.ID, 1, "1")
	i3 := b.root(j2.ID, 0, "0")
	put := func(it *record.Item, kind, value string) {
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

	// OutputSupersede moves one (item, kind) to the item's history and nothing else;
	// superseding what is not there is fine (false).
	later := b.at(time.Hour)
	if !must(b.s.OutputSupersede(ctx, store.OutputSupersedeParams{ItemID: i1.ID, Kind: "error", Now: later}))(t) {
		t.Error("OutputSupersede of an output = false")
	}
	if must(b.s.OutputSupersede(ctx, store.OutputSupersedeParams{ItemID: i3.ID, Kind: "error", Now: later}))(t) {
		t.Error("OutputSupersede of no output = true")
	}
	if got, want := list(store.OutputListParams{JobID: j1.ID}), []key{{i1.ID, "document"}, {i2.ID, "document"}}; !slices.Equal(got, want) {
		t.Errorf("after OutputSupersede: %v, want %v", got, want)
	}
	hist := must(b.s.OutputHistoryList(ctx, i1.ID))(t)
	if len(hist) != 1 || hist[0].Kind != "error" || hist[0].ItemID != i1.ID || hist[0].JobID != j1.ID {
		t.Fatalf("OutputHistoryList = %+v, want the superseded error", hist)
	}
	checkTime(t, "superseded output CreatedAt", hist[0].CreatedAt, b.now)
	checkTime(t, "superseded output SupersededAt", hist[0].SupersededAt, later)
	// The kind can be put again, and superseded again: the history keeps both, in order.
	mustOK(t, b.s.OutputPut(ctx, store.OutputPutParams{ItemID: i1.ID, JobID: j1.ID, Kind: "error", Value: []byte(`{"n":2}`), Now: later}))
	must(b.s.OutputSupersede(ctx, store.OutputSupersedeParams{ItemID: i1.ID, Kind: "error", Now: b.at(2 * time.Hour)}))(t)
	if hist := must(b.s.OutputHistoryList(ctx, i1.ID))(t); len(hist) != 2 || string(hist[1].Value) != `{"n":2}` {
		t.Errorf("OutputHistoryList after a second supersede = %+v", hist)
	}
	if none := must(b.s.OutputHistoryList(ctx, i2.ID))(t); len(none) != 0 {
		t.Errorf("OutputHistoryList of an item with none = %+v", none)
	}
}

func testCache(t *testing.T, b *bundle) {
	ctx := t.Context()
	_, err := b.s.CacheGet(ctx, "k")
	checkNotFound(t, "CacheGet(missing)", err)
	mustOK(t, b.s.CachePut(ctx, store.CachePutParams{Key: "k", Value: []byte(`{"pages":3}`), Now: b.now}))
	mustOK(t, b.s.CachePut(ctx, store.CachePutParams{Key: "k", Value: []byte(`{"pages":4}`), Now: b.at(time.Hour)})) // first wins
	mustOK(t, b.s.CachePut(ctx, store.CachePutParams{Key: "empty", Value: []byte{}, Now: b.now}))
	checkBytes(t, "CacheGet(k)", must(b.s.CacheGet(ctx, "k"))(t), `{"pages":3}`)
	checkBytes(t, "CacheGet(empty)", must(b.s.CacheGet(ctx, "empty"))(t), "")
	mustOK(t, b.s.CacheDelete(ctx, "k"))
	_, err = b.s.CacheGet(ctx, "k")
	checkNotFound(t, "CacheGet after CacheDelete", err)
	mustOK(t, b.s.CacheDelete(ctx, "k")) // deleting a missing entry is no error
	mustOK(t, b.s.CachePut(ctx, store.CachePutParams{Key: "k", Value: []byte(`{"pages":5}`), Now: b.now}))
	checkBytes(t, "CacheGet(k) after delete and put", must(b.s.CacheGet(ctx, "k"))(t), `{"pages":5}`)
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		if err := x.CachePut(ctx, store.CachePutParams{Key: "tx", Value: []byte("v"), Now: b.now}); err != nil {
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
	mustOK(t, b.s.CachePut(ctx, store.CachePutParams{Key: "conv", Value: []byte(`{"pdf":"` + sha('c') + `"}`), Now: b.now}))
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
		{"JobLock", func(x store.Executor) error { _, err := x.JobLock(ctx, missing); return err }},
		{"JobIngestLock", func(x store.Executor) error { _, err := x.JobIngestLock(ctx, missing); return err }},
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
