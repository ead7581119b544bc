package storetest

import (
	"slices"
	"testing"

	"github.com/sluice-project/sluice/internal/store"
)

// testDocuments checks DocumentList's filters, its four orders paged one row at a time without a
// gap or a repeat, and DocumentCounts.
func testDocuments(t *testing.T, b *bundle) {
	ctx := t.Context()
	j1, j2 := b.job(""), b.job("")
	type spec struct {
		job            int64
		ordinal        int
		sortKey, name  string
		contentType    string
		size           int64
		metadata       string
		document, kept bool
	}
	// Inserted out of tree order, as a converter's children are: item ids do not follow the
	// sort keys.
	specs := []spec{
		{j1.ID, 3, "03", "c.txt", "text/plain", 30, `{"box":"7"}`, true, true},
		{j1.ID, 0, "00", "b.pdf", "application/pdf", 50, `{"box":7}`, true, true},
		{j1.ID, 1, "01", "a.pdf", "application/pdf", 50, `{"box":"8"}`, true, true},
		{j1.ID, 2, "02", "z.pdf", "application/pdf", 10, `{}`, false, false}, // no document
		{j2.ID, 0, "00", "d.txt", "text/plain", 20, `{"box":"7"}`, true, true},
	}
	ids := map[string]int64{}
	for _, sp := range specs {
		it, _, err := b.s.ItemInsert(ctx, store.ItemInsertParams{
			JobID: sp.job, Ordinal: sp.ordinal, SortKey: sp.sortKey, Name: sp.name, ContentType: sp.contentType,
			Size: sp.size, Metadata: []byte(sp.metadata), RangeLen: 1, Now: b.now,
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[sp.name] = it.ID
		kind := "error"
		if sp.document {
			kind = store.OutputDocument
		}
		mustOK(t, b.s.OutputPut(ctx, store.OutputPutParams{ItemID: it.ID, JobID: sp.job, Kind: kind, Value: []byte(`{"title":"` + sp.name + `"}`), Now: b.now}))
	}
	names := func(ds []*store.Document) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Item.Name)
		}
		return out
	}
	// pages reads every page of p, one row a page, with the key of each page's last row.
	pages := func(p store.DocumentListParams) []string {
		t.Helper()
		p.Limit = 1
		var out []string
		for range 10 {
			ds := must(b.s.DocumentList(ctx, p))(t)
			if len(ds) == 0 {
				return out
			}
			last := ds[0].Item
			out = append(out, last.Name)
			p.AfterItem, p.AfterSize = last.ID, last.Size
			switch p.Order {
			case store.DocumentsInTree:
				p.AfterKey = last.SortKey
			case store.DocumentsByTitle:
				p.AfterKey = last.Name
			}
		}
		t.Fatalf("DocumentList %+v did not end", p)
		return nil
	}
	for _, tc := range []struct {
		name string
		p    store.DocumentListParams
		want []string
	}{
		{"job 1 in tree order", store.DocumentListParams{JobID: j1.ID, Order: store.DocumentsInTree}, []string{"b.pdf", "a.pdf", "c.txt"}},
		{"newest", store.DocumentListParams{}, []string{"d.txt", "a.pdf", "b.pdf", "c.txt"}},
		{"by title", store.DocumentListParams{Order: store.DocumentsByTitle}, []string{"a.pdf", "b.pdf", "c.txt", "d.txt"}},
		// Equal sizes tie by item id, descending.
		{"by size", store.DocumentListParams{Order: store.DocumentsBySize}, []string{"a.pdf", "b.pdf", "c.txt", "d.txt"}},
		{"text", store.DocumentListParams{ContentType: "text/plain", Order: store.DocumentsByTitle}, []string{"c.txt", "d.txt"}},
		// A string and a number compare by their text alike.
		{"box 7", store.DocumentListParams{Meta: []store.KeyValue{{Key: "box", Value: "7"}}, Order: store.DocumentsByTitle}, []string{"b.pdf", "c.txt", "d.txt"}},
		{"box 7 of job 2", store.DocumentListParams{JobID: j2.ID, Meta: []store.KeyValue{{Key: "box", Value: "7"}}}, []string{"d.txt"}},
		{"no such type", store.DocumentListParams{ContentType: "image/png"}, nil},
	} {
		if got := names(must(b.s.DocumentList(ctx, tc.p))(t)); !slices.Equal(got, tc.want) {
			t.Errorf("DocumentList %s = %v, want %v", tc.name, got, tc.want)
		}
		if got := pages(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("DocumentList %s, a row a page = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := b.s.DocumentList(ctx, store.DocumentListParams{Order: store.DocumentsInTree}); err == nil {
		t.Error("DocumentList in tree order across jobs: no error")
	}
	d := must(b.s.DocumentList(ctx, store.DocumentListParams{JobID: j2.ID}))(t)
	if len(d) != 1 || d[0].Item.ID != ids["d.txt"] || d[0].Item.ContentType != "text/plain" || d[0].Item.Size != 20 {
		t.Fatalf("DocumentList of job 2 = %+v", d)
	}
	checkBytes(t, "document value", d[0].Value, `{"title":"d.txt"}`)
	checkTime(t, "document CreatedAt", d[0].CreatedAt, b.now)

	for _, tc := range []struct {
		name string
		p    store.DocumentListParams
		want []store.TypeCount
	}{
		{"all", store.DocumentListParams{}, []store.TypeCount{{ContentType: "application/pdf", N: 2}, {ContentType: "text/plain", N: 2}}},
		{"job 1", store.DocumentListParams{JobID: j1.ID}, []store.TypeCount{{ContentType: "application/pdf", N: 2}, {ContentType: "text/plain", N: 1}}},
		{"box 7", store.DocumentListParams{Meta: []store.KeyValue{{Key: "box", Value: "7"}}}, []store.TypeCount{{ContentType: "text/plain", N: 2}, {ContentType: "application/pdf", N: 1}}},
		{"none", store.DocumentListParams{ContentType: "image/png"}, nil},
	} {
		if got := must(b.s.DocumentCounts(ctx, tc.p))(t); !slices.Equal(got, tc.want) {
			t.Errorf("DocumentCounts %s = %v, want %v", tc.name, got, tc.want)
		}
	}
}
