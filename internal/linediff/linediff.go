// Package linediff computes a shortest line diff of two texts (Myers' O(ND) algorithm) and
// groups it into hunks with context, for people to read: the web UI shows what changed between
// two versions of a workflow with it.
package linediff

import "strings"

// Kind says whether a [Line] is in both texts, only the old one or only the new one.
type Kind int

const (
	// Equal is a line of both texts.
	Equal Kind = iota
	// Delete is a line of the old text only.
	Delete
	// Insert is a line of the new text only.
	Insert
)

// Line is one line of a diff.
type Line struct {
	Kind Kind
	Text string
	// Old and New are the line's 1-based numbers in the old and the new text; 0 in the text
	// that does not have it.
	Old, New int
}

// MaxEdits bounds the work of [Diff]: texts that differ by more lines than this are shown as
// the old text deleted and the new one inserted, which is correct but not shortest. The
// search costs O((N+M)·D) time and O(D²) memory for D edits.
const MaxEdits = 4000

// Split returns the lines of s, without their line ends; a final line end does not start an
// empty line.
func Split(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	return strings.Split(s, "\n")
}

// Diff returns a shortest edit script turning a into b, as every line of both in order: the
// lines of a are those that are not Insert, the lines of b those that are not Delete.
func Diff(a, b []string) []Line {
	// Lines the texts share at the start and the end need no search.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out := make([]Line, 0, len(a)+len(b)-pre-suf)
	for i := range pre {
		out = append(out, Line{Kind: Equal, Text: a[i], Old: i + 1, New: i + 1})
	}
	out = append(out, middle(a[pre:len(a)-suf], b[pre:len(b)-suf], pre)...)
	for i := range suf {
		ai, bi := len(a)-suf+i, len(b)-suf+i
		out = append(out, Line{Kind: Equal, Text: a[ai], Old: ai + 1, New: bi + 1})
	}
	return out
}

// middle diffs a and b, which start after skip common lines, with Myers' greedy search: for
// each number of edits d, the furthest x reachable on each diagonal k = x−y.
func middle(a, b []string, skip int) []Line {
	n, m := len(a), len(b)
	var trace [][]int // trace[d][k+d]: the furthest x on diagonal k with d edits
	var v []int       // the current round's, indexed k+d
	end := -1
search:
	for d := 0; d <= n+m; d++ {
		if d > MaxEdits {
			return replaceAll(a, b, skip)
		}
		v = make([]int, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			switch {
			case d == 0:
				x = 0
			case k == -d || (k != d && at(trace, d-1, k-1) < at(trace, d-1, k+1)):
				x = at(trace, d-1, k+1) // down: an insert
			default:
				x = at(trace, d-1, k-1) + 1 // right: a delete
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[k+d] = x
			if x >= n && y >= m {
				trace = append(trace, v)
				end = d
				break search
			}
		}
		trace = append(trace, v)
	}
	// Walk back from (n, m), collecting lines in reverse.
	var rev []Line
	eq := func(x, y int) { rev = append(rev, Line{Kind: Equal, Text: a[x], Old: skip + x + 1, New: skip + y + 1}) }
	x, y := n, m
	for d := end; d > 0; d-- {
		k := x - y
		var px, py int
		if k == -d || (k != d && at(trace, d-1, k-1) < at(trace, d-1, k+1)) {
			px = at(trace, d-1, k+1)
			py = px - (k + 1)
			for x > px && y > py+1 {
				x, y = x-1, y-1
				eq(x, y)
			}
			y--
			rev = append(rev, Line{Kind: Insert, Text: b[y], New: skip + y + 1})
		} else {
			px = at(trace, d-1, k-1)
			py = px - (k - 1)
			for x > px+1 && y > py {
				x, y = x-1, y-1
				eq(x, y)
			}
			x--
			rev = append(rev, Line{Kind: Delete, Text: a[x], Old: skip + x + 1})
		}
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		eq(x, y)
	}
	out := make([]Line, len(rev))
	for i, l := range rev {
		out[len(rev)-1-i] = l
	}
	return out
}

func at(trace [][]int, d, k int) int { return trace[d][k+d] }

func replaceAll(a, b []string, skip int) []Line {
	out := make([]Line, 0, len(a)+len(b))
	for i, s := range a {
		out = append(out, Line{Kind: Delete, Text: s, Old: skip + i + 1})
	}
	for i, s := range b {
		out = append(out, Line{Kind: Insert, Text: s, New: skip + i + 1})
	}
	return out
}

// Counts returns the numbers of inserted and deleted lines.
func Counts(lines []Line) (inserted, deleted int) {
	for _, l := range lines {
		switch l.Kind {
		case Insert:
			inserted++
		case Delete:
			deleted++
		}
	}
	return inserted, deleted
}

// Hunk is a run of changed lines with up to context unchanged lines around it; Skipped is the
// number of unchanged lines left out before it.
type Hunk struct {
	Skipped int
	Lines   []Line
}

// Hunks groups a diff into hunks: changes closer than 2·context unchanged lines share a hunk.
// Trailing is the number of unchanged lines left out after the last hunk. A diff without
// changes has no hunk.
func Hunks(lines []Line, context int) (hunks []Hunk, trailing int) {
	keep := make([]bool, len(lines))
	for i, l := range lines {
		if l.Kind == Equal {
			continue
		}
		for j := max(0, i-context); j <= min(len(lines)-1, i+context); j++ {
			keep[j] = true
		}
	}
	skipped := 0
	for i, l := range lines {
		if !keep[i] {
			skipped++
			continue
		}
		if len(hunks) == 0 || skipped > 0 {
			hunks = append(hunks, Hunk{Skipped: skipped})
			skipped = 0
		}
		h := &hunks[len(hunks)-1]
		h.Lines = append(h.Lines, l)
	}
	return hunks, skipped
}
