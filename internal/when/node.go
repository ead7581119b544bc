package when

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// typ is a static type. tyDyn is a value known only at run time: metadata's and options'.
type typ string

const (
	tyBool   typ = "bool"
	tyInt    typ = "int"
	tyDouble typ = "double"
	tyString typ = "string"
	tyNull   typ = "null"
	tyList   typ = "list"
	tyMap    typ = "map"
	tyDyn    typ = "dyn"
)

func (t typ) String() string {
	switch t {
	case tyBool:
		return "a boolean"
	case tyInt:
		return "an integer"
	case tyDouble:
		return "a number"
	case tyString:
		return "a string"
	case tyNull:
		return "null"
	case tyList:
		return "a list"
	case tyMap:
		return "an object"
	}
	return "a value"
}

func numeric(t typ) bool { return t == tyInt || t == tyDouble }

// variables are the names a condition can read, with their types.
var variables = map[string]typ{
	"root": tyBool, "depth": tyInt, "name": tyString, "content_type": tyString,
	"metadata": tyMap, "options": tyMap,
}

const knownVariables = "root, depth, name, content_type, metadata, options"

// methods are the string methods, taking one string.
var methods = map[string]func(s, arg string) bool{
	"startsWith": strings.HasPrefix,
	"endsWith":   strings.HasSuffix,
	"contains":   strings.Contains,
}

// errEval is an evaluation that cannot go on (a type mismatch of run-time values): the
// condition is false.
var errEval = errors.New("evaluation error")

type node interface {
	pos() int
	check() (typ, error)
	eval(it *Item) (any, error)
}

type lit struct {
	v  any
	ty typ
	at int
}

func (n *lit) pos() int                { return n.at }
func (n *lit) check() (typ, error)     { return n.ty, nil }
func (n *lit) eval(*Item) (any, error) { return n.v, nil }
func (n *list) pos() int               { return n.at }
func (n *varRef) pos() int             { return n.at }
func (n *sel) pos() int                { return n.x.pos() }
func (n *index) pos() int              { return n.x.pos() }
func (n *call) pos() int               { return n.at }
func (n *unop) pos() int               { return n.at }
func (n *binop) pos() int              { return n.l.pos() }
func errAt(at int, f string, a ...any) error {
	return &Error{Offset: at, Message: fmt.Sprintf(f, a...)}
}

type list struct {
	elems []node
	at    int
}

func (n *list) check() (typ, error) {
	for _, e := range n.elems {
		if _, err := e.check(); err != nil {
			return "", err
		}
	}
	return tyList, nil
}

func (n *list) eval(it *Item) (any, error) {
	out := make([]any, len(n.elems))
	for i, e := range n.elems {
		v, err := e.eval(it)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

type varRef struct {
	name string
	at   int
}

func (n *varRef) check() (typ, error) {
	t, ok := variables[n.name]
	if !ok {
		return "", errAt(n.at, "unknown variable %q (known: %s)", n.name, knownVariables)
	}
	return t, nil
}

func (n *varRef) eval(it *Item) (any, error) {
	switch n.name {
	case "root":
		return it.Depth == 0, nil
	case "depth":
		return int64(it.Depth), nil
	case "name":
		return it.Name, nil
	case "content_type":
		return it.ContentType, nil
	case "metadata":
		return it.Metadata, nil
	case "options":
		return it.Options, nil
	}
	return nil, errEval
}

// sel is metadata.key or metadata["key"].
type sel struct {
	x   node
	key string
	at  int
}

func (n *sel) check() (typ, error) {
	t, err := n.x.check()
	if err != nil {
		return "", err
	}
	if t != tyMap && t != tyDyn {
		return "", errAt(n.at, "cannot read field %q of %s", n.key, t)
	}
	return tyDyn, nil
}

func (n *sel) eval(it *Item) (any, error) {
	x, err := n.x.eval(it)
	if err != nil {
		return nil, err
	}
	switch m := x.(type) {
	case nil:
		return nil, nil // a key under a missing key is missing too
	case map[string]any:
		return m[n.key], nil
	}
	return nil, errEval
}

// index is x[k] with k not a string literal.
type index struct {
	x, k node
	at   int
}

func (n *index) check() (typ, error) {
	t, err := n.x.check()
	if err != nil {
		return "", err
	}
	k, err := n.k.check()
	if err != nil {
		return "", err
	}
	switch {
	case t == tyList && (k == tyInt || k == tyDyn), t == tyDyn:
	case t == tyMap && (k == tyString || k == tyDyn):
	default:
		return "", errAt(n.at, "cannot index %s with %s", t, k)
	}
	return tyDyn, nil
}

func (n *index) eval(it *Item) (any, error) {
	x, err := n.x.eval(it)
	if err != nil {
		return nil, err
	}
	k, err := n.k.eval(it)
	if err != nil {
		return nil, err
	}
	switch x := x.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		if s, ok := k.(string); ok {
			return x[s], nil
		}
	case []any:
		if f, ok := number(k); ok && f == float64(int(f)) && 0 <= f && int(f) < len(x) {
			return x[int(f)], nil
		}
	}
	return nil, errEval
}

type call struct {
	fn   string
	recv node // nil for a function
	args []node
	at   int
}

func (n *call) check() (typ, error) {
	if n.recv == nil {
		if n.fn != "has" {
			return "", errAt(n.at, "unknown function %q (known: has, and the string methods startsWith, endsWith, contains)", n.fn)
		}
		if len(n.args) != 1 {
			return "", errAt(n.at, "has takes one field, such as has(metadata.role)")
		}
		s, ok := n.args[0].(*sel)
		if !ok {
			return "", errAt(n.args[0].pos(), "has takes a field, such as has(metadata.role)")
		}
		if _, err := s.check(); err != nil {
			return "", err
		}
		return tyBool, nil
	}
	if _, ok := methods[n.fn]; !ok {
		return "", errAt(n.at, "unknown method %q (known: startsWith, endsWith, contains)", n.fn)
	}
	r, err := n.recv.check()
	if err != nil {
		return "", err
	}
	if r != tyString && r != tyDyn {
		return "", errAt(n.at, "%s is a method of strings, not of %s", n.fn, r)
	}
	if len(n.args) != 1 {
		return "", errAt(n.at, "%s takes one string", n.fn)
	}
	a, err := n.args[0].check()
	if err != nil {
		return "", err
	}
	if a != tyString && a != tyDyn {
		return "", errAt(n.args[0].pos(), "%s takes a string, not %s", n.fn, a)
	}
	return tyBool, nil
}

func (n *call) eval(it *Item) (any, error) {
	if n.recv == nil { // has
		s := n.args[0].(*sel)
		x, err := s.x.eval(it)
		if err != nil {
			return nil, err
		}
		m, ok := x.(map[string]any)
		if !ok {
			return false, nil
		}
		_, has := m[s.key]
		return has, nil
	}
	r, err := n.recv.eval(it)
	if err != nil {
		return nil, err
	}
	a, err := n.args[0].eval(it)
	if err != nil {
		return nil, err
	}
	rs, ok1 := r.(string)
	as, ok2 := a.(string)
	if !ok1 || !ok2 {
		return nil, errEval
	}
	return methods[n.fn](rs, as), nil
}

type unop struct {
	op string
	x  node
	at int
}

func (n *unop) check() (typ, error) {
	t, err := n.x.check()
	if err != nil {
		return "", err
	}
	switch {
	case n.op == "!" && (t == tyBool || t == tyDyn):
		return tyBool, nil
	case n.op == "-" && (numeric(t) || t == tyDyn):
		return t, nil
	}
	return "", errAt(n.at, "%q does not apply to %s", n.op, t)
}

func (n *unop) eval(it *Item) (any, error) {
	x, err := n.x.eval(it)
	if err != nil {
		return nil, err
	}
	switch v := x.(type) {
	case bool:
		if n.op == "!" {
			return !v, nil
		}
	case int64:
		if n.op == "-" {
			return -v, nil
		}
	case float64:
		if n.op == "-" {
			return -v, nil
		}
	case json.Number:
		if f, ok := number(v); ok && n.op == "-" {
			return -f, nil
		}
	}
	return nil, errEval
}

type binop struct {
	op   string
	l, r node
	at   int
}

func (n *binop) check() (typ, error) {
	l, err := n.l.check()
	if err != nil {
		return "", err
	}
	r, err := n.r.check()
	if err != nil {
		return "", err
	}
	dyn := l == tyDyn || r == tyDyn
	switch n.op {
	case "&&", "||":
		for _, side := range []struct {
			t typ
			n node
		}{{l, n.l}, {r, n.r}} {
			if side.t != tyBool && side.t != tyDyn {
				return "", errAt(side.n.pos(), "%q needs booleans on both sides, not %s", n.op, side.t)
			}
		}
	case "==", "!=":
		if !dyn && l != r && l != tyNull && r != tyNull && !(numeric(l) && numeric(r)) {
			return "", errAt(n.at, "%q compares %s with %s: it can never hold", n.op, l, r)
		}
	case "<", "<=", ">", ">=":
		ok := dyn && (l == tyDyn || numeric(l) || l == tyString) && (r == tyDyn || numeric(r) || r == tyString) ||
			numeric(l) && numeric(r) || l == tyString && r == tyString
		if !ok {
			return "", errAt(n.at, "%q cannot order %s and %s", n.op, l, r)
		}
	case "in":
		if r != tyList && r != tyMap && r != tyDyn {
			return "", errAt(n.r.pos(), "\"in\" needs a list or an object on its right, not %s", r)
		}
	}
	return tyBool, nil
}

func (n *binop) eval(it *Item) (any, error) {
	switch n.op {
	case "&&", "||":
		// As in CEL, either side decides when it can: false && error is false.
		stop := n.op == "||"
		l, lerr := n.l.eval(it)
		if lb, ok := l.(bool); lerr == nil && ok && lb == stop {
			return stop, nil
		}
		r, rerr := n.r.eval(it)
		rb, rok := r.(bool)
		if rerr == nil && rok && rb == stop {
			return stop, nil
		}
		if _, lok := l.(bool); lerr != nil || rerr != nil || !lok || !rok {
			return nil, errEval
		}
		return !stop, nil
	}
	l, err := n.l.eval(it)
	if err != nil {
		return nil, err
	}
	r, err := n.r.eval(it)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		switch c := r.(type) {
		case []any:
			for _, e := range c {
				if equal(l, e) {
					return true, nil
				}
			}
			return false, nil
		case map[string]any:
			s, ok := l.(string)
			if !ok {
				return nil, errEval
			}
			_, has := c[s]
			return has, nil
		case nil:
			return false, nil
		}
		return nil, errEval
	}
	// Ordering.
	var c int
	if lf, ok := number(l); ok {
		rf, ok := number(r)
		if !ok {
			return nil, errEval
		}
		switch {
		case lf < rf:
			c = -1
		case lf > rf:
			c = 1
		}
	} else if ls, ok := l.(string); ok {
		rs, ok := r.(string)
		if !ok {
			return nil, errEval
		}
		c = strings.Compare(ls, rs)
	} else {
		return nil, errEval
	}
	switch n.op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// number returns a numeric value as a float64: int64 from the condition, json.Number from
// metadata (float64 from other JSON).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// equal compares values, numbers by value whatever their Go type.
func equal(a, b any) bool {
	if af, ok := number(a); ok {
		bf, ok := number(b)
		return ok && af == bf
	}
	return reflect.DeepEqual(a, b)
}
