package when

import (
	"fmt"
	"strconv"
	"strings"
)

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tInt
	tDouble
	tString
	tOp
)

type token struct {
	kind tokKind
	text string // the operator or identifier; a string literal's value
	pos  int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of condition"
	case tString:
		return strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

// ops are the operators, longest first so that "<=" is not read as "<".
var ops = []string{"||", "&&", "==", "!=", "<=", ">=", "<", ">", "!", "-", "(", ")", "[", "]", ",", "."}

func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || 'a' <= src[j] && src[j] <= 'z' || 'A' <= src[j] && src[j] <= 'Z' || '0' <= src[j] && src[j] <= '9') {
				j++
			}
			toks = append(toks, token{kind: tIdent, text: src[i:j], pos: i})
			i = j
		case '0' <= c && c <= '9':
			j := i
			for j < len(src) && '0' <= src[j] && src[j] <= '9' {
				j++
			}
			kind := tInt
			if j+1 < len(src) && src[j] == '.' && '0' <= src[j+1] && src[j+1] <= '9' {
				kind = tDouble
				j++
				for j < len(src) && '0' <= src[j] && src[j] <= '9' {
					j++
				}
			}
			toks = append(toks, token{kind: kind, text: src[i:j], pos: i})
			i = j
		case c == '"' || c == '\'':
			s, n, err := lexString(src[i:])
			if err != nil {
				return nil, &Error{Offset: i, Message: err.Error()}
			}
			toks = append(toks, token{kind: tString, text: s, pos: i})
			i += n
		default:
			op := ""
			for _, o := range ops {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				if c == '=' {
					return nil, &Error{Offset: i, Message: `unexpected "="; compare with "=="`}
				}
				return nil, &Error{Offset: i, Message: fmt.Sprintf("unexpected character %q", src[i:i+1])}
			}
			toks = append(toks, token{kind: tOp, text: op, pos: i})
			i += len(op)
		}
	}
	return append(toks, token{kind: tEOF, pos: len(src)}), nil
}

// lexString reads a quoted string at the start of s, with the escapes \\, \", \', \n and \t,
// and returns its value and length in s.
func lexString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\n':
			return "", 0, fmt.Errorf("string not closed on its line")
		case c == '\\':
			if i+1 == len(s) {
				return "", 0, fmt.Errorf("string not closed")
			}
			i++
			switch s[i] {
			case '\\', '"', '\'':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				return "", 0, fmt.Errorf("unknown escape \\%c in a string", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("string not closed")
}

type parser struct {
	toks []token
	i    int
	vars bool
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == op
}

func (p *parser) expect(op string) (token, error) {
	t := p.next()
	if t.kind != tOp || t.text != op {
		return t, &Error{Offset: t.pos, Message: fmt.Sprintf("expected %q, found %s", op, t)}
	}
	return t, nil
}

func (p *parser) deeper(depth int) error {
	if depth > maxDepth {
		return &Error{Offset: p.peek().pos, Message: fmt.Sprintf("nested deeper than %d levels", maxDepth)}
	}
	return nil
}

func (p *parser) or(depth int) (node, error) {
	if err := p.deeper(depth); err != nil {
		return nil, err
	}
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.isOp("||") {
		t := p.next()
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = &binop{op: "||", l: l, r: r, at: t.pos}
	}
	return l, nil
}

func (p *parser) and(depth int) (node, error) {
	l, err := p.rel(depth)
	if err != nil {
		return nil, err
	}
	for p.isOp("&&") {
		t := p.next()
		r, err := p.rel(depth)
		if err != nil {
			return nil, err
		}
		l = &binop{op: "&&", l: l, r: r, at: t.pos}
	}
	return l, nil
}

func (p *parser) rel(depth int) (node, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op := ""
		switch {
		case t.kind == tOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">="):
			op = t.text
		case t.kind == tIdent && t.text == "in":
			op = "in"
		default:
			return l, nil
		}
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = &binop{op: op, l: l, r: r, at: t.pos}
	}
}

func (p *parser) unary(depth int) (node, error) {
	if p.isOp("!") || p.isOp("-") {
		if err := p.deeper(depth + 1); err != nil {
			return nil, err
		}
		t := p.next()
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &unop{op: t.text, x: x, at: t.pos}, nil
	}
	return p.member(depth)
}

func (p *parser) member(depth int) (node, error) {
	x, err := p.primary(depth)
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isOp("."):
			p.next()
			t := p.next()
			if t.kind != tIdent {
				return nil, &Error{Offset: t.pos, Message: fmt.Sprintf("expected a field or method name after \".\", found %s", t)}
			}
			if p.isOp("(") {
				args, err := p.args(depth)
				if err != nil {
					return nil, err
				}
				x = &call{fn: t.text, recv: x, args: args, at: t.pos}
				continue
			}
			x = &sel{x: x, key: t.text, at: t.pos}
		case p.isOp("["):
			t := p.next()
			k, err := p.or(depth + 1)
			if err != nil {
				return nil, err
			}
			if _, err := p.expect("]"); err != nil {
				return nil, err
			}
			if l, ok := k.(*lit); ok {
				if s, ok := l.v.(string); ok {
					x = &sel{x: x, key: s, at: t.pos}
					continue
				}
			}
			x = &index{x: x, k: k, at: t.pos}
		default:
			return x, nil
		}
	}
}

// args reads a parenthesized argument list.
func (p *parser) args(depth int) ([]node, error) {
	if _, err := p.expect("("); err != nil {
		return nil, err
	}
	var args []node
	for !p.isOp(")") {
		a, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if _, err := p.expect(")"); err != nil {
		return nil, err
	}
	return args, nil
}

func (p *parser) primary(depth int) (node, error) {
	t := p.next()
	switch t.kind {
	case tInt:
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, &Error{Offset: t.pos, Message: fmt.Sprintf("integer %s is out of range", t.text)}
		}
		return &lit{v: n, ty: tyInt, at: t.pos}, nil
	case tDouble:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, &Error{Offset: t.pos, Message: fmt.Sprintf("number %s is out of range", t.text)}
		}
		return &lit{v: f, ty: tyDouble, at: t.pos}, nil
	case tString:
		return &lit{v: t.text, ty: tyString, at: t.pos}, nil
	case tIdent:
		switch t.text {
		case "true", "false":
			return &lit{v: t.text == "true", ty: tyBool, at: t.pos}, nil
		case "null":
			return &lit{v: nil, ty: tyNull, at: t.pos}, nil
		case "in":
			return nil, &Error{Offset: t.pos, Message: `unexpected "in"`}
		}
		if p.isOp("(") {
			args, err := p.args(depth)
			if err != nil {
				return nil, err
			}
			return &call{fn: t.text, args: args, at: t.pos}, nil
		}
		p.vars = true
		return &varRef{name: t.text, at: t.pos}, nil
	case tOp:
		switch t.text {
		case "(":
			x, err := p.or(depth + 1)
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(")"); err != nil {
				return nil, err
			}
			return x, nil
		case "[":
			l := &list{at: t.pos}
			for !p.isOp("]") {
				e, err := p.or(depth + 1)
				if err != nil {
					return nil, err
				}
				l.elems = append(l.elems, e)
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			if _, err := p.expect("]"); err != nil {
				return nil, err
			}
			return l, nil
		}
	}
	if t.kind == tEOF {
		return nil, &Error{Offset: t.pos, Message: "condition ends early"}
	}
	return nil, &Error{Offset: t.pos, Message: fmt.Sprintf("unexpected %s", t)}
}
