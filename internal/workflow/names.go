package workflow

import (
	"fmt"
	"regexp"
)

// namePattern is the syntax of workflow, step and event names: lowercase ASCII letters, digits,
// '.', '_' and '-', starting with a letter or digit. Names are identifiers in URLs, metrics
// labels, SQL rows and DOT files; keeping them this small makes them safe everywhere and makes
// case-insensitive collisions impossible. Action names are owned by the catalog and are only
// checked for length.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// checkName returns why name is not a valid workflow, step or event name, or "".
func checkName(kind, name string) string {
	if name == "" {
		return "empty " + kind
	}
	if len(name) > MaxNameLen {
		return fmt.Sprintf("%s %q is %d characters; the limit is %d", kind, name[:20]+"…", len(name), MaxNameLen)
	}
	if !namePattern.MatchString(name) {
		return fmt.Sprintf("invalid %s %q: use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit", kind, name)
	}
	return ""
}

// closest returns the candidate nearest to s by edit distance, if it is near enough to be a
// plausible typo, or "".
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if c == s {
			continue
		}
		d := editDistance(s, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(2, len(s)/3)
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes. Names are short (≤ 100).
func editDistance(a, b string) int {
	if len(a) > 2*MaxNameLen || len(b) > 2*MaxNameLen {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
