package graph

import (
	"fmt"
	"strconv"
	"strings"
)

// npm's semantic versions and ranges, as node-semver (the library npm selects versions with)
// defines them in loose mode, the mode npm-pick-manifest uses: versions compare by SemVer 2.0
// precedence; a range is comparator sets joined by "||", each set comparators (<, <=, >, >=, =),
// X-ranges (1.x, 1.2.*, *, ""), tilde and caret ranges and hyphen ranges desugared to
// comparators; and a prerelease version satisfies a set only if one of the set's comparators has
// a prerelease on the same major.minor.patch. The bounds: a range of at most maxRangeLen bytes.

// semverV is a parsed version.
type semverV struct {
	major, minor, patch uint64
	pre                 []string // prerelease identifiers
}

const maxRangeLen = 1024

// parseSemver parses a full version loosely: a leading "v" or "=" and spaces are allowed, and
// build metadata ignored.
func parseSemver(s string) (semverV, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "=v")
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	core, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return semverV{}, false
	}
	var n [3]uint64
	for i, p := range parts {
		v, ok := numericID(p)
		if !ok {
			return semverV{}, false
		}
		n[i] = v
	}
	v := semverV{major: n[0], minor: n[1], patch: n[2]}
	if hasPre {
		if pre == "" {
			return semverV{}, false
		}
		for _, id := range strings.Split(pre, ".") {
			if id == "" || strings.Trim(id, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") != "" {
				return semverV{}, false
			}
			v.pre = append(v.pre, id)
		}
	}
	return v, true
}

// numericID parses a numeric identifier (no sign; loose mode allows leading zeros).
func numericID(s string) (uint64, bool) {
	if s == "" || len(s) > 16 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

func (v semverV) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
	if len(v.pre) > 0 {
		s += "-" + strings.Join(v.pre, ".")
	}
	return s
}

// compareSemver compares by SemVer precedence.
func compareSemver(a, b semverV) int {
	for _, c := range [][2]uint64{{a.major, b.major}, {a.minor, b.minor}, {a.patch, b.patch}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, y := a.pre[i], b.pre[i]
		xn, xok := numericID(x)
		yn, yok := numericID(y)
		switch {
		case xok && yok:
			if xn != yn {
				if xn < yn {
					return -1
				}
				return 1
			}
		case xok:
			return -1
		case yok:
			return 1
		default:
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
		}
	}
	switch {
	case len(a.pre) < len(b.pre):
		return -1
	case len(a.pre) > len(b.pre):
		return 1
	}
	return 0
}

// comparator is one operator and version; op "" is "any" (>=0.0.0, no prerelease).
type comparator struct {
	op string // "<", "<=", ">", ">=", "=", or "" for any
	v  semverV
}

func (c comparator) test(v semverV) bool {
	if c.op == "" {
		return true
	}
	r := compareSemver(v, c.v)
	switch c.op {
	case "<":
		return r < 0
	case "<=":
		return r <= 0
	case ">":
		return r > 0
	case ">=":
		return r >= 0
	}
	return r == 0
}

// npmRange is a range: comparator sets, any of which a version satisfies.
type npmRange [][]comparator

// satisfies reports whether v is in the range, by node-semver's rules (no includePrerelease).
func (r npmRange) satisfies(v semverV) bool {
	for _, set := range r {
		if testSet(set, v) {
			return true
		}
	}
	return false
}

func testSet(set []comparator, v semverV) bool {
	for _, c := range set {
		if !c.test(v) {
			return false
		}
	}
	if len(v.pre) == 0 {
		return true
	}
	for _, c := range set {
		if c.op != "" && len(c.v.pre) > 0 && c.v.major == v.major && c.v.minor == v.minor && c.v.patch == v.patch {
			return true
		}
	}
	return false
}

// partial is a version with missing or wildcard parts (-1).
type partial struct {
	n   [3]int64
	pre []string
}

func isWild(s string) bool { return s == "" || s == "x" || s == "X" || s == "*" }

// parsePartial parses "1", "1.2", "1.x", "1.2.3-beta", "*", "" loosely.
func parsePartial(s string) (partial, error) {
	s = strings.TrimLeft(strings.TrimSpace(s), "=v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	p := partial{n: [3]int64{-1, -1, -1}}
	core, _, hasPre := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) > 3 {
		return p, fmt.Errorf("%q has more than three parts", s)
	}
	for i, part := range parts {
		if isWild(part) {
			if i == 0 && part == "" && len(parts) > 1 {
				return p, fmt.Errorf("%q is not a version", s)
			}
			break
		}
		v, ok := numericID(part)
		if !ok {
			return p, fmt.Errorf("%q is not a version", s)
		}
		p.n[i] = int64(v)
	}
	if hasPre {
		if p.n[2] < 0 {
			return p, fmt.Errorf("%q: a prerelease needs a full version", s)
		}
		full, ok := parseSemver(s)
		if !ok {
			return p, fmt.Errorf("%q is not a version", s)
		}
		p.pre = full.pre
	}
	return p, nil
}

func (p partial) full(zeroPre bool) semverV {
	v := semverV{pre: p.pre}
	for i := range p.n {
		n := uint64(max(p.n[i], 0))
		switch i {
		case 0:
			v.major = n
		case 1:
			v.minor = n
		case 2:
			v.patch = n
		}
	}
	if zeroPre && len(v.pre) == 0 {
		v.pre = []string{"0"}
	}
	return v
}

// upper returns the exclusive upper bound of a partial's last given part bumped (1.2 → <1.3.0-0).
func (p partial) bump(i int) semverV {
	v := semverV{pre: []string{"0"}}
	switch i {
	case 0:
		v.major = uint64(p.n[0]) + 1
	case 1:
		v.major, v.minor = uint64(p.n[0]), uint64(p.n[1])+1
	case 2:
		v.major, v.minor, v.patch = uint64(p.n[0]), uint64(p.n[1]), uint64(p.n[2])+1
	}
	return v
}

// given is how many leading parts are numbers.
func (p partial) given() int {
	for i, n := range p.n {
		if n < 0 {
			return i
		}
	}
	return 3
}

// parseNpmRange parses a range; an error says which part is not one.
func parseNpmRange(s string) (npmRange, error) {
	if len(s) > maxRangeLen {
		return nil, fmt.Errorf("range of %d bytes, more than the limit of %d", len(s), maxRangeLen)
	}
	var out npmRange
	for _, alt := range strings.Split(s, "||") {
		set, err := parseSet(strings.TrimSpace(alt))
		if err != nil {
			return nil, fmt.Errorf("range %q: %w", s, err)
		}
		out = append(out, set)
	}
	return out, nil
}

func parseSet(s string) ([]comparator, error) {
	// A hyphen range: "A - B".
	if a, b, ok := strings.Cut(s, " - "); ok {
		lo, err := parsePartial(a)
		if err != nil {
			return nil, err
		}
		hi, err := parsePartial(b)
		if err != nil {
			return nil, err
		}
		var set []comparator
		if lo.given() > 0 {
			set = append(set, comparator{">=", lo.full(false)})
		}
		switch g := hi.given(); {
		case g == 3:
			set = append(set, comparator{"<=", hi.full(false)})
		case g > 0:
			set = append(set, comparator{"<", hi.bump(g - 1)})
		}
		if len(set) == 0 {
			set = []comparator{{}}
		}
		return set, nil
	}
	// Operators may be followed by spaces (loose): join them to their version first.
	var toks []string
	for _, f := range strings.Fields(s) {
		if n := len(toks); n > 0 && strings.Trim(toks[n-1], "<>=~^") == "" {
			toks[n-1] += f
			continue
		}
		toks = append(toks, f)
	}
	if len(toks) == 0 {
		return []comparator{{}}, nil
	}
	var set []comparator
	for _, tok := range toks {
		cs, err := parseComparator(tok)
		if err != nil {
			return nil, err
		}
		set = append(set, cs...)
	}
	return set, nil
}

func parseComparator(tok string) ([]comparator, error) {
	op := ""
	for _, o := range []string{"<=", ">=", "<", ">", "=", "~>", "~", "^"} {
		if strings.HasPrefix(tok, o) {
			op, tok = o, tok[len(o):]
			break
		}
	}
	p, err := parsePartial(tok)
	if err != nil {
		return nil, err
	}
	g := p.given()
	switch op {
	case "~", "~>":
		switch g {
		case 0:
			return []comparator{{}}, nil
		case 1:
			return []comparator{{">=", p.full(false)}, {"<", p.bump(0)}}, nil
		default:
			return []comparator{{">=", p.full(false)}, {"<", p.bump(1)}}, nil
		}
	case "^":
		if g == 0 {
			return []comparator{{}}, nil
		}
		lo := comparator{">=", p.full(false)}
		switch {
		case p.n[0] > 0 || g == 1:
			return []comparator{lo, {"<", p.bump(0)}}, nil
		case p.n[1] > 0 || g == 2:
			return []comparator{lo, {"<", p.bump(1)}}, nil
		default: // ^0.0.3
			return []comparator{lo, {"<", p.bump(2)}}, nil
		}
	}
	if g == 3 {
		if op == "" {
			op = "="
		}
		return []comparator{{op, p.full(false)}}, nil
	}
	// An X-range with or without an operator.
	switch op {
	case "", "=":
		if g == 0 {
			return []comparator{{}}, nil
		}
		return []comparator{{">=", p.full(false)}, {"<", p.bump(g - 1)}}, nil
	case ">":
		if g == 0 {
			return []comparator{{"<", semverV{pre: []string{"0"}}}}, nil // nothing
		}
		return []comparator{{">=", p.bump(g - 1).release()}}, nil
	case ">=":
		return []comparator{{">=", p.full(false)}}, nil
	case "<":
		if g == 0 {
			return []comparator{{"<", semverV{pre: []string{"0"}}}}, nil
		}
		return []comparator{{"<", p.full(true)}}, nil
	case "<=":
		if g == 0 {
			return []comparator{{}}, nil
		}
		return []comparator{{"<", p.bump(g - 1)}}, nil
	}
	return nil, fmt.Errorf("%q is not a comparator", op+tok)
}

// release is the version without its prerelease.
func (v semverV) release() semverV { v.pre = nil; return v }
