package search

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxIndexBytes bounds what one document puts in the index, so that every driver can hold it:
// PostgreSQL refuses a tsvector over 1 MB (its lexemes, plus 4 bytes each, plus 2 per position).
// [Analyze] stops taking tokens once its estimate of that size passes this; the rest of a very
// long document's text is not searchable. It is about 100,000 words of ordinary prose.
const MaxIndexBytes = 800_000

// MaxIndexTokens bounds how many tokens of a document are indexed, whatever their size.
const MaxIndexTokens = 200_000

// maxPositions is how many positions PostgreSQL keeps per lexeme.
const maxPositions = 256

// segmentless reports whether r belongs to a script written without spaces between words (Han,
// kana, and Hangul, whose words carry particles): text in it is indexed as overlapping pairs
// of characters, so that any substring of two characters or more is a phrase of pairs.
func segmentless(r rune) bool {
	if r < 0x1100 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Thai) ||
		r == 0x30FC || r == 0x3005 // the katakana long vowel mark and the ideographic iteration mark
}

// wordRune reports whether r is part of a word (letters, digits and the marks that go with them).
func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

// appendFolded appends r folded for matching: lower case, compatibility forms decomposed (ﬁ → fi,
// full-width Ａ → a) and diacritics removed (è → e).
func appendFolded(b []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return append(b, byte(r))
	}
	if r < rune(len(foldLatin)) {
		return append(b, foldLatin[r]...)
	}
	return appendFoldedSlow(b, r)
}

// foldLatin holds the folded form of the Latin-1 and Latin Extended runes, the accented
// letters of most European text, which would otherwise each take a trip through norm.
var foldLatin = func() (t [0x250]string) {
	for r := range rune(len(t)) {
		t[r] = string(appendFoldedSlow(nil, r))
	}
	return t
}()

func appendFoldedSlow(b []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		return append(b, byte(unicode.ToLower(r)))
	}
	if unicode.Is(unicode.Mn, r) {
		return b // a combining diacritic
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	if norm.NFKD.IsNormal(buf[:n]) {
		return utf8.AppendRune(b, unicode.ToLower(r))
	}
	for _, d := range norm.NFKD.String(string(r)) {
		// A compatibility decomposition may hold a space (U+037A is " \u0345"): never in a word.
		if !unicode.Is(unicode.Mn, d) && !unicode.IsSpace(d) {
			b = utf8.AppendRune(b, unicode.ToLower(d))
		}
	}
	return b
}

// tokenizer splits text into the index's tokens: folded words, and pairs of characters of
// segmentless scripts. A run of segmentless characters ab…yz gives ab, bc, …, yz and then z
// alone, so that the last character can be found too and phrases continue across the run's end.
type tokenizer struct {
	s   string
	i   int
	run []rune // the segmentless run being emitted
	ri  int    // next pair of run to emit; len(run)-1 emits the last rune alone
	// query omits the last character alone of a run that ends the text, so a substring at the end
	// of a query matches text that goes on after it.
	query bool
	buf   []byte
	// start and end are the bytes of s the last token came from.
	start, end int
	runAt      []int // the offset of each rune of run, and the run's end
}

// next returns the next token and true, or false at the end of the text. The token is valid
// until the following call.
func (t *tokenizer) next() (string, bool) {
	for {
		if t.run != nil {
			if t.ri < len(t.run)-1 {
				t.buf = utf8.AppendRune(utf8.AppendRune(t.buf[:0], t.run[t.ri]), t.run[t.ri+1])
				t.start, t.end = t.runAt[t.ri], t.runAt[t.ri+2]
				t.ri++
				return string(t.buf), true
			}
			last := t.run[len(t.run)-1]
			single := len(t.run) == 1
			t.start, t.end = t.runAt[len(t.run)-1], t.runAt[len(t.run)]
			t.run = nil
			if single || !t.query || t.moreWords() {
				t.buf = utf8.AppendRune(t.buf[:0], last)
				return string(t.buf), true
			}
			continue
		}
		if t.i >= len(t.s) {
			return "", false
		}
		r, n := utf8.DecodeRuneInString(t.s[t.i:])
		switch {
		case segmentless(r):
			var run []rune
			t.runAt = t.runAt[:0]
			for t.i < len(t.s) {
				r, n := utf8.DecodeRuneInString(t.s[t.i:])
				if !segmentless(r) && !(len(run) > 0 && unicode.In(r, unicode.Mn, unicode.Mc)) {
					break
				}
				run = append(run, r)
				t.runAt = append(t.runAt, t.i)
				t.i += n
			}
			t.runAt = append(t.runAt, t.i)
			t.run, t.ri = run, 0
		case wordRune(r):
			t.buf = t.buf[:0]
			t.start = t.i
			for t.i < len(t.s) {
				r, n := utf8.DecodeRuneInString(t.s[t.i:])
				if !wordRune(r) || segmentless(r) {
					break
				}
				t.buf = appendFolded(t.buf, r)
				t.i += n
			}
			if len(t.buf) > 0 {
				t.end = t.i
				return string(t.buf), true
			}
		default:
			t.i += n
		}
	}
}

// moreWords reports whether a token follows in the rest of the text.
func (t *tokenizer) moreWords() bool {
	for _, r := range t.s[t.i:] {
		if wordRune(r) || segmentless(r) {
			return true
		}
	}
	return false
}

// Tokens returns the index tokens of s, as [Analyze] finds them.
func Tokens(s string) []string {
	t := tokenizer{s: s}
	var out []string
	for {
		tok, ok := t.next()
		if !ok {
			return out
		}
		out = append(out, tok)
	}
}

// queryTokens returns the tokens a query word or phrase must match in order.
func queryTokens(s string) []string {
	t := tokenizer{s: s, query: true}
	var out []string
	for {
		tok, ok := t.next()
		if !ok {
			return out
		}
		out = append(out, tok)
	}
}

// Fold returns s folded as the index folds words: lower case, without diacritics.
func Fold(s string) string {
	var b []byte
	for _, r := range s {
		b = appendFolded(b, r)
	}
	return string(b)
}

// Doc is a document as the index holds it: the tokens of its title and of its text, in order.
// Drivers store it in their own form.
type Doc struct {
	Title, Body []string
}

// Analyze returns the tokens of a document's title (its path) and text, stopping when the
// document would pass [MaxIndexBytes] in the index or [MaxIndexTokens].
func Analyze(title, text string) Doc {
	var d Doc
	size := 0
	seen := map[string]int{}
	add := func(tok string) bool {
		n := seen[tok]
		if n == 0 {
			size += len(tok) + 4 + 2
		}
		if n < maxPositions {
			size += 2
		}
		seen[tok] = n + 1
		return size <= MaxIndexBytes && len(d.Title)+len(d.Body) < MaxIndexTokens
	}
	for _, tok := range Tokens(title) {
		if !add(tok) {
			return d
		}
		d.Title = append(d.Title, tok)
	}
	t := tokenizer{s: text}
	for {
		tok, ok := t.next()
		if !ok || !add(tok) {
			return d
		}
		d.Body = append(d.Body, tok)
	}
}

// Joined returns tokens separated by spaces.
func Joined(tokens []string) string { return strings.Join(tokens, " ") }

// Facet returns the index token that stands for a filter: a document's job, content type or a
// metadata value, indexed with its words so that a filtered search is one index lookup. name
// is "job", "type" or "meta:" followed by the metadata key. The token is a hash, all letters
// and digits, that no word of a query can produce by chance.
func Facet(name, value string) string {
	h := sha256.Sum256([]byte(name + "\x00" + value))
	return "zzf" + hex.EncodeToString(h[:10])
}

// Facets returns the facet tokens of a document: its job, its content type, and each top-level
// key of its metadata (a JSON object) whose value is a string, a number (in its JSON form) or a
// boolean.
func Facets(jobID int64, contentType string, metadata []byte) []string {
	out := []string{Facet("job", strconv.FormatInt(jobID, 10))}
	if contentType != "" {
		out = append(out, Facet("type", contentType))
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return out
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := MetadataText(m[k]); ok {
			out = append(out, Facet("meta:"+k, v))
		}
	}
	return out
}

// MetadataText returns the text a metadata filter compares with a JSON value: a string's
// contents, a number or boolean as written; false for null, objects and arrays.
func MetadataText(v json.RawMessage) (string, bool) {
	var x any
	d := json.NewDecoder(strings.NewReader(string(v)))
	d.UseNumber()
	if d.Decode(&x) != nil {
		return "", false
	}
	switch x := x.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}
