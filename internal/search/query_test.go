package search

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"words", "Hello World", "hello world"},
		{"phrase", `"exact phrase" other`, `"exact phrase" other`},
		{"or", "cat OR dog", "cat OR dog"},
		{"pipe", "cat | dog", "cat OR dog"},
		{"or binds tighter", "a b OR c", "a (b OR c)"},
		{"not", "cat -dog", "cat -dog"},
		{"NOT word", "cat NOT dog", "cat -dog"},
		{"AND is the default", "cat AND dog", "cat dog"},
		{"prefix", "pre*", "pre*"},
		{"phrase prefix", `"new yor"*`, `"new yor"*`},
		{"group", "(a OR b) -c", "(a OR b) -c"},
		{"negated group", "x -(a OR b)", "x -(a OR b)"},
		{"double negation", "x -(-y)", "x y"},
		{"nested flattens", "((a b) c)", "a b c"},
		{"punctuation dropped", "a , b", "a b"},
		{"unclosed quote", `"open phrase`, `"open phrase"`},
		{"dangling or", "a OR", "a"},
		{"hyphenated word is a phrase", "e-mail", "e-mail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			// Words are shown as typed; compare folded.
			if got := q.String(); !strings.EqualFold(got, tt.want) {
				t.Fatalf("Parse(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		op       Op
		tokens   []string
		prefix   bool
	}{
		{"folds diacritics and case", "Pièce", OpTerm, []string{"piece"}, false},
		{"ligature", "ﬁle", OpTerm, []string{"file"}, false},
		{"hyphen splits into a phrase", "e-mail", OpPhrase, []string{"e", "mail"}, false},
		{"japanese substring is a phrase of pairs", "羅生門", OpPhrase, []string{"羅生", "生門"}, false},
		{"two characters are one pair", "東京", OpTerm, []string{"東京"}, false},
		{"one character is a prefix", "門", OpTerm, []string{"門"}, true},
		{"korean", "문서를", OpPhrase, []string{"문서", "서를"}, false},
		{"cjk then latin keeps the last character", "東京abc", OpPhrase, []string{"東京", "京", "abc"}, false},
		{"prefix", "heterog*", OpTerm, []string{"heterog"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			n := q.Root
			if n.Op != tt.op || !slices.Equal(n.Tokens, tt.tokens) || n.Prefix != tt.prefix {
				t.Fatalf("Parse(%q) = op %d tokens %q prefix %v; want op %d %q %v", tt.in, n.Op, n.Tokens, n.Prefix, tt.op, tt.tokens, tt.prefix)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		empty    bool
	}{
		{"empty", "", true},
		{"only punctuation", `-- , "" ()`, true},
		{"only exclusion", "-cat", false},
		{"exclusions only", "-cat -dog", false},
		{"or with an exclusion", "cat OR -dog", false},
		{"unmatched open", "(cat", false},
		{"unmatched close", "cat)", false},
		{"too deep", strings.Repeat("(", 20) + "a" + strings.Repeat(")", 20), false},
		{"too many terms", strings.Repeat("a ", MaxTerms+1), false},
		{"too long", strings.Repeat("a", MaxQueryLen+1), false},
		{"invalid utf-8", "a\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %s, want an error", tt.in, q)
			}
			var se *SyntaxError
			if tt.empty != errors.Is(err, ErrEmpty) || !tt.empty && !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %v (%T)", tt.in, err, err)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	got := Tokens("Comment Candide fut élevé — 東京都 ok")
	want := []string{"comment", "candide", "fut", "eleve", "東京", "京都", "都", "ok"}
	if !slices.Equal(got, want) {
		t.Fatalf("Tokens = %q, want %q", got, want)
	}
}

func TestAnalyzeCaps(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 200_000 {
		b.WriteString("w")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(string(rune('a' + i/26%26)))
		b.WriteString(string(rune('a' + i/676%26)))
		b.WriteString(string(rune('a' + i/17576%26)))
		b.WriteByte(' ')
	}
	d := Analyze("title", b.String())
	if len(d.Body) == 0 || len(d.Body) >= 200_000 {
		t.Fatalf("Analyze kept %d of 200000 tokens, want a cap", len(d.Body))
	}
	size := 0
	seen := map[string]bool{}
	for _, tok := range append(d.Title, d.Body...) {
		if !seen[tok] {
			size += len(tok) + 6
			seen[tok] = true
		}
		size += 2
	}
	if size > MaxIndexBytes {
		t.Fatalf("index size %d passes %d", size, MaxIndexBytes)
	}
}

func TestSnippet(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("filler words here ", 30) + "Comment Candide fut   élevé dans un beau château.\n" + strings.Repeat("more text ", 40)
	tests := []struct {
		name, q, want string
	}{
		{"phrase", `"fut eleve"`, "Candide «fut   élevé» dans"},
		{"accent folded word", "chateau", "beau «château»."},
		{"prefix", "cand*", "Comment «Candide» fut"},
		{"cjk", "羅生", "下人が、«羅生»門の"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := Parse(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			txt := text
			if tt.name == "cjk" {
				txt = "下人が、羅生門の下で雨やみを待っていた"
			}
			got := Snippet(txt, q)
			want := strings.Join(strings.Fields(tt.want), " ")
			if !strings.Contains(got, want) {
				t.Fatalf("Snippet = %q, want it to contain %q", got, want)
			}
			if len(got) > SnippetLen+40 {
				t.Fatalf("Snippet is %d bytes long", len(got))
			}
		})
	}
	q, _ := Parse("absent")
	if got := Snippet("The start of it.", q); got != "The start of it." {
		t.Fatalf("Snippet without a match = %q, want the start of the text", got)
	}
}

// FuzzParse: any string parses or fails cleanly; a parsed query prints as a query that parses
// to the same tree, every node is well formed, and snippets never panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"hello world", `"exact phrase" -not`, "a OR b", "pre*", "(a OR b) -(c d)", "羅生門 OR 문서",
		"pièce", `"unclosed`, "-only", "((((a))))", "a | | b", "NOT NOT a", `"a"* b*c*`, "OR", "-", "東*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.Is(err, ErrEmpty) && !errors.As(err, &se) {
				t.Fatalf("Parse(%q): unexpected error type %T: %v", s, err, err)
			}
			return
		}
		wellFormed(t, q.Root, true)
		printed := q.String()
		q2, err := parse(printed) // the printed form may outgrow MaxQueryLen: | prints as OR
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", s, printed, err)
		}
		if !sameTree(q.Root, q2.Root) {
			t.Fatalf("Parse(%q) printed %q, which parses to %q", s, printed, q2.String())
		}
		_ = Snippet(s, q)
	})
}

func wellFormed(t *testing.T, n *Node, mustMatch bool) {
	t.Helper()
	switch n.Op {
	case OpTerm, OpPhrase:
		if len(n.Tokens) == 0 || n.Op == OpTerm && len(n.Tokens) != 1 || n.Op == OpPhrase && len(n.Tokens) < 2 {
			t.Fatalf("bad term %+v", n)
		}
		for _, tok := range n.Tokens {
			if tok == "" || strings.ContainsAny(tok, " \"'*") {
				t.Fatalf("bad token %q", tok)
			}
		}
	case OpNot:
		if mustMatch || len(n.Kids) != 1 {
			t.Fatalf("misplaced exclusion %s", n)
		}
		wellFormed(t, n.Kids[0], true)
	case OpAnd, OpOr:
		if len(n.Kids) < 2 {
			t.Fatalf("%s has %d kids", n, len(n.Kids))
		}
		pos := false
		for _, k := range n.Kids {
			if k.Op == n.Op {
				t.Fatalf("unflattened %s", n)
			}
			pos = pos || k.Op != OpNot
			wellFormed(t, k, n.Op == OpOr)
		}
		if !pos {
			t.Fatalf("%s has no word that must match", n)
		}
	}
}

func sameTree(a, b *Node) bool {
	if a.Op != b.Op || a.Prefix != b.Prefix || !slices.Equal(a.Tokens, b.Tokens) || len(a.Kids) != len(b.Kids) {
		return false
	}
	for i := range a.Kids {
		if !sameTree(a.Kids[i], b.Kids[i]) {
			return false
		}
	}
	return true
}

func TestFacets(t *testing.T) {
	t.Parallel()
	got := Facets(7, "text/plain", []byte(`{"lang":"fr","n":3,"ok":true,"x":null,"nested":{"a":1}}`))
	want := []string{Facet("job", "7"), Facet("type", "text/plain"), Facet("meta:lang", "fr"), Facet("meta:n", "3"), Facet("meta:ok", "true")}
	if !slices.Equal(got, want) {
		t.Fatalf("Facets = %q, want %q", got, want)
	}
	for _, f := range got {
		if toks := Tokens(f); len(toks) != 1 || toks[0] != f {
			t.Fatalf("facet %q is not one index token: %q", f, toks)
		}
	}
	if Facet("meta:a", "b") == Facet("meta:a", "c") || Facet("job", "1") == Facet("type", "1") {
		t.Fatal("facets collide")
	}
}
