package docsearch_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestIndex is the index's conformance suite, run on every driver: the domain's migrations
// apply over a store's core schema, and the index behaves alike on each.
func TestIndex(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		st := open(t)
		ms := docsearch.Migrations(st.DomainSQL().Dialect())
		if done, err := st.MigrateDomain(t.Context(), docsearch.DomainName, ms); err != nil || len(done) != len(ms) {
			t.Fatalf("MigrateDomain = %v, %v; want every migration applied", done, err)
		}
		testIndex(t, st)
	})
}

// testIndex: documents are searchable from the transaction that records them, with the
// query language's semantics, filters and paging alike on every driver.
func testIndex(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now().UTC()
	job := func(key string) *record.Job {
		return must(st.JobInsert(ctx, store.JobInsertParams{Key: key, WorkflowName: "wf", WorkflowVersion: 1, Now: now}))(t)
	}
	// put records an output as the engine does, with the domain following it in its transaction.
	put := func(x store.Executor, p store.OutputPutParams) error {
		if err := x.OutputPut(ctx, p); err != nil {
			return err
		}
		return docsearch.Domain{}.OutputsRecorded(ctx, x.DomainSQL(), []store.OutputPutParams{p})
	}
	putNow := func(p store.OutputPutParams) error {
		return st.InTx(ctx, func(x store.Executor) error { return put(x, p) })
	}
	ix := docsearch.NewIndex(st.DomainSQL())
	j1, j2 := job("j1"), job("j2")
	docs := map[string]int64{} // name → item id
	add := func(j *record.Job, ordinal int, name, ctype, meta, text string, document bool) *record.Item {
		t.Helper()
		p := store.ItemInsertParams{JobID: j.ID, Ordinal: ordinal, SortKey: fmt.Sprint(ordinal), Name: name,
			ContentType: ctype, Metadata: []byte(meta), Now: now}
		if text != "" {
			p.Text = &text
		}
		it, _, err := st.ItemInsert(ctx, p)
		mustOK(t, err)
		if document {
			mustOK(t, putNow(store.OutputPutParams{ItemID: it.ID, JobID: j.ID, Kind: store.OutputDocument, Value: []byte(`{"title":"` + name + `"}`), Now: now}))
			docs[name] = it.ID
		}
		return it
	}
	add(j1, 0, "candide.txt", "text/plain", `{"lang":"fr"}`, "Comment Candide fut élevé dans un beau château, et comment il fut chassé d'icelui.", true)
	add(j1, 1, "pieces.txt", "text/plain", `{"lang":"fr","n":3}`, "Une pièce de théâtre. The cat sat on the mat.", true)
	add(j1, 2, "dogs.pdf", "application/pdf", `{"lang":"en"}`, "The dog chased the cat; the dog won.", true)
	add(j1, 3, "rashomon.txt", "text/plain", `{"lang":"ja"}`, "下人が、羅生門の下で雨やみを待っていた。マーケットモデル", true)
	add(j1, 4, "korean.txt", "text/plain", `{"lang":"ko"}`, "이 문서를 검색할 수 있습니다", true)
	add(j2, 0, "report-2024.pdf", "application/pdf", `{"lang":"en"}`, "Heterogeneous systems scale. Cats and dogs.", true)
	add(j2, 1, "notext.png", "image/png", `{}`, "", true)
	// Long documents: a phrase after a word's 300th time, and one past the 20,000th word.
	add(j2, 5, "long-repeats.txt", "text/plain", `{}`, strings.Repeat("of the ", 300)+"analysis of the scalability", true)
	add(j2, 6, "long-words.txt", "text/plain", `{}`, strings.Repeat("filler ", 20_000)+"final words here", true)
	// Not a document: an error output, and an item without output, are never found.
	errItem := add(j2, 2, "broken.pdf", "application/pdf", `{}`, "cat cat cat", false)
	mustOK(t, putNow(store.OutputPutParams{ItemID: errItem.ID, JobID: j2.ID, Kind: "error", Value: []byte(`{}`), Now: now}))
	add(j2, 3, "plain-item.txt", "text/plain", `{}`, "cat", false)
	// Replaying a document's output neither duplicates nor changes its hit.
	mustOK(t, putNow(store.OutputPutParams{ItemID: docs["dogs.pdf"], JobID: j1.ID, Kind: store.OutputDocument, Value: []byte(`{"replayed":true}`), Now: now}))

	// Text set in the transaction that records the document (the ingest of a leaf) is indexed.
	mustOK(t, st.InTx(ctx, func(x store.Executor) error {
		it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j2.ID, Ordinal: 4, SortKey: "4", Name: "late.txt", ContentType: "text/plain", Now: now})
		if err != nil {
			return err
		}
		text := "written late in the same transaction"
		if err := x.ItemUpdate(ctx, store.ItemUpdateParams{ID: it.ID, Text: &text}); err != nil {
			return err
		}
		docs["late.txt"] = it.ID
		return put(x, store.OutputPutParams{ItemID: it.ID, JobID: j2.ID, Kind: store.OutputDocument, Value: []byte(`{}`), Now: now})
	}))
	// A rolled-back document leaves no hit.
	errRollback := errors.New("roll back")
	err := st.InTx(ctx, func(x store.Executor) error {
		text := "rolledback phantom"
		it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j2.ID, Ordinal: 5, SortKey: "5", Name: "phantom.txt", Text: &text, Now: now})
		if err != nil {
			return err
		}
		if err := put(x, store.OutputPutParams{ItemID: it.ID, JobID: j2.ID, Kind: store.OutputDocument, Value: []byte(`{}`), Now: now}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v, want the rollback", err)
	}

	find := func(p docsearch.SearchParams, q string) []string {
		t.Helper()
		parsed, err := search.Parse(q)
		if err != nil {
			t.Fatalf("Parse(%q): %v", q, err)
		}
		p.Query = parsed
		var names []string
		for _, h := range must(ix.Search(ctx, p))(t) {
			if h.ItemID != docs[h.Name] {
				t.Fatalf("hit %q has item %d, want %d", h.Name, h.ItemID, docs[h.Name])
			}
			names = append(names, h.Name)
		}
		slices.Sort(names)
		return names
	}
	for _, tc := range []struct {
		name, q string
		p       docsearch.SearchParams
		want    []string
	}{
		{"one word", "dog", docsearch.SearchParams{}, []string{"dogs.pdf"}},
		{"case", "DOG", docsearch.SearchParams{}, []string{"dogs.pdf"}},
		{"all words must match", "cat dog", docsearch.SearchParams{}, []string{"dogs.pdf"}},
		{"phrase", `"the cat sat"`, docsearch.SearchParams{}, []string{"pieces.txt"}},
		{"phrase words out of order", `"sat cat"`, docsearch.SearchParams{}, nil},
		{"or", "chateau OR chased", docsearch.SearchParams{}, []string{"candide.txt", "dogs.pdf"}},
		{"exclusion", "cat -dog", docsearch.SearchParams{}, []string{"pieces.txt"}},
		{"negated group", "cat -(dog OR theatre)", docsearch.SearchParams{}, nil},
		{"prefix", "heterog*", docsearch.SearchParams{}, []string{"report-2024.pdf"}},
		{"prefix of several", "cat*", docsearch.SearchParams{}, []string{"dogs.pdf", "pieces.txt", "report-2024.pdf"}},
		{"accent folded", "piece", docsearch.SearchParams{}, []string{"pieces.txt"}},
		{"accent in the query", "élevé", docsearch.SearchParams{}, []string{"candide.txt"}},
		{"accented phrase", `"fut eleve dans"`, docsearch.SearchParams{}, []string{"candide.txt"}},
		{"japanese substring", "羅生門", docsearch.SearchParams{}, []string{"rashomon.txt"}},
		{"japanese two characters", "雨や", docsearch.SearchParams{}, []string{"rashomon.txt"}},
		{"japanese one character", "門", docsearch.SearchParams{}, []string{"rashomon.txt"}},
		{"katakana with a long vowel", "マーケット", docsearch.SearchParams{}, []string{"rashomon.txt"}},
		{"japanese not a substring", "羅門", docsearch.SearchParams{}, nil},
		{"korean substring", "문서", docsearch.SearchParams{}, []string{"korean.txt"}},
		{"korean with particle", "검색할", docsearch.SearchParams{}, []string{"korean.txt"}},
		{"phrase late in a long document", `"analysis of the scalability"`, docsearch.SearchParams{}, []string{"long-repeats.txt"}},
		{"phrase far into a long document", `"filler final words"`, docsearch.SearchParams{}, []string{"long-words.txt"}},
		{"phrase in a long document and a word", `"final words" -dog filler`, docsearch.SearchParams{}, []string{"long-words.txt"}},
		{"not a phrase in a long document", `"words final"`, docsearch.SearchParams{}, nil},
		{"not a phrase of repeated words", `"the of scalability"`, docsearch.SearchParams{}, nil},
		{"title", "report", docsearch.SearchParams{}, []string{"report-2024.pdf"}},
		{"title of a document without text", "notext", docsearch.SearchParams{}, []string{"notext.png"}},
		{"same transaction", `"written late"`, docsearch.SearchParams{}, []string{"late.txt"}},
		{"rolled back", "phantom", docsearch.SearchParams{}, nil},
		{"job filter", "cat*", docsearch.SearchParams{JobID: j2.ID}, []string{"report-2024.pdf"}},
		{"type filter", "cat*", docsearch.SearchParams{ContentType: "application/pdf"}, []string{"dogs.pdf", "report-2024.pdf"}},
		{"metadata filter", "cat*", docsearch.SearchParams{Metadata: []docsearch.KeyValue{{Key: "lang", Value: "fr"}}}, []string{"pieces.txt"}},
		{"metadata number", "cat*", docsearch.SearchParams{Metadata: []docsearch.KeyValue{{Key: "n", Value: "3"}}}, []string{"pieces.txt"}},
		{"metadata missing key", "cat*", docsearch.SearchParams{Metadata: []docsearch.KeyValue{{Key: "nope", Value: "fr"}}}, nil},
	} {
		if got := find(tc.p, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q found %q, want %q", tc.name, tc.q, got, tc.want)
		}
	}

	// Hits come with their document, item and text; the title ranks above the text.
	q, _ := search.Parse("dog*")
	hits := must(ix.Search(ctx, docsearch.SearchParams{Query: q, TextChars: 10}))(t)
	if len(hits) != 2 || hits[0].Name != "dogs.pdf" {
		t.Fatalf("dog* found %d hits, first %+v; want dogs.pdf (word in its title) first", len(hits), hits)
	}
	h := hits[0]
	if h.JobID != j1.ID || h.ContentType != "application/pdf" || string(h.Value) != `{"title":"dogs.pdf"}` || h.Text != "The dog ch" || !jsonEqual(h.Metadata, `{"lang":"en"}`) {
		t.Fatalf("hit = %+v (value %s, metadata %s)", h, h.Value, h.Metadata)
	}

	// Paging: pages of one, each after the last hit, give every hit once, in rank order.
	q, _ = search.Parse("cat* OR dog* OR chateau")
	all := must(ix.Search(ctx, docsearch.SearchParams{Query: q}))(t)
	if len(all) != 4 {
		t.Fatalf("found %d, want 4", len(all))
	}
	var paged []int64
	var after *docsearch.Match
	for range 10 {
		page := must(ix.Search(ctx, docsearch.SearchParams{Query: q, After: after, Limit: 1}))(t)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].ItemID)
		after = page[0]
	}
	var want []int64
	for i, h := range all {
		want = append(want, h.ItemID)
		if i > 0 && h.Rank < all[i-1].Rank {
			t.Fatalf("hits out of rank order: %v then %v", all[i-1].Rank, h.Rank)
		}
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged %v, want %v", paged, want)
	}

	// Only the RankWindow most recent matches are ranked, after the filters.
	q, _ = search.Parse("cat* OR dog* OR chateau")
	var newest []int64
	for _, h := range all {
		newest = append(newest, h.ItemID)
	}
	slices.Sort(newest)
	got := must(ix.Search(ctx, docsearch.SearchParams{Query: q, RankWindow: 2}))(t)
	var gotIDs []int64
	for _, h := range got {
		gotIDs = append(gotIDs, h.ItemID)
	}
	slices.Sort(gotIDs)
	if !slices.Equal(gotIDs, newest[len(newest)-2:]) {
		t.Fatalf("window of 2: found %v, want the newest two of %v", gotIDs, newest)
	}
	if got := find(docsearch.SearchParams{RankWindow: 1, JobID: j1.ID}, "cat* OR dog* OR chateau"); !slices.Equal(got, []string{"dogs.pdf"}) {
		t.Fatalf("window of 1 in job 1: found %v, want the newest match of job 1", got)
	}

	// Every document is indexed: the re-indexer finds nothing to do, but walks them all.
	n, idx := must2(ix.Count(ctx))(t)
	if n != int64(len(docs)) || idx != n {
		t.Fatalf("Count = %d, %d; want %d, %d", n, idx, len(docs), len(docs))
	}
	var seen int
	for after := int64(0); ; {
		var indexed int
		var last int64
		mustOK(t, st.InTx(ctx, func(x store.Executor) error {
			var err error
			indexed, last, err = docsearch.NewIndex(x.DomainSQL()).AddMissing(ctx, docsearch.AddMissingParams{AfterItem: after, Limit: 3})
			return err
		}))
		if indexed != 0 {
			t.Fatalf("AddMissing indexed %d documents the index had", indexed)
		}
		if last == 0 {
			break
		}
		if last <= after {
			t.Fatalf("AddMissing went from %d back to %d", after, last)
		}
		seen++
		after = last
	}
	if seen != (len(docs)+2)/3 {
		t.Fatalf("AddMissing took %d pages of 3 for %d documents", seen, len(docs))
	}
}

func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func must2[A, B any](a A, b B, err error) func(t *testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// jsonEqual reports whether got is the JSON value want, whatever its spacing and key order.
func jsonEqual(got []byte, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// TestIndexMany checks, on every driver, the documents of a transaction followed in one call,
// as the engine hands them over at its end: each document output's item is indexed once (an
// item named twice, or indexed before, changes nothing), other outputs are not, and an item
// that does not exist fails the call.
func TestIndexMany(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		ctx := t.Context()
		st := open(t)
		if _, err := st.MigrateDomain(ctx, docsearch.DomainName, docsearch.Migrations(st.DomainSQL().Dialect())); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		j := must(st.JobInsert(ctx, store.JobInsertParams{Key: "j", WorkflowName: "wf", WorkflowVersion: 1, Now: now}))(t)
		var outs []store.OutputPutParams
		for i, text := range []string{"alpha", "bravo", "charlie"} {
			it, _, err := st.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: i, SortKey: fmt.Sprint(i), Name: text + ".txt", Text: &text, Now: now})
			mustOK(t, err)
			kind := store.OutputDocument
			if text == "charlie" {
				kind = "other"
			}
			outs = append(outs, store.OutputPutParams{ItemID: it.ID, JobID: j.ID, Kind: kind, Value: []byte(`{}`), Now: now})
		}
		// follow records outputs and has the domain follow them, as a transaction's end does.
		follow := func(os []store.OutputPutParams) error {
			return st.InTx(ctx, func(x store.Executor) error {
				for _, o := range os {
					if err := x.OutputPut(ctx, o); err != nil {
						return err
					}
				}
				return docsearch.Domain{}.OutputsRecorded(ctx, x.DomainSQL(), os)
			})
		}
		mustOK(t, follow(outs[:1]))                            // alpha, indexed ahead
		mustOK(t, follow(append(slices.Clone(outs), outs[1]))) // alpha again, bravo twice, charlie not a document
		ix := docsearch.NewIndex(st.DomainSQL())
		for word, want := range map[string]int{"alpha": 1, "bravo": 1, "charlie": 0} {
			q, err := search.Parse(word)
			mustOK(t, err)
			if hits := must(ix.Search(ctx, docsearch.SearchParams{Query: q}))(t); len(hits) != want {
				t.Errorf("%s: %d hits, want %d", word, len(hits), want)
			}
		}
		missing := store.OutputPutParams{ItemID: outs[2].ItemID + 1000, JobID: j.ID, Kind: store.OutputDocument, Now: now}
		err := st.InTx(ctx, func(x store.Executor) error {
			return docsearch.Domain{}.OutputsRecorded(ctx, x.DomainSQL(), []store.OutputPutParams{outs[0], missing})
		})
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("following the document of a missing item: %v, want ErrNotFound", err)
		}
	})
}
