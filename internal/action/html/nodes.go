package html

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
)

// MaxNodes is how many nodes (elements, text, comments) the HTML parser may build for one
// document. A document that could build more is cut before the first token that could pass
// the limit, and its child's metadata says truncated: true; the largest real pages build a
// few hundred thousand. At the limit the parser's tree takes 100 to 160 MB (bare elements,
// elements with an attribute).
const MaxNodes = 1_000_000

// The parser (golang.org/x/net/html) builds a node for most tokens, a few implied ones (html,
// head, body, tbody, tr, colgroup), and clones of formatting elements (a, b, font, i, …):
// before each text or start tag it clones every formatting element that an end tag closed
// implicitly ("reconstructing the active formatting elements"), as many as 511 for one token,
// and the adoption agency clones up to 32 for a misnested one. So 1 MiB of
// "<p><b x=1>…<b x=500></p>" then "<p>x</p>" over and over builds 65 million nodes (10 GB),
// and the number of tokens bounds nothing. limitNodes charges each token what it could build,
// knowing only the tokens: the formatting elements an end tag certainly closed (the last one
// opened, with nothing but text and other formatting elements since) cost nothing; any other
// counts as open and is charged, three per tag and attributes (the parser keeps no more of one
// kind), on every later text and start tag.
const (
	maxClones = 511 // what one reconstruction may clone: the open elements but the <html>
	adoption  = 32  // what one adoption agency may build: 8 rounds of at most 4 clones
)

// limitNodes returns a prefix of doc whose parse builds at most maxNodes nodes (cut between
// tokens) and whether it cut anything; the prefix is also cut to at most max(len(doc),
// maxBytes) bytes. Once the document has an <svg> or <math> start tag it also makes doc's
// tokens the parser's: the parser tokenizes the inside of a <style>, <title>, <script>… in SVG
// or MathML as markup, and reads <![CDATA[…]]> there, where a tokenizer on its own sees raw
// text and a comment. So from there a "<" opening a tag inside raw text is written "&lt;" (in
// <title> and <textarea> that reads as before), the inside of a <script> or <noscript> is
// dropped (the text leaves both out; Chromium, running no scripts, would show a <noscript>'s
// escaped markup as text where it showed its elements), and a comment starting "<![CDATA[" is
// left out. A document with neither comes back as it is, or cut.
func limitNodes(doc string, maxNodes, maxBytes int) (string, bool) {
	maxBytes = max(maxBytes, len(doc))
	z := html.NewTokenizer(strings.NewReader(doc))
	var (
		// <html>, <head> and <body>, made up or not, and the white space before <body>
		// that the parser may insert apart from the text after it (twice at most: it
		// leaves <head>, then makes <body>).
		b       = budget{used: 5}
		out     strings.Builder
		changed bool // out holds the document so far, changed
		off     int  // bytes of doc read
		size    int  // bytes of the prefix so far
		foreign bool // an <svg> or <math> was opened: the parser's tokenizer may differ
		rawNext string
	)
	// keep appends doc[off:off+n], or s in its place when changed is set.
	keep := func(n int, s string) {
		if s != doc[off:off+n] && !changed {
			changed = true
			out.Grow(len(doc))
			out.WriteString(doc[:off])
		}
		if changed {
			out.WriteString(s)
		}
		size += len(s)
	}
	cut := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break // the reader is a string: the end of it
		}
		n := len(z.Raw())
		tok := doc[off : off+n]
		inRaw := rawNext
		rawNext = ""
		cost, text := 0, tok
		switch tt {
		case html.TextToken:
			cost = 1 + b.clones
			if foreign && inRaw != "" {
				if inRaw == "script" || inRaw == "noscript" {
					text = ""
				} else {
					text = escapeTags(tok)
				}
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			tag := string(name)
			var attrs bytes.Buffer
			breakout := false // a <font> that leaves SVG or MathML
			for more {
				var k, v []byte
				k, v, more = z.TagAttr()
				attrs.Write(k)
				attrs.WriteByte('=')
				attrs.Write(v)
				attrs.WriteByte(0)
				switch string(k) {
				case "color", "face", "size":
					breakout = true
				}
			}
			switch tag {
			case "svg", "math":
				foreign = true
			case "iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp":
				rawNext = tag
			}
			cost = 1 + implied(tag)
			switch {
			case !formatting(tag):
				cost += b.clones
				b.flush()
			case tag == "a" && b.has("a"), tag == "nobr":
				// The adoption agency may close any open element first, then clone
				// what it closed: nothing is certain any more.
				b.flush()
				cost += adoption + 2*b.clones
				b.open(tag, tag+"\x00"+attrs.String(), false)
			default:
				cost += b.clones
				b.open(tag, tag+"\x00"+attrs.String(), foreign && tag == "font" && !breakout)
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			switch {
			case formatting(tag):
				if phantom, ok := b.close(tag); !ok || phantom {
					cost = adoption
					b.flush()
				}
			case tag == "br":
				cost = 1 + b.clones
				b.flush()
			case tag == "p":
				cost = 1 // a </p> with no <p> open makes one
				b.flush()
			case tag == "template":
				cost = 1 // see implied
				b.flush()
			default:
				b.flush()
			}
		case html.CommentToken:
			if foreign && strings.HasPrefix(tok, "<![CDATA[") {
				text = ""
			} else {
				cost = 1
			}
		default: // a doctype
			cost = 1
			b.flush()
		}
		if b.used+cost > maxNodes || size+len(text) > maxBytes {
			cut = true
			break
		}
		b.used += cost
		keep(n, text)
		off += n
	}
	switch {
	case changed:
		return out.String(), cut
	case cut:
		return doc[:off], true
	}
	return doc, false
}

// escapeTags writes "&lt;" for each "<" in s that markup would read as the start of a tag,
// a comment or an end tag.
func escapeTags(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '<' && i+1 < len(s) {
			switch d := s[i+1]; {
			case d == '!', d == '/', d == '?', 'a' <= d && d <= 'z', 'A' <= d && d <= 'Z':
				b.WriteString("&lt;")
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// formatting reports whether tag names a formatting element: one the parser clones.
func formatting(tag string) bool {
	switch tag {
	case "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u":
		return true
	}
	return false
}

// implied returns how many nodes the parser may make up for a start tag: <tbody> and <tr> for
// a cell put straight in a <table>, <tbody> for a row, <colgroup> for a <col>. And in a
// <colgroup> (entered with <colgroup> or <col>, or again at a </template>) the parser inserts
// the white space that starts a text apart from the rest, once, as it leaves the <colgroup>.
func implied(tag string) int {
	switch tag {
	case "td", "th", "col":
		return 2
	case "tr", "colgroup":
		return 1
	}
	return 0
}

// budget follows the formatting elements the parser may hold in its list of active
// formatting elements, which it clones, and counts the nodes charged so far.
type budget struct {
	used int
	// certain are the formatting elements opened since the last token of any other kind
	// (but text, comments, and end tags closing the last of them), innermost last: each is
	// open (in the parser's stack of open elements), or the parser ignored its tag.
	certain []formatted
	// kinds counts the other formatting elements the parser may still hold, by tag and
	// attributes, until clones reaches maxClones; tags counts them by tag alone.
	kinds map[string]int
	tags  map[string]int
	// clones is what reconstructing them may clone: at most three of a kind (the parser
	// keeps no more), at most maxClones.
	clones int
}

type formatted struct {
	tag, kind string
	// phantom is set on a <font> opened in SVG or MathML: an element of theirs, not a
	// formatting element, so its end tag may close a formatting element it does not name.
	phantom bool
}

func (b *budget) open(tag, kind string, phantom bool) {
	b.certain = append(b.certain, formatted{tag, kind, phantom})
}

// close closes the innermost certain formatting element when it is tag's, and reports
// whether it did and whether that element was a phantom.
func (b *budget) close(tag string) (phantom, ok bool) {
	if len(b.certain) == 0 || b.certain[len(b.certain)-1].tag != tag {
		return false, false
	}
	f := b.certain[len(b.certain)-1]
	b.certain = b.certain[:len(b.certain)-1]
	return f.phantom, true
}

// flush counts the certain formatting elements as ones that may stay in the list after their
// elements are closed.
func (b *budget) flush() {
	if b.kinds == nil {
		b.kinds, b.tags = map[string]int{}, map[string]int{}
	}
	for _, f := range b.certain {
		b.tags[f.tag]++
		if b.clones >= maxClones {
			continue
		}
		if b.kinds[f.kind]++; b.kinds[f.kind] <= 3 {
			b.clones++
		}
	}
	b.certain = b.certain[:0]
}

// has reports whether the parser may hold a formatting element of tag.
func (b *budget) has(tag string) bool {
	if b.tags[tag] > 0 {
		return true
	}
	for _, f := range b.certain {
		if f.tag == tag {
			return true
		}
	}
	return false
}
