package email

import (
	"bufio"
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message/mail"

	"github.com/sluice-project/sluice/internal/textclean"
)

// header is one header a message's document shows at the top of its text.
type header struct{ name, value string }

// textHeaders returns the message's From, To, Cc, Subject and Date, decoded to UTF-8 as the
// metadata keys are, leaving out the absent ones. The Date is the message's own, as written.
func textHeaders(h mail.Header) []header {
	var out []header
	add := func(name, value string) {
		value = strings.Join(strings.Fields(rawHeaderText(value)), " ")
		if value != "" {
			out = append(out, header{name, value})
		}
	}
	for _, k := range []string{"From", "To", "Cc"} {
		add(k, addresses(h, k))
	}
	if s, err := h.Subject(); err == nil {
		add("Subject", s)
	} else {
		add("Subject", h.Get("Subject"))
	}
	add("Date", h.Get("Date"))
	return out
}

// maxRecode is the largest plain-text body decoded in memory to put UTF-8 headers above it;
// a larger body of unknown charset gets its headers with non-ASCII characters as "?".
const maxRecode = 64 << 20

// addHeaders rewrites the buffered body so that its text begins with the headers, in the body's
// own format: "Name: value" lines and a blank line for text/plain, a <pre> block after <body>
// for HTML (non-ASCII as character references, whatever the page's charset), a paragraph
// before the first \pard for RTF. A message without a body gets one of just the headers.
func addHeaders(bodies map[string]*body, dir string, hs []header) error {
	if len(hs) == 0 {
		return nil
	}
	var b *body
	for _, ext := range bodyPreference {
		if b = bodies[ext]; b != nil {
			break
		}
	}
	if b == nil {
		f, err := os.Create(filepath.Join(dir, "body.txt"))
		if err != nil {
			return fmt.Errorf("buffer body: %w", err)
		}
		b = &body{ext: "txt", mediaType: "text/plain", utf8: true, file: f}
		bodies["txt"] = b
	}
	if _, err := b.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind body: %w", err)
	}
	var head []byte
	insert := int64(0)
	switch b.ext {
	case "txt":
		text := plainHeaders(hs)
		if !b.utf8 && !isASCII(text) {
			// The body's charset is unknown: decode it as the text action would, so that the
			// headers and the body end up in one charset, UTF-8.
			ok, err := recodeBody(b)
			if err != nil {
				return err
			}
			if !ok {
				text = strings.Map(func(r rune) rune {
					if r >= utf8.RuneSelf {
						return '?'
					}
					return r
				}, text)
			}
		}
		head = []byte(text + "\n")
	case "html":
		prefix := make([]byte, 64<<10)
		n, err := io.ReadFull(b.file, prefix)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("read body: %w", err)
		}
		insert = int64(afterBodyTag(prefix[:n]))
		head = []byte(htmlHeaders(hs))
	case "rtf":
		at, err := rtfInsertAt(b.file)
		if err != nil {
			return fmt.Errorf("read body: %w", err)
		}
		insert = at
		head = []byte(rtfHeaders(hs))
	}
	return spliceBody(b, dir, insert, head)
}

// spliceBody inserts head into the body's buffer at offset at, through a new file.
func spliceBody(b *body, dir string, at int64, head []byte) error {
	f, err := os.CreateTemp(dir, "body-*."+b.ext)
	if err != nil {
		return fmt.Errorf("buffer body: %w", err)
	}
	if _, err := b.file.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("rewind body: %w", err)
	}
	if _, err := io.CopyN(f, b.file, at); err != nil {
		f.Close()
		return fmt.Errorf("buffer body: %w", err)
	}
	if _, err := f.Write(head); err != nil {
		f.Close()
		return fmt.Errorf("buffer body: %w", err)
	}
	if _, err := io.Copy(f, b.file); err != nil {
		f.Close()
		return fmt.Errorf("buffer body: %w", err)
	}
	b.file.Close()
	b.file = f
	return nil
}

// recodeBody decodes a plain-text body of undeclared charset to UTF-8 in place, reporting false
// when it is too large to.
func recodeBody(b *body) (bool, error) {
	st, err := b.file.Stat()
	if err != nil {
		return false, fmt.Errorf("body: %w", err)
	}
	if st.Size() > maxRecode {
		return false, nil
	}
	raw, err := io.ReadAll(b.file)
	if err != nil {
		return false, fmt.Errorf("read body: %w", err)
	}
	text, _ := textclean.Decode(raw)
	if err := b.file.Truncate(0); err != nil {
		return false, fmt.Errorf("buffer body: %w", err)
	}
	if _, err := b.file.WriteAt([]byte(text), 0); err != nil {
		return false, fmt.Errorf("buffer body: %w", err)
	}
	b.utf8 = true
	return true, nil
}

func plainHeaders(hs []header) string {
	var sb strings.Builder
	for _, h := range hs {
		sb.WriteString(h.name + ": " + h.value + "\n")
	}
	return sb.String()
}

// htmlHeaders is the headers as a <pre> block, ASCII only.
func htmlHeaders(hs []header) string {
	var sb strings.Builder
	sb.WriteString(`<pre style="white-space:pre-wrap;font-family:sans-serif">`)
	for _, h := range hs {
		sb.WriteString("<b>" + h.name + ":</b> " + asciiHTML(h.value) + "\n")
	}
	sb.WriteString("</pre><hr>\n")
	return sb.String()
}

func asciiHTML(s string) string {
	var sb strings.Builder
	for _, r := range html.EscapeString(s) {
		if r < utf8.RuneSelf {
			sb.WriteRune(r)
		} else {
			sb.WriteString("&#" + strconv.Itoa(int(r)) + ";")
		}
	}
	return sb.String()
}

// afterBodyTag returns the offset just after the <body …> tag in the page's beginning, or 0.
func afterBodyTag(b []byte) int {
	lower := bytes.ToLower(b)
	for i := 0; ; {
		j := bytes.Index(lower[i:], []byte("<body"))
		if j < 0 {
			return 0
		}
		i += j + len("<body")
		if i < len(lower) && (lower[i] == '>' || lower[i] == ' ' || lower[i] == '\t' || lower[i] == '\r' || lower[i] == '\n' || lower[i] == '/') {
			if k := bytes.IndexByte(lower[i:], '>'); k >= 0 {
				return i + k + 1
			}
			return 0
		}
	}
}

// rtfHeaders is the headers as one RTF group of paragraphs, non-ASCII as \u escapes.
func rtfHeaders(hs []header) string {
	var sb strings.Builder
	sb.WriteString(`{\pard\plain `)
	for _, h := range hs {
		sb.WriteString(`{\b ` + rtfEscape(h.name) + `:} ` + rtfEscape(h.value) + `\par` + "\n")
	}
	sb.WriteString(`\par}` + "\n")
	return sb.String()
}

func rtfEscape(s string) string {
	var sb strings.Builder
	for _, r := range s {
		switch {
		case r == '\\' || r == '{' || r == '}':
			sb.WriteString(`\` + string(r))
		case r < 0x20:
			sb.WriteByte(' ')
		case r < utf8.RuneSelf:
			sb.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			for _, u := range []rune{0xd800 + r>>10, 0xdc00 + r&0x3ff} {
				sb.WriteString(`\u` + strconv.Itoa(int(int16(u))) + `?`)
			}
		default:
			sb.WriteString(`\u` + strconv.Itoa(int(int16(r))) + `?`)
		}
	}
	return sb.String()
}

// rtfInsertAt returns where the document's text begins: the first \pard at the outer group's
// level, after the font and colour tables; else just before the final "}". It reads r once, a
// buffer at a time: the body stays on disk however large it is.
func rtfInsertAt(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		pos, lastClose int64 // the offset of the byte read next; of the last "}", escaped or not
		depth          int
	)
	lastClose = -1
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			break
		} else if err != nil {
			return 0, err
		}
		switch c {
		case '\\':
			if depth == 1 {
				if p, _ := br.Peek(5); bytes.HasPrefix(p, []byte("pard")) && (len(p) == 4 || !isLetter(p[4])) {
					return pos, nil
				}
			}
			// An escaped character or the first letter of a control word.
			switch c, err := br.ReadByte(); {
			case err == io.EOF:
			case err != nil:
				return 0, err
			default:
				pos++
				if c == '}' {
					lastClose = pos
				}
			}
		case '{':
			depth++
		case '}':
			depth--
			lastClose = pos
		}
		pos++
	}
	if lastClose > 0 {
		return lastClose, nil
	}
	return pos, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
