package when

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Template is a key computed from an item, such as a claim's or a limit's key:
// literal text with expressions of the condition language between {{ and }}:
//
//	{{metadata.package}}@{{metadata.version}}
//	host:{{metadata["url_host"]}}
//	{{name}}
//
// Each expression must yield a string, a number or a boolean, rendered as text (an integral
// number without a decimal point). A template is immutable and safe for concurrent use.
type Template struct {
	src   string
	parts []tmplPart
}

type tmplPart struct {
	lit  string
	expr node // nil for a literal
	text string
}

// MaxTemplateLen is the longest template [ParseTemplate] accepts, in bytes.
const MaxTemplateLen = 1000

// String returns the template's source.
func (t *Template) String() string { return t.src }

// ParseTemplate parses a template. Its errors are *[Error]s whose offset is in src. A template
// with no expression is allowed: every item then shares its one key.
func ParseTemplate(src string) (*Template, error) {
	if len(src) > MaxTemplateLen {
		return nil, &Error{Message: fmt.Sprintf("template is %d bytes; the limit is %d", len(src), MaxTemplateLen)}
	}
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Message: "empty template"}
	}
	t := &Template{src: src}
	rest, off := src, 0
	for rest != "" {
		i := strings.Index(rest, "{{")
		if j := strings.Index(rest, "}}"); j >= 0 && (i < 0 || j < i) {
			return nil, &Error{Offset: off + j, Message: `"}}" without "{{"`}
		}
		if i < 0 {
			t.parts = append(t.parts, tmplPart{lit: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, tmplPart{lit: rest[:i]})
		}
		end := strings.Index(rest[i+2:], "}}")
		if end < 0 {
			return nil, &Error{Offset: off + i, Message: `"{{" without "}}"`}
		}
		inner := rest[i+2 : i+2+end]
		if strings.TrimSpace(inner) == "" {
			return nil, &Error{Offset: off + i, Message: "empty {{ }}"}
		}
		n, err := parseValue(inner)
		if err != nil {
			if e, ok := err.(*Error); ok {
				e.Offset += off + i + 2
			}
			return nil, err
		}
		t.parts = append(t.parts, tmplPart{expr: n, text: strings.TrimSpace(inner)})
		rest, off = rest[i+2+end+2:], off+i+2+end+2
	}
	return t, nil
}

// parseValue parses an expression that yields a key part: anything but a list or an object.
func parseValue(src string) (node, error) {
	n, typ, _, err := parseExpr(src)
	if err != nil {
		return nil, err
	}
	if typ == tyList || typ == tyMap || typ == tyNull {
		return nil, &Error{Offset: n.pos(), Message: fmt.Sprintf("a key part is %s; it must be a string, a number or a boolean", typ)}
	}
	return n, nil
}

// Render returns the item's key. An expression that yields null (a metadata key the item lacks),
// a list or an object, or fails, is an error naming it: a key must never silently merge items
// that differ.
func (t *Template) Render(it Item) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := p.expr.eval(&it)
		if err != nil {
			return "", fmt.Errorf("{{%s}}: cannot be evaluated for item %q", p.text, it.Name)
		}
		switch v := v.(type) {
		case string:
			b.WriteString(v)
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		case json.Number:
			b.WriteString(v.String()) // as the user wrote it: a 20-digit id stays whole
		case float64:
			if v == math.Trunc(v) && math.Abs(v) < 1e15 {
				b.WriteString(strconv.FormatInt(int64(v), 10))
			} else {
				b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			}
		case nil:
			return "", fmt.Errorf("{{%s}} is missing on item %q", p.text, it.Name)
		default:
			return "", fmt.Errorf("{{%s}} is not a string, a number or a boolean on item %q", p.text, it.Name)
		}
	}
	return b.String(), nil
}
