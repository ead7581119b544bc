package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// searchSubset is the corpus files whose expected.json phrases the search test queries: every
// file with phrases but the archives of other corpus files and the hostile ones.
var searchSubset = []string{
	"testJournalParser.pdf", "issue16538.pdf", "testPDF_acroform3.pdf", "testWORD_various.docx", "testWORD_various.doc",
	"testEXCEL.xlsx", "testEXCEL.xls", "testPPT_various.pptx", "testPPT.ppt", "LibreOfficeWriter_odt_1.3.odt",
	"LibreOfficeCalc_ods_1.3.ods", "LibreOfficeImpress_odp_1.3.odp", "testRTFVarious.rtf", "testTXTNonASCIIUTF8.txt",
	"testHTML_charset_utf16le.html", "candide-utf-16le.txt", "candide-windows-1252.txt", "rashomon-shift-jis.txt",
	"testCSV.csv", "metadata-keys-3x.json", "testXML.xml", "testHTML_utf8.html", "testMARKDOWN.md",
	"testRFC822_normal_zip", "testMSG_att_msg.msg", "complex.mbox", "testPNG.png",
}

// The corpus has Japanese (kana and kanji) but no Korean or Chinese text: the test adds a file
// of each, written here.
var searchExtra = map[string]string{
	"korean.txt":  "이 문서를 검색할 수 있습니다. 한국어 텍스트입니다.",
	"chinese.txt": "中华人民共和国是一个国家。全文检索测试。",
}

// searchCase is a query with documents it must find (by root file) and must not.
type searchCase struct {
	name, q          string
	include, exclude []string
}

// TestCorpusSearch ingests the corpus files with phrases once per driver through the real binary
// and runs a table of queries through `sluice documents search --output json`: every phrase of
// expected.json, a phrase, an OR, an exclusion, a prefix, accent-folded words, and Korean,
// Japanese and Chinese substrings. Each must return exactly the documents that a reference
// evaluation of the query over the documents' own text finds (no more, no fewer), which must
// include the files the case names and none it excludes.
func TestCorpusSearch(t *testing.T) {
	t.Parallel()
	dir, exps := loadCorpus(t)
	var tools []string
	for _, f := range searchSubset {
		tools = append(tools, toolsFor(f)...)
	}
	skipWithoutTools(t, tools)
	files := subsetArgs(t, dir, searchSubset)
	extra := t.TempDir()
	for name, text := range searchExtra {
		p := filepath.Join(extra, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	slices.Sort(files)

	var cases []searchCase
	for _, e := range exps {
		if !slices.Contains(searchSubset, e.File) {
			continue
		}
		for _, p := range e.Phrases {
			cases = append(cases, searchCase{name: "phrase of " + e.File, q: `"` + p + `"`, include: []string{e.File}})
		}
	}
	cases = append(cases,
		searchCase{name: "phrase", q: `"fut élevé dans un beau château"`, include: []string{"candide-utf-16le.txt", "candide-windows-1252.txt"}},
		searchCase{name: "or", q: "羅生門 OR Heterogenous", include: []string{"rashomon-shift-jis.txt", "testJournalParser.pdf"}},
		searchCase{name: "exclusion", q: `"Here is a numbered list" -rtf`, include: []string{"testWORD_various.docx", "testWORD_various.doc"}, exclude: []string{"testRTFVarious.rtf"}},
		searchCase{name: "prefix", q: "Heterogen*", include: []string{"testJournalParser.pdf"}},
		searchCase{name: "accent folded", q: "chateau", include: []string{"candide-utf-16le.txt", "candide-windows-1252.txt"}},
		searchCase{name: "accents folded in a phrase", q: `"Archimede et Lius a Chateauneuf"`, include: []string{"testXML.xml"}},
		searchCase{name: "accent folded words", q: "naive resume cafe", include: []string{"testMARKDOWN.md"}},
		searchCase{name: "title", q: "testCSV", include: []string{"testCSV.csv"}},
		searchCase{name: "japanese substring", q: "ケットモデ", include: []string{"issue16538.pdf"}},
		searchCase{name: "japanese kanji substring", q: "生門の下", include: []string{"rashomon-shift-jis.txt"}},
		searchCase{name: "korean substring", q: "문서", include: []string{"korean.txt"}},
		searchCase{name: "korean across a space", q: `"검색할 수"`, include: []string{"korean.txt"}},
		searchCase{name: "chinese substring", q: "人民共和", include: []string{"chinese.txt"}},
		searchCase{name: "not a substring", q: "人民和共", exclude: []string{"chinese.txt"}},
	)

	t.Run("sqlite", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		runSearchCases(t, cases, data, nil, files, func() store.Store {
			n, err := node.Open(t.Context(), node.Config{DataDir: data})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			return n.Store
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dbURL := postgresURL(t)
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		schema := "sluice_search_" + hex.EncodeToString(b)
		t.Cleanup(func() {
			if conn, err := pgx.Connect(context.Background(), dbURL); err == nil {
				conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				conn.Close(context.Background())
			}
		})
		sep := "?"
		if strings.Contains(dbURL, "?") {
			sep = "&"
		}
		env := append(os.Environ(), "SLUICE_DATABASE="+dbURL+sep+"sluice_schema="+schema)
		runSearchCases(t, cases, filepath.Join(t.TempDir(), "data"), env, files, func() store.Store {
			st, err := postgres.Open(t.Context(), postgres.Config{URL: dbURL, Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
}

func runSearchCases(t *testing.T, cases []searchCase, data string, env []string, files []string, open func() store.Store) {
	ctx := t.Context()
	cmd := runSluice(ctx, append([]string{"ingest", "--data", data}, files...)...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v\n%s", err, tail(out))
	}
	st := open()
	docs := documentsOf(t, st)
	if len(docs) < len(files) {
		t.Fatalf("%d documents from %d files", len(docs), len(files))
	}
	checkSearchIndex(t, st)
	for _, tc := range cases {
		t.Run(tc.name+" "+tc.q, func(t *testing.T) {
			q, err := search.Parse(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64]string{}
			for _, d := range docs {
				if d.matches(q.Root) {
					want[d.id] = d.name
				}
			}
			cmd := runSluice(ctx, "documents", "search", "--data", data, "--limit", "1000", "--output", "json", tc.q)
			cmd.Env = env
			cmd.Stderr = nil
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("search: %v\n%s", err, out)
			}
			var res struct {
				Hits []struct {
					ID      int64  `json:"id"`
					Title   string `json:"title"`
					Snippet string `json:"snippet"`
				} `json:"hits"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := map[int64]string{}
			for _, h := range res.Hits {
				got[h.ID] = h.Title
				if want[h.ID] != "" && !strings.Contains(h.Snippet, search.MarkStart) && !tc.titleOnly(h.Title) {
					t.Errorf("hit %s: snippet %q marks nothing", h.Title, h.Snippet)
				}
			}
			for id, name := range want {
				if got[id] == "" {
					t.Errorf("missing %s (document %d)", name, id)
				}
			}
			for id, name := range got {
				if want[id] == "" {
					t.Errorf("found %s (document %d), which does not match", name, id)
				}
			}
			for _, root := range tc.include {
				if !slices.ContainsFunc(mapValues(want), func(n string) bool { return fromRoot(n, root) }) {
					t.Errorf("no document of %s matches (the reference found %v)", root, mapValues(want))
				}
			}
			for _, root := range tc.exclude {
				if slices.ContainsFunc(mapValues(got), func(n string) bool { return fromRoot(n, root) }) {
					t.Errorf("a document of %s was found", root)
				}
			}
		})
	}
}

// titleOnly reports whether the case finds documents by their title, where the snippet (made
// from the text) has nothing to mark.
func (tc searchCase) titleOnly(title string) bool { return tc.name == "title" }

func mapValues(m map[int64]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// doc is a document as the reference evaluation sees it: its tokens, as the index holds them.
type doc struct {
	id          int64
	name        string
	title, body []string
}

func documentsOf(t *testing.T, st store.Store) []doc {
	t.Helper()
	var out []doc
	for after := int64(0); ; {
		outs, err := st.OutputList(t.Context(), store.OutputListParams{Kind: store.OutputDocument, AfterItem: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) == 0 {
			return out
		}
		for _, o := range outs {
			it, err := st.ItemGet(t.Context(), o.ItemID)
			if err != nil {
				t.Fatal(err)
			}
			a := search.Analyze(it.Name, it.Text)
			out = append(out, doc{id: it.ID, name: it.Name, title: a.Title, body: a.Body})
			after = o.ItemID
		}
	}
}

// matches evaluates a query on the document: the reference the index is held to.
func (d doc) matches(n *search.Node) bool {
	switch n.Op {
	case search.OpTerm, search.OpPhrase:
		return hasSeq(d.title, n) || hasSeq(d.body, n)
	case search.OpAnd:
		for _, k := range n.Kids {
			if k.Op == search.OpNot {
				if d.matches(k.Kids[0]) {
					return false
				}
			} else if !d.matches(k) {
				return false
			}
		}
		return true
	case search.OpOr:
		return slices.ContainsFunc(n.Kids, d.matches)
	}
	return false
}

func hasSeq(toks []string, n *search.Node) bool {
	for i := 0; i+len(n.Tokens) <= len(toks); i++ {
		ok := true
		for j, want := range n.Tokens {
			got := toks[i+j]
			if j == len(n.Tokens)-1 && n.Prefix {
				ok = strings.HasPrefix(got, want)
			} else {
				ok = got == want
			}
			if !ok {
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// checkSearchIndex checks that the search index holds exactly the documents: as many rows as
// documents, none missing (the re-indexer finds none to add), and documents found by their
// names.
func checkSearchIndex(t *testing.T, st store.Store) {
	t.Helper()
	ctx := t.Context()
	ix := docsearch.NewIndex(st.DomainSQL())
	docs, indexed, err := ix.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if docs == 0 || indexed != docs {
		t.Fatalf("search index: %d rows for %d documents", indexed, docs)
	}
	for after := int64(0); ; {
		var n int
		var last int64
		err := st.InTx(ctx, func(x store.Executor) error {
			var err error
			n, last, err = docsearch.NewIndex(x.DomainSQL()).AddMissing(ctx, docsearch.AddMissingParams{AfterItem: after, Limit: 1000})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("search index: %d documents after item %d were missing", n, after)
		}
		if last == 0 {
			break
		}
		after = last
	}
	// A sample found by name: the rows hold the documents' own tokens.
	outs, err := st.OutputList(ctx, store.OutputListParams{Kind: store.OutputDocument, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		it, err := st.ItemGet(ctx, o.ItemID)
		if err != nil {
			t.Fatal(err)
		}
		q, err := search.Parse(`"` + it.Name + `"`)
		if err != nil {
			t.Fatalf("query for %q: %v", it.Name, err)
		}
		hits, err := ix.Search(ctx, docsearch.SearchParams{Query: q, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(hits, func(h *docsearch.Match) bool { return h.ItemID == it.ID }) {
			t.Errorf("search for %q does not find document %d", it.Name, it.ID)
		}
	}
	t.Logf("search index: %d documents, all indexed, no orphan rows", docs)
}
