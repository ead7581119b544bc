package html

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

// countNodes returns how many nodes the tree under n holds, n included.
func countNodes(n *html.Node) int {
	c := 1
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		c += countNodes(k)
	}
	return c
}

// repeat returns prefix, then unit over and over to about size bytes.
func repeat(prefix, unit string, size int) string {
	return prefix + strings.Repeat(unit, max(0, size-len(prefix))/len(unit))
}

// misnested returns n formatting start tags of distinct kinds, each left open: every one a
// formatting element the parser keeps and clones before each later text.
func misnested(tag string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "<%s x=%d>", tag, i)
	}
	return b.String()
}

// ignoredEnds returns n formatting elements of distinct kinds whose end tags the parser ignores
// (a <table> stands between), each closed by the </div> around it all the same.
func ignoredEnds(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "<div><b x=%d><table></b></table></div>", i)
	}
	return b.String()
}

// TestLimitNodes: whatever the markup, the tree parsed from what limitNodes keeps holds at most
// the limit's nodes — pages built to make the parser clone formatting elements (hundreds per
// token), to make it tokenize what a tokenizer on its own reads as raw text or a comment (in
// SVG), to make it insert implied elements — and pages within the limit come back as they are.
func TestLimitNodes(t *testing.T) {
	t.Parallel()
	const limit = 20_000
	corpus, err := os.ReadFile(convertertest.File(t, "testHTML_utf8.html"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  string
		cut  bool
	}{
		{"paragraphs", strings.Repeat("<p>", 3*limit), true},
		{"text and tags", repeat("", "<div>a</div>\n", 40*limit), true},
		{"reconstructed after </p>", repeat("<p>"+misnested("b", 500)+"</p>", "<p>x</p>", 1<<20), true},
		{"reconstructed after an ignored </b>", repeat(ignoredEnds(500), "<p>x</p>", 1<<20), true},
		{"reconstructed before tags", repeat("<p>"+misnested("i", 500)+"</p>", "<p><img></p>", 1<<20), true},
		{"closed by </x>", repeat("", "<p><b>x</p>y</b>", 1<<20), true},
		{"misnested a", repeat("", "<a href=1><b x=2><a href=3>x", 1<<20), true},
		{"nobr", repeat("", "<nobr><em x=1><nobr>x", 1<<20), true},
		{"font in svg", repeat("<p>"+misnested("font", 400)+"</p><svg>", "<font>x</font>", 1<<20), true},
		// Read as raw text on their own, as markup by the parser: escaped, text.
		{"svg style", repeat("<svg><style>", "<p>"+misnested("b", 300)+"</p><p>x</p>", 1<<20), false},
		{"svg title", repeat("<svg><title>", "<p>"+misnested("u", 300)+"</p><p>x</p>", 1<<20), false},
		{"svg cdata", repeat("<svg><![CDATA[ > ", "<p>"+misnested("s", 300)+"</p><p>x</p>", 1<<20), true},
		{"tables", repeat("<table>", "<td>x", 1<<20), true},
		{"colgroups", repeat("<table>", "<colgroup> x<col> y", 1<<20), true},
		{"frameset", repeat("<frameset>", "<b>x</b> ", 1<<20), true},
		{"select", repeat("<select>", "<b>x</b><option>y", 1<<20), true},
		{"the corpus page", string(corpus), false},
		{"well-formed links", repeat("<ul>", "<li><a href=\"/a\">item</a></li>\n", 10_000), false},
		{"svg with style", "<p>a<svg><style>a<b{}</style><title>t</title></svg><style>p<b</style>", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cut := limitNodes(tt.doc, limit, MaxBytes)
			if cut != tt.cut {
				t.Errorf("cut = %v, want %v", cut, tt.cut)
			}
			if !cut && !strings.Contains(tt.doc, "<svg") && got != tt.doc {
				t.Errorf("a page within the limit came back changed")
			}
			root, err := html.Parse(strings.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			if n := countNodes(root); n > limit {
				t.Errorf("%d nodes parsed from %d of %d bytes, want at most %d", n, len(got), len(tt.doc), limit)
			}
		})
	}
}

// TestLimitNodesSVGRawText: after an <svg>, a "<" that opens a tag inside raw text is escaped
// (the parser reads that text as markup in SVG, a tokenizer on its own as text) and a
// <noscript>'s inside dropped, while a page's text, SVG and all, is unchanged.
func TestLimitNodesSVGRawText(t *testing.T) {
	t.Parallel()
	doc := `<title>a<b</title><svg><style>x<b{}</style><title>1 < 2 <i>3</i></title></svg>` +
		`<textarea>p<q</textarea><noscript><img src=x></noscript><p>end`
	got, cut := limitNodes(doc, MaxNodes, MaxBytes)
	want := `<title>a<b</title><svg><style>x&lt;b{}</style><title>1 < 2 &lt;i>3&lt;/i></title></svg>` +
		`<textarea>p&lt;q</textarea><noscript></noscript><p>end`
	if cut || got != want {
		t.Errorf("limitNodes = %q, %v; want %q", got, cut, want)
	}
	text := func(s string) string {
		root, err := html.Parse(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return Text(root)
	}
	page := `<html><head><title>Logo & co</title><style>p>b{color:red}</style></head><body>` +
		`<svg viewBox="0 0 10 10"><title>logo</title><style>.a{fill:red}</style><path d="M0 0"/></svg>` +
		`<p>One <b>two</b></p><textarea>1 < 2 <b>x</b></textarea><noscript><p>no script</p></noscript></body></html>`
	got, _ = limitNodes(page, MaxNodes, MaxBytes)
	if a, b := text(page), text(got); a != b || !strings.Contains(b, "1 < 2 <b>x</b>") {
		t.Errorf("text %q, was %q", b, a)
	}
}

// TestParseCut: a document of more than MaxNodes elements is cut, its tree within MaxNodes,
// the text and the PDF made from that tree (Run sets truncated: true when parse says cut).
func TestParseCut(t *testing.T) {
	t.Parallel()
	root, cut, err := parse(strings.Repeat("<p>x", MaxNodes))
	if err != nil || !cut {
		t.Fatalf("parse = %v, cut %v; want cut", err, cut)
	}
	if n := countNodes(root); n > MaxNodes || n < MaxNodes*9/10 {
		t.Errorf("%d nodes, want at most %d and not far below", n, MaxNodes)
	}
	if _, cut, _ := parse("<p>x"); cut {
		t.Error("a short page cut")
	}
}

// TestLimitNodesAlloc compares what parsing allocates for pages of far more nodes than the
// limit, cut and not: the cut page's allocation stays within the limit's worth, where the
// uncut one's grows with the page (37 bytes of <p> per byte; 3 KB for a byte of the page that
// makes the parser clone). Not parallel: it reads the process's allocation counter.
func TestLimitNodesAlloc(t *testing.T) {
	const limit = 20_000
	for _, tt := range []struct{ name, doc string }{
		{"paragraphs", strings.Repeat("<p>", 20*limit)},
		{"reconstructed", repeat("<p>"+misnested("b", 500)+"</p>", "<p>x</p>", 8<<10)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			alloc := func(f func() *html.Node) (uint64, int) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				root := f()
				runtime.ReadMemStats(&after)
				return after.TotalAlloc - before.TotalAlloc, countNodes(root)
			}
			whole, wholeNodes := alloc(func() *html.Node {
				root, err := html.Parse(strings.NewReader(tt.doc))
				if err != nil {
					t.Fatal(err)
				}
				return root
			})
			cut, cutNodes := alloc(func() *html.Node {
				doc, _ := limitNodes(tt.doc, limit, MaxBytes)
				root, err := html.Parse(strings.NewReader(doc))
				if err != nil {
					t.Fatal(err)
				}
				return root
			})
			t.Logf("whole: %d nodes, %d MB allocated; cut: %d nodes, %d MB", wholeNodes, whole>>20, cutNodes, cut>>20)
			if wholeNodes < 10*limit {
				t.Fatalf("the page builds only %d nodes whole: not a test of the limit", wholeNodes)
			}
			if cutNodes > limit || cut > whole/5 {
				t.Errorf("cut: %d nodes, %d bytes allocated; whole: %d bytes", cutNodes, cut, whole)
			}
		})
	}
}

// FuzzLimitNodes: whatever the markup, the tree parsed from what limitNodes keeps holds at
// most the limit's nodes (a small one, which short inputs can pass).
func FuzzLimitNodes(f *testing.F) {
	for _, s := range []string{
		"<p><b x=1><b x=2><b x=3><b x=4></p><p>x</p><p>x</p><p>x</p>",
		"<div><b x=1><table></b></table></div><div><b x=2><table></b></table></div><p>x<p>x<p>x",
		"<a href=1><b x=2><a href=3>x<a>y",
		"<nobr><em x=1><nobr>x<nobr>y",
		"<svg><style><p><b x=1><b x=2></p><p>x<p>y",
		"<svg><![CDATA[ > <p><i x=1><i x=2></p>x<p>y ]]>",
		"<table><colgroup> x<col> y<td>z<tr><td>",
		"<head><template><div></template> x<body>",
		"<svg><font><b>x</b></font></svg><font x=1><font x=2></p>x",
		"<select><b>x</b><option>y</select><b x=1>z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		const limit = 200
		got, _ := limitNodes(doc, limit, MaxBytes)
		root, err := html.Parse(strings.NewReader(got))
		if err != nil {
			return // nested past MaxDepth
		}
		if n := countNodes(root); n > limit {
			t.Errorf("%d nodes from %q", n, got)
		}
	})
}
