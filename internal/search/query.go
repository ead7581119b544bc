// Package search is the query language for finding ingested documents and the text analysis
// the index shares with it. [Parse] turns what a person types — words (all must match),
// "exact phrases", OR, -exclusions, prefix* and parentheses — into a tree of [Node]s whose
// words are already folded into index tokens; each store driver renders that tree into its
// own full-text syntax. [Analyze] turns a document into the tokens the drivers index, so both
// sides fold the same way: case and diacritics are ignored (piece finds pièce), and text in
// scripts written without spaces (Chinese, Japanese, Korean, Thai) is indexed as overlapping
// pairs of characters, so that any substring of it can be found.
package search

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Op is the kind of a [Node].
type Op int

// The kinds of node.
const (
	// OpTerm matches one token (Tokens has one), or any token it begins when Prefix is set.
	OpTerm Op = iota
	// OpPhrase matches its Tokens in order, next to each other; with Prefix the last may
	// begin a longer token.
	OpPhrase
	// OpAnd matches documents every kid matches. At least one kid is not an OpNot.
	OpAnd
	// OpOr matches documents any kid matches. No kid is an OpNot.
	OpOr
	// OpNot, only ever a kid of an OpAnd, excludes the documents its one kid matches.
	OpNot
)

// Node is a node of a parsed query.
type Node struct {
	Op     Op
	Tokens []string // OpTerm and OpPhrase: folded index tokens
	Prefix bool
	Kids   []*Node
	// text is the word or phrase as typed, for String.
	text   string
	quoted bool
}

// Query is a parsed query.
type Query struct {
	Root *Node
}

// Limits on a query, so that a hostile one costs the database little.
const (
	MaxQueryLen = 1000 // bytes
	MaxTerms    = 32   // words and phrases
	maxDepth    = 8    // nested parentheses
)

// ErrEmpty is returned by [Parse] for a query with no word to search for.
var ErrEmpty = errors.New("search: the query has no word to search for")

// SyntaxError is returned by [Parse] for a query it cannot search for; its message is meant for
// the person who typed it.
type SyntaxError struct{ Msg string }

func (e *SyntaxError) Error() string { return "search: " + e.Msg }

func syntaxErr(format string, args ...any) error {
	return &SyntaxError{Msg: fmt.Sprintf(format, args...)}
}

type lexKind int

const (
	lexWord lexKind = iota
	lexPhrase
	lexOpen
	lexClose
	lexOr
)

type lexeme struct {
	kind   lexKind
	text   string
	neg    bool
	prefix bool
}

func lex(s string) []lexeme {
	var out []lexeme
	neg, notWord := false, false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if notWord && !unicode.IsSpace(r) && r != '-' {
			notWord = false
		}
		switch {
		case unicode.IsSpace(r):
			i += n
			neg = notWord // "NOT word" negates past the space; "- word" does not
		case r == '-' && notWord:
			i += n
		case r == '-':
			i += n
			neg = true
		case r == '(':
			out = append(out, lexeme{kind: lexOpen, neg: neg})
			i += n
			neg = false
		case r == ')':
			out = append(out, lexeme{kind: lexClose})
			i += n
			neg = false
		case r == '|':
			out = append(out, lexeme{kind: lexOr})
			i += n
			neg = false
		case r == '"':
			i += n
			end := strings.IndexByte(s[i:], '"')
			var text string
			if end < 0 {
				text, i = s[i:], len(s)
			} else {
				text, i = s[i:i+end], i+end+1
			}
			l := lexeme{kind: lexPhrase, text: text, neg: neg}
			for i < len(s) && s[i] == '*' {
				l.prefix = true
				i++
			}
			out = append(out, l)
			neg = false
		default:
			start := i
			for i < len(s) {
				r, n := utf8.DecodeRuneInString(s[i:])
				if unicode.IsSpace(r) || r == '(' || r == ')' || r == '"' || r == '|' {
					break
				}
				i += n
			}
			w := s[start:i]
			switch w {
			case "OR":
				out = append(out, lexeme{kind: lexOr})
				neg = false
				continue
			case "AND":
				neg = false
				continue
			case "NOT":
				neg, notWord = true, true
				continue
			}
			l := lexeme{kind: lexWord, neg: neg}
			l.text = strings.TrimRight(w, "*")
			l.prefix = len(l.text) < len(w)
			out = append(out, l)
			neg = false
		}
	}
	return out
}

type parser struct {
	toks  []lexeme
	pos   int
	terms int
}

// Parse parses a query:
//
//	word other        documents with both words (in the title or the text)
//	"exact phrase"    the words in this order, next to each other
//	this OR that      either (also "|"); OR binds tighter than the space: a b OR c is a (b OR c)
//	-word, NOT word   without the word; a query needs at least one word that must match
//	pre*              words beginning with pre
//	(a OR b) -c       parentheses group
//
// Case and diacritics are ignored. Chinese, Japanese, Korean and Thai text is matched as a
// substring. It returns [ErrEmpty] when there is no word to search for and a [*SyntaxError]
// for a query it cannot run.
func Parse(s string) (*Query, error) {
	if len(s) > MaxQueryLen {
		return nil, syntaxErr("the query is longer than %d bytes", MaxQueryLen)
	}
	return parse(s)
}

// parse is [Parse] without the bound on the query's length, which is a bound on what a user
// sends: a query's printed form ([Query.String]) may be longer than what was typed (| prints as
// OR).
func parse(s string) (*Query, error) {
	if !utf8.ValidString(s) {
		return nil, syntaxErr("the query is not valid UTF-8")
	}
	p := &parser{toks: lex(s)}
	n, err := p.and(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, syntaxErr("unmatched )")
	}
	n = simplify(n)
	if n == nil {
		return nil, ErrEmpty
	}
	if err := check(n, true); err != nil {
		return nil, err
	}
	return &Query{Root: n}, nil
}

// and parses a sequence of or-groups until ')' or the end.
func (p *parser) and(depth int) (*Node, error) {
	if depth > maxDepth {
		return nil, syntaxErr("parentheses nest deeper than %d", maxDepth)
	}
	and := &Node{Op: OpAnd}
	for p.pos < len(p.toks) && p.toks[p.pos].kind != lexClose {
		if p.toks[p.pos].kind == lexOr {
			p.pos++ // an OR with nothing on its left
			continue
		}
		n, err := p.or(depth)
		if err != nil {
			return nil, err
		}
		and.Kids = append(and.Kids, n)
	}
	return and, nil
}

// or parses unary (OR unary)*.
func (p *parser) or(depth int) (*Node, error) {
	or := &Node{Op: OpOr}
	for {
		n, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		or.Kids = append(or.Kids, n)
		if p.pos < len(p.toks) && p.toks[p.pos].kind == lexOr {
			p.pos++
			if p.pos < len(p.toks) && p.toks[p.pos].kind != lexClose && p.toks[p.pos].kind != lexOr {
				continue
			}
		}
		return or, nil
	}
}

func (p *parser) unary(depth int) (*Node, error) {
	l := p.toks[p.pos]
	p.pos++
	var n *Node
	switch l.kind {
	case lexOpen:
		inner, err := p.and(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.pos >= len(p.toks) {
			return nil, syntaxErr("unmatched (")
		}
		p.pos++ // ')'
		n = inner
	case lexWord, lexPhrase:
		p.terms++
		if p.terms > MaxTerms {
			return nil, syntaxErr("the query has more than %d words and phrases", MaxTerms)
		}
		n = term(l)
	default:
		return nil, syntaxErr("unexpected %q", l.text)
	}
	if l.neg && n != nil {
		n = &Node{Op: OpNot, Kids: []*Node{n}}
	}
	return n, nil
}

// term makes the node of a word or phrase, nil when it holds no token.
func term(l lexeme) *Node {
	toks := queryTokens(l.text)
	if len(toks) == 0 {
		return nil
	}
	n := &Node{Op: OpTerm, Tokens: toks, Prefix: l.prefix, text: l.text, quoted: l.kind == lexPhrase}
	if last := toks[len(toks)-1]; utf8.RuneCountInString(last) == 1 {
		if r, _ := utf8.DecodeRuneInString(last); segmentless(r) {
			n.Prefix = true // one character: any pair it begins
		}
	}
	if len(toks) > 1 {
		n.Op = OpPhrase
	}
	return n
}

// simplify drops empty nodes, flattens nested ANDs and ORs, unwraps single kids and double
// negations.
func simplify(n *Node) *Node {
	if n == nil {
		return nil
	}
	switch n.Op {
	case OpTerm, OpPhrase:
		return n
	case OpNot:
		k := simplify(n.Kids[0])
		if k == nil {
			return nil
		}
		if k.Op == OpNot {
			return k.Kids[0]
		}
		return &Node{Op: OpNot, Kids: []*Node{k}}
	}
	out := &Node{Op: n.Op}
	for _, k := range n.Kids {
		k = simplify(k)
		switch {
		case k == nil:
		case k.Op == n.Op:
			out.Kids = append(out.Kids, k.Kids...)
		default:
			out.Kids = append(out.Kids, k)
		}
	}
	switch len(out.Kids) {
	case 0:
		return nil
	case 1:
		return out.Kids[0]
	}
	return out
}

// check rejects what no full-text index can answer: an exclusion with nothing to exclude from.
func check(n *Node, mustMatch bool) error {
	switch n.Op {
	case OpNot:
		if mustMatch {
			return syntaxErr("%s only excludes: add a word that must match", n)
		}
		return check(n.Kids[0], true)
	case OpAnd:
		pos := false
		for _, k := range n.Kids {
			if k.Op != OpNot {
				pos = true
			}
			if err := check(k, false); err != nil {
				return err
			}
		}
		if !pos {
			return syntaxErr("%s only excludes: add a word that must match", n)
		}
	case OpOr:
		for _, k := range n.Kids {
			if err := check(k, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// String returns the query in the query language, parenthesised; parsing it gives the same tree.
func (q *Query) String() string { return q.Root.String() }

func (n *Node) String() string {
	var b strings.Builder
	n.write(&b, false)
	return b.String()
}

func (n *Node) write(b *strings.Builder, nested bool) {
	switch n.Op {
	case OpTerm, OpPhrase:
		text := n.text
		if text == "" {
			text = strings.Join(n.Tokens, " ")
		}
		if n.quoted || needsQuotes(text) {
			b.WriteString(`"` + text + `"`)
		} else {
			b.WriteString(text)
		}
		if n.Prefix && !singleSegmentless(n) {
			b.WriteByte('*')
		}
	case OpNot:
		b.WriteByte('-')
		n.Kids[0].write(b, true)
	case OpAnd, OpOr:
		if nested {
			b.WriteByte('(')
		}
		for i, k := range n.Kids {
			if i > 0 {
				if n.Op == OpOr {
					b.WriteString(" OR ")
				} else {
					b.WriteByte(' ')
				}
			}
			k.write(b, true)
		}
		if nested {
			b.WriteByte(')')
		}
	}
}

// singleSegmentless reports whether the term's prefix comes from ending in one CJK character,
// which Parse sets by itself.
func singleSegmentless(n *Node) bool {
	last := n.Tokens[len(n.Tokens)-1]
	r, size := utf8.DecodeRuneInString(last)
	return size == len(last) && segmentless(r)
}

func needsQuotes(w string) bool {
	switch w {
	case "OR", "AND", "NOT":
		return true
	}
	if w == "" || w[0] == '-' || strings.HasSuffix(w, "*") {
		return true
	}
	return strings.ContainsFunc(w, func(r rune) bool {
		return unicode.IsSpace(r) || r == '(' || r == ')' || r == '"' || r == '|'
	})
}

// Terms returns the words and phrases a document must or may contain (those not under an
// OpNot), for marking them in a snippet.
func (q *Query) Terms() []*Node {
	var out []*Node
	var walk func(n *Node)
	walk = func(n *Node) {
		switch n.Op {
		case OpTerm, OpPhrase:
			out = append(out, n)
		case OpAnd, OpOr:
			for _, k := range n.Kids {
				walk(k)
			}
		}
	}
	walk(q.Root)
	return out
}
