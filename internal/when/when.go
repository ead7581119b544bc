// Package when is the expression language of a workflow step's `when:` condition: a boolean
// expression over an item that says whether the step applies to it.
//
// The syntax is a small subset of CEL (the Common Expression Language, github.com/google/cel-go),
// so a condition reads as CEL does and could move to cel-go unchanged:
//
//	root && metadata.kind == "sheet"
//	!root && content_type.startsWith("image/")
//	depth >= 1 && metadata.role in ["preservation", "access"]
//	has(options.ocr) && options.ocr == true
//	name.endsWith(".pdf") || content_type == "application/pdf"
//
// Variables: root (bool, the item has no parent), depth (int, 0 for a root), name (string, the
// item's derived path), content_type (string), metadata and options (the item's JSON objects:
// metadata.role or metadata["role"]). Literals: integers, decimals, strings in double or single
// quotes, true, false, null and lists [a, b]. Operators, loosest first: ||, &&, the comparisons
// == != < <= > >= and in, then unary ! and -. Functions: has(metadata.key) and the string methods
// startsWith, endsWith and contains.
//
// [Parse] checks the syntax, the variables and the types it can know (metadata's values are
// only known at run time), and that the expression is boolean. Two departures from CEL make a
// condition total: a key an object lacks reads as null, and an expression that fails at run time
// (metadata.size > "x") is false. A condition holds only when it evaluates to true.
package when

import (
	"fmt"
	"strings"
)

// MaxLen is the longest condition [Parse] accepts, in bytes.
const MaxLen = 1000

// maxDepth bounds the nesting of a condition, so that parsing untrusted input cannot exhaust the
// stack.
const maxDepth = 50

// Item is what a condition sees of an item.
type Item struct {
	Depth       int
	Name        string
	ContentType string
	Metadata    map[string]any
	Options     map[string]any
}

// Expr is a parsed, checked condition. It is immutable and safe for concurrent use.
type Expr struct {
	src  string
	root node
	vars bool // whether it reads a variable; one that does not is constant
}

// String returns the condition's source.
func (e *Expr) String() string { return e.src }

// Eval reports whether the condition holds for the item: it evaluates to true.
func (e *Expr) Eval(it Item) bool {
	v, err := e.root.eval(&it)
	b, ok := v.(bool)
	return err == nil && ok && b
}

// Constant reports whether the condition reads no variable, and then its value.
func (e *Expr) Constant() (constant, value bool) {
	if e.vars {
		return false, false
	}
	return true, e.Eval(Item{})
}

// Error is a problem [Parse] found, at a byte offset of the source.
type Error struct {
	Offset  int // 0-based
	Message string
}

// Error formats the problem with its 1-based column.
func (e *Error) Error() string { return fmt.Sprintf("column %d: %s", e.Offset+1, e.Message) }

// Parse parses and checks a condition. Its errors are *[Error]s.
func Parse(src string) (*Expr, error) {
	if len(src) > MaxLen {
		return nil, &Error{Message: fmt.Sprintf("condition is %d bytes; the limit is %d", len(src), MaxLen)}
	}
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Message: "empty condition"}
	}
	n, typ, vars, err := parseExpr(src)
	if err != nil {
		return nil, err
	}
	if typ != tyBool && typ != tyDyn {
		return nil, &Error{Offset: n.pos(), Message: fmt.Sprintf("condition is %s, not a boolean (compare it: depth == 0, content_type == \"...\")", typ)}
	}
	return &Expr{src: src, root: n, vars: vars}, nil
}

// parseExpr parses and type-checks one whole expression, for conditions and template parts;
// vars reports whether it reads any variable.
func parseExpr(src string) (n node, t typ, vars bool, err error) {
	toks, err := lex(src)
	if err != nil {
		return nil, "", false, err
	}
	p := &parser{toks: toks}
	if n, err = p.or(0); err != nil {
		return nil, "", false, err
	}
	if tok := p.peek(); tok.kind != tEOF {
		return nil, "", false, &Error{Offset: tok.pos, Message: fmt.Sprintf("unexpected %s", tok)}
	}
	if t, err = n.check(); err != nil {
		return nil, "", false, err
	}
	return n, t, p.vars, nil
}
