package graph

import (
	"context"
	"encoding/xml"
	"fmt"
	"math/big"
	"strings"
	"unicode"
)

// mavenVersion is a version parsed as Maven 3.8's ComparableVersion parses it: items separated by
// '.', a '-' or a change between digits and letters opening a sub-list; trailing "null" items (0,
// "", ga, final, release) dropped from each list. A version compares item by item.
type mavenVersion struct{ items mvList }

type mvItem interface{ isNull() bool }

type (
	mvInt  struct{ v *big.Int }
	mvStr  struct{ v string }
	mvList []mvItem
)

func (i mvInt) isNull() bool  { return i.v.Sign() == 0 }
func (s mvStr) isNull() bool  { return qualifierRank(s.v) == qualifierRank("") }
func (l mvList) isNull() bool { return len(l) == 0 }

// qualifiers are Maven's known qualifiers in order; "" is the release. An unknown qualifier sorts
// after all of them, lexically.
var qualifiers = []string{"alpha", "beta", "milestone", "rc", "snapshot", "", "sp"}

var qualifierAliases = map[string]string{"ga": "", "final": "", "release": "", "cr": "rc"}

func qualifierRank(q string) string {
	for i, k := range qualifiers {
		if k == q {
			return fmt.Sprint(i)
		}
	}
	return fmt.Sprintf("%d-%s", len(qualifiers), q)
}

func newMvStr(s string, followedByDigit bool) mvStr {
	if followedByDigit && len(s) == 1 {
		switch s {
		case "a":
			s = "alpha"
		case "b":
			s = "beta"
		case "m":
			s = "milestone"
		}
	}
	if a, ok := qualifierAliases[s]; ok {
		s = a
	}
	return mvStr{s}
}

func parseMvItem(digits bool, s string) mvItem {
	if digits {
		v, _ := new(big.Int).SetString(s, 10)
		return mvInt{v}
	}
	return newMvStr(s, false)
}

// parseMavenVersion parses a version as ComparableVersion does; every string parses.
func parseMavenVersion(v string) mavenVersion {
	v = strings.ToLower(v)
	root := &mvList{}
	list := root
	stack := []*mvList{root}
	digits, start := false, 0
	sub := func() {
		n := &mvList{}
		*list = append(*list, n)
		list = n
		stack = append(stack, n)
	}
	for i, c := range v {
		switch {
		case c == '.' || c == '-':
			if i == start {
				*list = append(*list, mvInt{big.NewInt(0)})
			} else {
				*list = append(*list, parseMvItem(digits, v[start:i]))
			}
			start = i + 1
			if c == '-' {
				sub()
			}
		case c >= '0' && c <= '9':
			if !digits && i > start {
				*list = append(*list, newMvStr(v[start:i], true))
				start = i
				sub()
			}
			digits = true
		default:
			if digits && i > start {
				*list = append(*list, parseMvItem(true, v[start:i]))
				start = i
				sub()
			}
			digits = false
		}
	}
	if len(v) > start {
		*list = append(*list, parseMvItem(digits, v[start:]))
	}
	for i := len(stack) - 1; i >= 0; i-- {
		stack[i].normalize()
	}
	return mavenVersion{items: deref(*root)}
}

// normalize drops the list's trailing null items, stopping at the first non-null that is not a list.
func (l *mvList) normalize() {
	for i := len(*l) - 1; i >= 0; i-- {
		it := (*l)[i]
		if p, ok := it.(*mvList); ok {
			p.normalize()
			it = deref(*p)
			(*l)[i] = it
		}
		if it.isNull() {
			*l = append((*l)[:i], (*l)[i+1:]...)
		} else if _, ok := it.(mvList); !ok {
			break
		}
	}
}

// deref replaces the parse's list pointers by lists.
func deref(l mvList) mvList {
	out := make(mvList, len(l))
	for i, it := range l {
		if p, ok := it.(*mvList); ok {
			it = deref(*p)
		}
		out[i] = it
	}
	return out
}

// compareMv compares a with b (nil standing for a missing item), as ComparableVersion's items do.
func compareMv(a, b mvItem) int {
	switch x := a.(type) {
	case nil:
		if b == nil {
			return 0
		}
		return -compareMv(b, nil)
	case mvInt:
		switch y := b.(type) {
		case nil:
			if x.v.Sign() == 0 {
				return 0
			}
			return 1
		case mvInt:
			return x.v.Cmp(y.v)
		default:
			return 1
		}
	case mvStr:
		switch y := b.(type) {
		case nil:
			return strings.Compare(qualifierRank(x.v), qualifierRank(""))
		case mvStr:
			return strings.Compare(qualifierRank(x.v), qualifierRank(y.v))
		default:
			return -1
		}
	case mvList:
		switch y := b.(type) {
		case nil:
			if len(x) == 0 {
				return 0
			}
			return compareMv(x[0], nil)
		case mvInt:
			return -1
		case mvStr:
			return 1
		case mvList:
			for i := 0; i < len(x) || i < len(y); i++ {
				var l, r mvItem
				if i < len(x) {
					l = x[i]
				}
				if i < len(y) {
					r = y[i]
				}
				if c := compareMv(l, r); c != 0 {
					return c
				}
			}
			return 0
		}
	}
	return 0
}

// compareMavenVersions compares two version strings by Maven's rules.
func compareMavenVersions(a, b string) int {
	return compareMv(parseMavenVersion(a).items, parseMavenVersion(b).items)
}

// mavenRange is a version range: restrictions, any of which a version satisfies. A version
// written without brackets is no range (Maven's "soft" requirement: that version).
type mavenRange []restriction

type restriction struct {
	lower, upper         string // "" is unbounded
	lowerIncl, upperIncl bool
}

// isMavenRange reports whether a version advice is a range ([1.0,2.0), [1.0], (,1.0],[1.2,)).
func isMavenRange(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "[") || strings.HasPrefix(s, "(")
}

// parseMavenRange parses a range as Maven's VersionRange does, with an error naming the part.
func parseMavenRange(spec string) (mavenRange, error) {
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, spec)
	var out mavenRange
	for s != "" {
		if s[0] != '[' && s[0] != '(' {
			return nil, fmt.Errorf("range %q: %q does not start with [ or (", spec, s)
		}
		end := strings.IndexAny(s, "])")
		if end < 0 {
			return nil, fmt.Errorf("range %q: a restriction is not closed", spec)
		}
		r := restriction{lowerIncl: s[0] == '[', upperIncl: s[end] == ']'}
		body := s[1:end]
		if lo, hi, ok := strings.Cut(body, ","); ok {
			if strings.Contains(hi, ",") {
				return nil, fmt.Errorf("range %q: %q has more than two bounds", spec, s[:end+1])
			}
			r.lower, r.upper = lo, hi
			if lo != "" && hi != "" && compareMavenVersions(lo, hi) > 0 {
				return nil, fmt.Errorf("range %q: lower bound %s is above upper bound %s", spec, lo, hi)
			}
		} else {
			if !r.lowerIncl || !r.upperIncl || body == "" {
				return nil, fmt.Errorf("range %q: a single version must be written [version]", spec)
			}
			r.lower, r.upper = body, body
		}
		out = append(out, r)
		s = strings.TrimPrefix(s[end+1:], ",")
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("range %q is empty", spec)
	}
	return out, nil
}

func (r mavenRange) contains(v string) bool {
	for _, x := range r {
		if x.lower != "" {
			c := compareMavenVersions(v, x.lower)
			if c < 0 || (c == 0 && !x.lowerIncl) {
				continue
			}
		}
		if x.upper != "" {
			c := compareMavenVersions(v, x.upper)
			if c > 0 || (c == 0 && !x.upperIncl) {
				continue
			}
		}
		return true
	}
	return false
}

// mavenMetadata is a package's maven-metadata.xml: the versions the repository holds.
type mavenMetadata struct {
	Versions []string `xml:"versioning>versions>version"`
}

// maxMavenVersions bounds the versions read from one maven-metadata.xml.
const maxMavenVersions = 10000

// selectMavenRange returns the highest version of pkg in the source's maven-metadata.xml that the
// range holds, as Maven's resolver chooses. No metadata, or no version in the range, wraps
// ErrMissing; a range or metadata that does not parse is a [*MetadataError].
func selectMavenRange(ctx context.Context, f *Fetcher, source, pkg, spec string) (string, error) {
	rng, err := parseMavenRange(spec)
	if err != nil {
		return "", &MetadataError{What: pkg, Reason: err.Error()}
	}
	g, a, ok := strings.Cut(pkg, ":")
	if !ok || g == "" || a == "" || strings.ContainsAny(pkg, "/\\") || strings.Contains(pkg, "..") {
		return "", &MetadataError{What: pkg, Reason: "want groupId:artifactId"}
	}
	rel := strings.ReplaceAll(g, ".", "/") + "/" + a + "/maven-metadata.xml"
	b, err := f.Fetch(ctx, source, rel)
	if err != nil {
		return "", err
	}
	var md mavenMetadata
	if err := xml.Unmarshal(b, &md); err != nil {
		return "", &MetadataError{What: rel, Reason: err.Error()}
	}
	if len(md.Versions) > maxMavenVersions {
		return "", &MetadataError{What: rel, Reason: fmt.Sprintf("%d versions, more than the limit of %d", len(md.Versions), maxMavenVersions)}
	}
	best := ""
	for _, v := range md.Versions {
		v = strings.TrimSpace(v)
		if v != "" && rng.contains(v) && (best == "" || compareMavenVersions(v, best) > 0) {
			best = v
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s: no version in range %s among %d: %w", rel, spec, len(md.Versions), ErrMissing)
	}
	return best, nil
}
