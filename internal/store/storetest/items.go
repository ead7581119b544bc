package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

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
	if root.State != record.ItemWritten || root.Name != "a.zip" || root.ContentType != "application/zip" || root.BlobSHA256 != "abc" ||
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

// testItemInsertMany checks the batch insert against ItemInsert: the same stored rows, roots
// their own root, existing keys left out, and every new item open.
// testItemInsertRoots adds roots in a stream of transactions, each with a replayed root beside a
// new one: whichever way the driver goes (ahead of a read, or reading first), a committed
// transaction's last run returns the new root alone, and each root is stored once.
func testItemInsertRoots(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	b.root(j.ID, 0, "0000")
	const n = 40
	for ord := 1; ord <= n; ord++ {
		ps := []store.ItemInsertParams{
			{JobID: j.ID, Ordinal: ord - 1, SortKey: fmt.Sprintf("%04d", ord-1), Name: "replayed", RangeLen: 1, Now: b.now},
			{JobID: j.ID, Ordinal: ord, SortKey: fmt.Sprintf("%04d", ord), Name: fmt.Sprint(ord), RangeLen: 1, Now: b.now},
		}
		var got []*record.Item
		var asGiven bool
		mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
			var err error
			got, asGiven, err = x.ItemInsertRoots(ctx, j, ps)
			return err
		}))
		if len(got) != 1 || got[0].Ordinal != ord || got[0].RootID != got[0].ID || asGiven {
			t.Fatalf("roots %d and %d: returned %+v (job as given %v), want root %d alone, read first", ord-1, ord, got, asGiven, ord)
		}
	}
	items, err := b.s.ItemList(ctx, store.ItemListParams{JobID: j.ID, Limit: 2 * n})
	mustOK(t, err)
	if len(items) != n+1 {
		t.Errorf("%d items stored, want %d", len(items), n+1)
	}
}

func testItemInsertMany(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	existing := b.root(j.ID, 1, "0001")
	text := "body"
	ps := []store.ItemInsertParams{
		{JobID: j.ID, Ordinal: 0, SortKey: "0000", Name: "a.txt", ContentType: "text/plain", BlobSHA256: "aa", Size: 3,
			Metadata: []byte(`{"m":1}`), Options: []byte(`{"ocr":true}`), Text: &text, RangeLo: 0, RangeLen: 3, Now: b.now},
		{JobID: j.ID, Ordinal: 1, SortKey: "0001", Name: "replayed", Now: b.now},
		{JobID: j.ID, Ordinal: 2, SortKey: "0002", Name: "b.bin", Size: 7, RangeLo: 3, RangeLen: 7, Now: b.now},
		{JobID: j.ID, ParentID: existing.ID, RootID: existing.ID, Step: "unpack", Depth: 1, SortKey: "0001/0000", Name: "child", Now: b.now},
	}
	got, err := b.s.ItemInsertMany(ctx, ps)
	mustOK(t, err)
	if len(got) != 3 {
		t.Fatalf("ItemInsertMany returned %d items, want 3 (the existing key left out)", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Errorf("items not in id order: %d after %d", got[i].ID, got[i-1].ID)
		}
	}
	a, bin, child := got[0], got[1], got[2]
	if a.Name != "a.txt" || a.RootID != a.ID || a.ParentID != 0 || a.State != record.ItemWritten || a.ContentType != "text/plain" ||
		a.BlobSHA256 != "aa" || a.Size != 3 || !a.HasText || a.RangeLen != 3 || a.Share != 3 || a.SortKey != "0000" {
		t.Errorf("first item = %+v", a)
	}
	checkJSON(t, "Metadata", a.Metadata, `{"m":1}`)
	checkJSON(t, "Options", a.Options, `{"ocr":true}`)
	checkTime(t, "CreatedAt", a.CreatedAt, b.now)
	if bin.Name != "b.bin" || bin.RootID != bin.ID || bin.HasText || bin.RangeLo != 3 {
		t.Errorf("second item = %+v", bin)
	}
	checkJSON(t, "default Metadata", bin.Metadata, `{}`)
	if child.Name != "child" || child.ParentID != existing.ID || child.RootID != existing.ID || child.Depth != 1 || child.Step != "unpack" {
		t.Errorf("child = %+v", child)
	}
	if g := b.getItem(a.ID); g.Text != "body" {
		t.Errorf("ItemGet text = %q, want body", g.Text)
	}
	if g := b.getItem(existing.ID); g.Name != "root-1" {
		t.Errorf("existing item renamed to %q by a replayed key", g.Name)
	}
	// The new items are open: the job has open items until the last is ingested.
	for i, it := range append(got, existing) {
		if open := must(b.s.JobHasOpenItems(ctx, j.ID))(t); !open {
			t.Fatalf("JobHasOpenItems = false with %d items of %d ingested", i, len(got)+1)
		}
		for _, to := range []record.ItemState{record.ItemProcessed, record.ItemIngested} {
			from := record.ItemWritten
			if to == record.ItemIngested {
				from = record.ItemProcessed
			}
			if !b.move(it.ID, from, to) {
				t.Fatalf("item %d: ItemSetStateMany(%s→%s) moved none", it.ID, from, to)
			}
		}
	}
	if must(b.s.JobHasOpenItems(ctx, j.ID))(t) {
		t.Error("JobHasOpenItems = true after every item was ingested")
	}
	again, err := b.s.ItemInsertMany(ctx, ps)
	mustOK(t, err)
	if len(again) != 0 {
		t.Errorf("replayed ItemInsertMany inserted %d items, want 0", len(again))
	}
	none, err := b.s.ItemInsertMany(ctx, nil)
	mustOK(t, err)
	if len(none) != 0 {
		t.Errorf("ItemInsertMany(nil) = %d items", len(none))
	}
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
	b.move(c10.ID, record.ItemWritten, record.ItemProcessed)

	zero := int64(0)
	for _, tc := range []struct {
		name string
		p    store.ItemListParams
		want []*record.Item
	}{
		{"all in tree order", store.ItemListParams{}, []*record.Item{r0, c00, c01, r1, c10}},
		{"roots", store.ItemListParams{ParentID: &zero}, []*record.Item{r0, r1}},
		{"children of r0", store.ItemListParams{ParentID: &r0.ID}, []*record.Item{c00, c01}},
		{"processed", store.ItemListParams{States: []record.ItemState{record.ItemProcessed}}, []*record.Item{c10}},
		{"two states", store.ItemListParams{States: []record.ItemState{record.ItemProcessed, record.ItemWritten}, Limit: 2}, []*record.Item{r0, c00}},
		{"after sort key", store.ItemListParams{AfterSort: c00.SortKey, Limit: 2}, []*record.Item{c01, r1}},
		{"only errored", store.ItemListParams{OnlyErrored: true}, []*record.Item{c01}},
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
	if b.move(it.ID, record.ItemProcessed, record.ItemIngested) {
		t.Error("ItemSetStateMany from the wrong state moved the item")
	}
	if !b.move(it.ID, record.ItemWritten, record.ItemProcessed) {
		t.Error("ItemSetStateMany(written→processed) moved none")
	}
	if got := b.getItem(it.ID); got.State != record.ItemProcessed || got.Colored != 0 {
		t.Errorf("after processed: %s colored %v", got.State, got.Colored)
	}
	mustOK(t, b.s.ItemColorMany(ctx, []int64{it.ID}, []float64{77.5}))
	if !b.move(it.ID, record.ItemProcessed, record.ItemIngested) {
		t.Error("ItemSetStateMany(processed→ingested) moved none")
	}
	if got := b.getItem(it.ID); got.State != record.ItemIngested || got.Colored != 77.5 {
		t.Errorf("after ingested: %s colored %v, want ingested 77.5", got.State, got.Colored)
	}
	if b.move(1<<40, record.ItemWritten, record.ItemProcessed) {
		t.Error("ItemSetStateMany of a missing item moved it")
	}
}

// testItemManyAtOnce covers the set-based variants the engine uses for a batch: locking items,
// listing their tasks and moving them, each in one statement.
func testItemManyAtOnce(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	a, c, d := b.root(j.ID, 0, "0"), b.root(j.ID, 1, "1"), b.root(j.ID, 2, "2")
	b.task(b.s, a, "one")
	b.task(b.s, a, "two")
	b.task(b.s, d, "one")

	// In id order, whatever the order asked; a missing id is left out.
	err := b.s.InTx(ctx, func(x store.Executor) error {
		its, err := x.ItemLockMany(ctx, []int64{d.ID, 1 << 40, a.ID, c.ID})
		if err != nil {
			return err
		}
		var ids []int64
		for _, it := range its {
			ids = append(ids, it.ID)
		}
		if want := []int64{a.ID, c.ID, d.ID}; !slices.Equal(ids, want) {
			t.Errorf("ItemLockMany ids = %v, want %v", ids, want)
		}
		if its[0].Name != a.Name || its[0].State != record.ItemWritten || its[0].Share != a.Share {
			t.Errorf("ItemLockMany[0] = %+v, want %+v", its[0], a)
		}
		return nil
	})
	mustOK(t, err)

	tasks := must(b.s.TaskListByItems(ctx, []int64{d.ID, c.ID, a.ID}))(t)
	var got []string
	for _, tk := range tasks {
		got = append(got, fmt.Sprintf("%d/%s", tk.ItemID, tk.Step))
	}
	if want := []string{fmt.Sprintf("%d/one", a.ID), fmt.Sprintf("%d/two", a.ID), fmt.Sprintf("%d/one", d.ID)}; !slices.Equal(got, want) {
		t.Errorf("TaskListByItems = %v, want %v", got, want)
	}
	if none := must(b.s.TaskListByItems(ctx, nil))(t); len(none) != 0 {
		t.Errorf("TaskListByItems(nil) = %d tasks", len(none))
	}

	// Only the items in From move; ColorAll colors each one's whole share.
	b.move(c.ID, record.ItemWritten, record.ItemProcessed)
	n := must(b.s.ItemSetStateMany(ctx, store.ItemSetStateManyParams{IDs: []int64{a.ID, c.ID, d.ID}, From: record.ItemWritten, To: record.ItemIngested, Now: b.at(time.Second), ColorAll: true}))(t)
	if n != 2 {
		t.Errorf("ItemSetStateMany moved %d, want 2", n)
	}
	for _, it := range []*record.Item{a, d} {
		if got := b.getItem(it.ID); got.State != record.ItemIngested || got.Colored != got.Share || got.Share == 0 {
			t.Errorf("item %d after ItemSetStateMany: %s colored %v share %v, want ingested and fully colored", it.ID, got.State, got.Colored, got.Share)
		}
	}
	if got := b.getItem(c.ID); got.State != record.ItemProcessed || got.Colored != 0 {
		t.Errorf("item in another state moved: %s colored %v", got.State, got.Colored)
	}
	n = must(b.s.ItemSetStateMany(ctx, store.ItemSetStateManyParams{IDs: []int64{c.ID}, From: record.ItemProcessed, To: record.ItemIngested, Now: b.now}))(t)
	if got := b.getItem(c.ID); n != 1 || got.State != record.ItemIngested || got.Colored != 0 {
		t.Errorf("ItemSetStateMany without ColorAll: moved %d, %s colored %v", n, got.State, got.Colored)
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
	mustOK(t, b.s.ItemAddChild(ctx, store.ItemAddChildParams{ParentID: it.ID, N: 1, Length: 40}))
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
	mustOK(t, b.s.ItemAddChild(ctx, store.ItemAddChildParams{ParentID: it.ID, N: 1, Length: 100}))
	if got := b.getItem(it.ID); got.NChildren != 2 || got.Share != 0 {
		t.Errorf("after ItemAddChild(100): n %d share %v, want 2 0 (never negative)", got.NChildren, got.Share)
	}
	// Colored set on many items at once.
	a, b2 := b.root(b.job("").ID, 0, "0"), b.root(b.job("").ID, 1, "1")
	mustOK(t, b.s.ItemColorMany(ctx, []int64{a.ID, b2.ID}, []float64{12.5, 0.25}))
	if ga, gb := b.getItem(a.ID).Colored, b.getItem(b2.ID).Colored; ga != 12.5 || gb != 0.25 {
		t.Errorf("after ItemColorMany: colored %v and %v, want 12.5 and 0.25", ga, gb)
	}
	mustOK(t, b.s.ItemColorMany(ctx, nil, nil))
	// Many children at once: counted together, their lengths summed.
	other := b.root(b.job("").ID, 0, "0")
	mustOK(t, b.s.ItemAddChild(ctx, store.ItemAddChildParams{ParentID: other.ID, N: 3, Length: 30}))
	if got := b.getItem(other.ID); got.NChildren != 3 || got.Share != 70 {
		t.Errorf("after ItemAddChild(3, 30): n %d share %v, want 3 70", got.NChildren, got.Share)
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

	has := func(states ...record.ItemState) bool {
		t.Helper()
		return must(b.s.ItemHasChildInState(ctx, r.ID, states))(t)
	}
	if !has(record.ItemWritten) || has(record.ItemProcessed) || has(record.ItemIngested, record.ItemCreated) {
		t.Error("ItemHasChildInState with all children written")
	}
	backlog := func(depth, limit int) int {
		t.Helper()
		return must(b.s.ItemCountBacklog(ctx, store.ItemCountBacklogParams{JobID: j.ID, Depth: depth, Limit: limit}))(t)
	}
	for _, tc := range []struct {
		name         string
		depth, limit int
		want         int
	}{
		{"below the root", 0, 100, 4},
		{"the root too", -1, 100, 5},
		{"below the children", 1, 100, 1},
		{"stopped at the limit", 0, 2, 2},
	} {
		if got := backlog(tc.depth, tc.limit); got != tc.want {
			t.Errorf("ItemCountBacklog(%s) = %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, c := range []*record.Item{c0, c1, a0} {
		b.move(c.ID, record.ItemWritten, record.ItemProcessed)
	}
	if got := backlog(0, 100); got != 1 {
		t.Errorf("ItemCountBacklog with the children processed = %d, want 1 (the grandchild)", got)
	}
	if has(record.ItemCreated, record.ItemWritten) || !has(record.ItemWritten, record.ItemProcessed) {
		t.Error("ItemHasChildInState with all children processed (the grandchild is not a child)")
	}
	// Moved in a batch, ingested, then one reopened: the open-child checks follow every move.
	ids := []int64{c0.ID, c1.ID, a0.ID}
	if n := must(b.s.ItemSetStateMany(ctx, store.ItemSetStateManyParams{IDs: ids, From: record.ItemProcessed, To: record.ItemIngested, Now: b.now}))(t); n != 3 {
		t.Fatalf("ItemSetStateMany(processed→ingested) = %d, want 3", n)
	}
	if has(record.ItemCreated, record.ItemWritten, record.ItemProcessed) || !has(record.ItemIngested) {
		t.Error("ItemHasChildInState with all children ingested")
	}
	if !must(b.s.ItemReopen(ctx, store.ItemReopenParams{ID: c1.ID, To: record.ItemProcessed}))(t) {
		t.Fatal("ItemReopen(ingested→processed) = false")
	}
	if !has(record.ItemProcessed) || has(record.ItemCreated, record.ItemWritten) {
		t.Error("ItemHasChildInState with one child reopened to processed")
	}
	if !must(b.s.ItemReopen(ctx, store.ItemReopenParams{ID: c1.ID, To: record.ItemWritten}))(t) {
		t.Fatal("ItemReopen(processed→written) = false")
	}
	if !has(record.ItemWritten) || has(record.ItemProcessed) {
		t.Error("ItemHasChildInState with one child reopened to written")
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
		if got := must(b.s.EventInsert(ctx, store.EventInsertParams{ItemID: it.ID, Name: tc.name, Now: b.now}))(t); got != tc.want {
			t.Errorf("EventInsert(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	must(b.s.EventInsert(ctx, store.EventInsertParams{ItemID: other.ID, Name: "other", Now: b.now}))(t)
	got := must(b.s.EventListByItem(ctx, it.ID))(t)
	slices.Sort(got)
	if want := []string{"detected.pdf", "start"}; !slices.Equal(got, want) {
		t.Errorf("EventListByItem = %v, want %v", got, want)
	}
	if got := must(b.s.EventListByItem(ctx, 1<<40))(t); len(got) != 0 {
		t.Errorf("EventListByItem(missing) = %v, want none", got)
	}
	byItem := must(b.s.EventListByItems(ctx, []int64{other.ID, 1 << 40, it.ID}))(t)
	if len(byItem) != 2 {
		t.Errorf("EventListByItems = %v, want entries for the two items with events only", byItem)
	}
	got = byItem[it.ID]
	slices.Sort(got)
	if want := []string{"detected.pdf", "start"}; !slices.Equal(got, want) {
		t.Errorf("EventListByItems[item] = %v, want %v", got, want)
	}
	if got := byItem[other.ID]; !slices.Equal(got, []string{"other"}) {
		t.Errorf("EventListByItems[other] = %v, want [other]", got)
	}
	if none := must(b.s.EventListByItems(ctx, nil))(t); len(none) != 0 {
		t.Errorf("EventListByItems(nil) = %v, want none", none)
	}
	// Named: each pair looked up, an item none of whose named events fired has no entry.
	named := must(b.s.EventListNamed(ctx, []int64{it.ID, other.ID, it.ID, 1 << 40}, []string{"start", "start", "missing", "start"}))(t)
	if len(named) != 1 || !slices.Equal(named[it.ID], []string{"start"}) {
		t.Errorf("EventListNamed = %v, want only the item's start", named)
	}
	if none := must(b.s.EventListNamed(ctx, nil, nil))(t); len(none) != 0 {
		t.Errorf("EventListNamed(nil) = %v, want none", none)
	}
}

func testWaits(t *testing.T, b *bundle) {
	ctx := t.Context()
	j, other := b.job(""), b.job("")
	a, c := b.root(j.ID, 0, "0"), b.root(other.ID, 0, "0")
	waits := []store.Wait{
		{JobID: j.ID, ItemID: a.ID, Step: "approve", Due: b.at(time.Hour)},
		{JobID: j.ID, ItemID: a.ID, Step: "transcode", Due: b.at(time.Minute)},
		{JobID: other.ID, ItemID: c.ID, Step: "approve", Due: b.at(2 * time.Hour)},
	}
	for _, w := range waits {
		if err := b.s.WaitInsert(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	// A second insert keeps the first deadline.
	if err := b.s.WaitInsert(ctx, store.Wait{JobID: j.ID, ItemID: a.ID, Step: "approve", Due: b.at(5 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := must(b.s.WaitListByJob(ctx, j.ID))(t); !sameWaits(got, waits[:2]) {
		t.Errorf("WaitListByJob = %+v, want %+v", got, waits[:2])
	}
	if got := must(b.s.WaitListDue(ctx, b.at(time.Hour), 10))(t); !sameWaits(got, []store.Wait{waits[1], waits[0]}) {
		t.Errorf("WaitListDue(1h) = %+v, want the two due, earliest first", got)
	}
	if got := must(b.s.WaitListDue(ctx, b.at(3*time.Hour), 1))(t); !sameWaits(got, waits[1:2]) {
		t.Errorf("WaitListDue(limit 1) = %+v, want the earliest", got)
	}
	if err := b.s.WaitDelete(ctx, a.ID, "transcode"); err != nil {
		t.Fatal(err)
	}
	if err := b.s.WaitDelete(ctx, a.ID, "missing"); err != nil {
		t.Fatal(err)
	}
	if got := must(b.s.WaitListDue(ctx, b.at(3*time.Hour), 10))(t); !sameWaits(got, []store.Wait{waits[0], waits[2]}) {
		t.Errorf("WaitListDue after a delete = %+v, want the other two", got)
	}
}

// sameWaits compares waits with their deadlines as instants.
func sameWaits(a, b []store.Wait) bool {
	return slices.EqualFunc(a, b, func(x, y store.Wait) bool {
		return x.JobID == y.JobID && x.ItemID == y.ItemID && x.Step == y.Step && x.Due.Equal(y.Due)
	})
}

func testItemReopen(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	set := func(it *record.Item, from, to record.ItemState) {
		t.Helper()
		if !b.move(it.ID, from, to) {
			t.Fatalf("ItemSetStateMany(%s→%s) moved none", from, to)
		}
	}
	reopen := func(it *record.Item, to record.ItemState, clear bool) bool {
		t.Helper()
		return must(b.s.ItemReopen(ctx, store.ItemReopenParams{ID: it.ID, To: to, ClearError: clear}))(t)
	}
	failed := b.root(j.ID, 0, "0")
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: failed.ID, Error: "pdf failed 3 times: boom"}))
	mustOK(t, b.s.ItemColorMany(ctx, []int64{failed.ID}, []float64{50}))
	set(failed, record.ItemWritten, record.ItemIngested)
	if must(b.s.JobHasOpenItems(ctx, j.ID))(t) {
		t.Error("JobHasOpenItems with the job's only item ingested = true")
	}
	if !reopen(failed, record.ItemWritten, true) {
		t.Fatal("ItemReopen(ingested→written) = false")
	}
	if !must(b.s.JobHasOpenItems(ctx, j.ID))(t) {
		t.Error("JobHasOpenItems after an item was reopened = false")
	}
	if got := b.getItem(failed.ID); got.State != record.ItemWritten || got.Error != "" || got.Colored != 0 {
		t.Errorf("reopened item = %s %q colored %v, want written with no error and nothing colored", got.State, got.Error, got.Colored)
	}
	// The error is set once; reopening clears it so a later failure can set it again.
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: failed.ID, Error: "again"}))
	if got := b.getItem(failed.ID); got.Error != "again" {
		t.Errorf("error after reopen and a new failure = %q, want %q", got.Error, "again")
	}

	// ReplaceError replaces an error a new result made stale, and clears it when empty.
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: failed.ID, Error: "replaced", ReplaceError: true}))
	if got := b.getItem(failed.ID); got.Error != "replaced" {
		t.Errorf("error after ReplaceError = %q, want %q", got.Error, "replaced")
	}
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: failed.ID, ReplaceError: true}))
	if got := b.getItem(failed.ID); got.Error != "" {
		t.Errorf("error after ReplaceError with none = %q, want none", got.Error)
	}

	parent := b.root(j.ID, 1, "1")
	mustOK(t, b.s.ItemUpdate(ctx, store.ItemUpdateParams{ID: parent.ID, Error: "parent's own"}))
	mustOK(t, b.s.ItemColorMany(ctx, []int64{parent.ID}, []float64{50}))
	set(parent, record.ItemWritten, record.ItemProcessed)
	set(parent, record.ItemProcessed, record.ItemIngested)
	if !reopen(parent, record.ItemProcessed, false) {
		t.Fatal("ItemReopen(ingested→processed) = false")
	}
	if got := b.getItem(parent.ID); got.State != record.ItemProcessed || got.Error != "parent's own" || got.Colored != 50 {
		t.Errorf("reopened parent = %s %q colored %v, want processed keeping its error and colored 50", got.State, got.Error, got.Colored)
	}
	if !reopen(parent, record.ItemProcessed, false) {
		t.Error("ItemReopen to the state the item is in = false")
	}
	// Reopening never moves an item forward.
	open := b.root(j.ID, 2, "2")
	if reopen(open, record.ItemProcessed, true) {
		t.Error("ItemReopen(written→processed) = true")
	}
	if got := b.getItem(open.ID); got.State != record.ItemWritten {
		t.Errorf("item after refused reopen = %s", got.State)
	}
	if _, err := b.s.ItemReopen(ctx, store.ItemReopenParams{ID: open.ID, To: record.ItemIngested}); err == nil {
		t.Error("ItemReopen to ingested: no error")
	}
	if must(b.s.ItemReopen(ctx, store.ItemReopenParams{ID: 1 << 40, To: record.ItemWritten}))(t) {
		t.Error("ItemReopen of a missing item = true")
	}
	// A reopened item settles forward again.
	set(failed, record.ItemWritten, record.ItemIngested)
}

func testItemChildrenFrom(t *testing.T, b *bundle) {
	ctx := t.Context()
	r := b.root(b.job("").ID, 0, "0")
	c1 := b.child(r, "unpack", 1)
	c0 := b.child(r, "unpack", 0)
	a0 := b.child(r, "attach", 0)
	b.child(c0, "unpack", 0) // grandchild
	checkIDs(t, "ItemListChildrenFrom(unpack, 0, 10)", itemIDs(must(b.s.ItemListChildrenFrom(ctx, r.ID, "unpack", 0, 10))(t)), []int64{c0.ID, c1.ID})
	// A page from an ordinal on, bounded: a gap in the ordinals (3 missing) is passed over.
	c2 := b.child(r, "unpack", 2)
	c4 := b.child(r, "unpack", 4)
	checkIDs(t, "ItemListChildrenFrom(unpack, 1, 2)", itemIDs(must(b.s.ItemListChildrenFrom(ctx, r.ID, "unpack", 1, 2))(t)), []int64{c1.ID, c2.ID})
	checkIDs(t, "ItemListChildrenFrom(unpack, 3, 10)", itemIDs(must(b.s.ItemListChildrenFrom(ctx, r.ID, "unpack", 3, 10))(t)), []int64{c4.ID})
	checkIDs(t, "ItemListChildrenFrom(unpack, 5, 10)", itemIDs(must(b.s.ItemListChildrenFrom(ctx, r.ID, "unpack", 5, 10))(t)), nil)
	checkIDs(t, "ItemListChildrenFrom(attach, 0, 10)", itemIDs(must(b.s.ItemListChildrenFrom(ctx, r.ID, "attach", 0, 10))(t)), []int64{a0.ID})
}
