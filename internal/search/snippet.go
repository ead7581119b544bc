package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Marks around a matched word or phrase in a snippet.
const (
	MarkStart = "«"
	MarkEnd   = "»"
)

// SnippetLen is about how many bytes of text a snippet shows.
const SnippetLen = 240

// Span is the bytes [Start, End) of a text.
type Span struct{ Start, End int }

// Matches returns where the words and phrases of q (not the excluded ones) match in text, in
// order and not overlapping, at most limit of them (limit <= 0: every one).
func Matches(text string, q *Query, limit int) []Span {
	terms := q.Terms()
	var toks []string
	var spans []Span
	t := tokenizer{s: text}
	for {
		tok, ok := t.next()
		if !ok {
			break
		}
		toks = append(toks, tok)
		spans = append(spans, Span{t.start, t.end})
	}
	var hits []Span
	for i := range toks {
		if limit > 0 && len(hits) == limit {
			break
		}
		if len(hits) > 0 && spans[i].Start < hits[len(hits)-1].End {
			continue
		}
		for _, term := range terms {
			if k := matchAt(toks[i:], term); k > 0 {
				hits = append(hits, Span{spans[i].Start, spans[i+k-1].End})
				break
			}
		}
	}
	return hits
}

// Snippet returns a short passage of text around the first place a word or phrase of q matches
// (not an excluded one), with every match in it between [MarkStart] and [MarkEnd], whitespace
// collapsed, and "…" where text was cut. Without a match in text (a document found by its
// title) it returns the beginning of text.
func Snippet(text string, q *Query) string {
	hits := Matches(text, q, 0)
	from, to := 0, min(len(text), SnippetLen)
	if len(hits) > 0 {
		from = max(0, hits[0].Start-SnippetLen/3)
		to = min(len(text), from+SnippetLen)
	}
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to++
	}
	// Cut at spaces where there are some near.
	if from > 0 {
		if i := strings.IndexFunc(text[from:min(len(text), from+20)], unicode.IsSpace); i >= 0 && (len(hits) == 0 || from+i < hits[0].Start) {
			from += i
		}
	}
	if to < len(text) {
		if i := strings.LastIndexFunc(text[max(from, to-20):to], unicode.IsSpace); i >= 0 {
			to = max(from, to-20) + i
		}
	}
	var b strings.Builder
	if from > 0 {
		b.WriteString("…")
	}
	at := from
	for _, h := range hits {
		if h.Start < at || h.End > to {
			continue
		}
		writeCollapsed(&b, text[at:h.Start])
		b.WriteString(MarkStart)
		writeCollapsed(&b, text[h.Start:h.End])
		b.WriteString(MarkEnd)
		at = h.End
	}
	writeCollapsed(&b, text[at:to])
	out := strings.TrimSpace(b.String())
	if to < len(text) {
		out += "…"
	}
	return out
}

// matchAt returns how many tokens of toks the term matches at their start, or 0.
func matchAt(toks []string, term *Node) int {
	if len(toks) < len(term.Tokens) {
		return 0
	}
	for j, want := range term.Tokens {
		got := toks[j]
		if j == len(term.Tokens)-1 && term.Prefix {
			if !strings.HasPrefix(got, want) {
				return 0
			}
		} else if got != want {
			return 0
		}
	}
	return len(term.Tokens)
}

func writeCollapsed(b *strings.Builder, s string) {
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	if space {
		b.WriteByte(' ')
	}
}
