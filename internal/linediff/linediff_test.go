package linediff_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/linediff"
)

// render writes a diff as unified-diff lines: " x", "-x", "+x".
func render(lines []linediff.Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString([]string{" ", "-", "+"}[l.Kind] + l.Text + "\n")
	}
	return b.String()
}

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"both empty", "", "", ""},
		{"from nothing", "", "x\ny\n", "+x\n+y\n"},
		{"to nothing", "x\ny\n", "", "-x\n-y\n"},
		{"same", "x\ny\n", "x\ny\n", " x\n y\n"},
		{"a step added", "name: w\nsteps:\n  a: {action: noop}\n", "name: w\nsteps:\n  a: {action: noop}\n  b: {action: detect}\n",
			" name: w\n steps:\n   a: {action: noop}\n+  b: {action: detect}\n"},
		{"a line changed in the middle", "a\nb\nc\nd\n", "a\nb\nC\nd\n", " a\n b\n-c\n+C\n d\n"},
		{"Myers' example", "A\nB\nC\nA\nB\nB\nA\n", "C\nB\nA\nB\nA\nC\n", ""}, // 5 edits; checked below
		{"CRLF is a line end", "x\r\ny\r\n", "x\ny\n", " x\n y\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := linediff.Split(tc.a), linediff.Split(tc.b)
			d := linediff.Diff(a, b)
			check(t, a, b, d)
			if tc.want != "" || tc.a == tc.b {
				if got := render(d); got != tc.want {
					t.Fatalf("diff:\n%s\nwant:\n%s", got, tc.want)
				}
			}
			if tc.name == "Myers' example" {
				if ins, del := linediff.Counts(d); ins+del != 5 {
					t.Fatalf("%d edits, want 5:\n%s", ins+del, render(d))
				}
			}
		})
	}
}

// check verifies that d turns a into b with correct line numbers.
func check(t *testing.T, a, b []string, d []linediff.Line) {
	t.Helper()
	for _, side := range []struct {
		name  string
		text  []string
		other linediff.Kind // the kind of line this side lacks
		num   func(linediff.Line) int
	}{
		{"old", a, linediff.Insert, func(l linediff.Line) int { return l.Old }},
		{"new", b, linediff.Delete, func(l linediff.Line) int { return l.New }},
	} {
		var got []string
		for _, l := range d {
			if l.Kind == side.other {
				if side.num(l) != 0 {
					t.Fatalf("line %q has a number in the %s text, which lacks it", l.Text, side.name)
				}
				continue
			}
			got = append(got, l.Text)
			if side.num(l) != len(got) {
				t.Fatalf("line %q: %s number %d, want %d", l.Text, side.name, side.num(l), len(got))
			}
		}
		if !slices.Equal(got, side.text) {
			t.Fatalf("the diff does not give back the %s text:\n%s", side.name, render(d))
		}
	}
}

// lcs is the length of a longest common subsequence, by dynamic programming.
func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

// TestDiffIsShortest compares the diff of random texts over a small alphabet (many repeated
// lines, the hard case) with the longest common subsequence: it must keep exactly that many
// lines, and give back both texts.
func TestDiffIsShortest(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	text := func() []string {
		out := make([]string, rng.IntN(30))
		for i := range out {
			out[i] = fmt.Sprint(rng.IntN(4))
		}
		return out
	}
	for range 2000 {
		a, b := text(), text()
		d := linediff.Diff(a, b)
		check(t, a, b, d)
		ins, del := linediff.Counts(d)
		if want := len(a) + len(b) - 2*lcs(a, b); ins+del != want {
			t.Fatalf("%v → %v: %d edits, want %d:\n%s", a, b, ins+del, want, render(d))
		}
	}
}

// TestDiffBeyondMaxEdits shows that texts differing by more than MaxEdits lines get a correct
// diff (all deleted, all inserted) rather than an unbounded search.
func TestDiffBeyondMaxEdits(t *testing.T) {
	t.Parallel()
	n := linediff.MaxEdits/2 + 10
	a, b := make([]string, n), make([]string, n)
	for i := range n {
		a[i], b[i] = fmt.Sprint("a", i), fmt.Sprint("b", i)
	}
	a, b = append([]string{"same"}, a...), append([]string{"same"}, b...)
	d := linediff.Diff(a, b)
	check(t, a, b, d)
	if ins, del := linediff.Counts(d); ins != n || del != n {
		t.Fatalf("%d inserted, %d deleted; want %d each", ins, del, n)
	}
}

func TestHunks(t *testing.T) {
	t.Parallel()
	var a []string
	for i := range 20 {
		a = append(a, fmt.Sprint(i))
	}
	b := slices.Clone(a)
	b[2], b[15] = "two", "fifteen"
	hunks, trailing := linediff.Hunks(linediff.Diff(a, b), 2)
	if len(hunks) != 2 || trailing != 2 {
		t.Fatalf("%d hunks, %d trailing; want 2, 2: %+v", len(hunks), trailing, hunks)
	}
	// Lines 0..4 (context 2 around line 2, which is deleted and inserted), then 13..17.
	if hunks[0].Skipped != 0 || len(hunks[0].Lines) != 6 || hunks[1].Skipped != 8 || len(hunks[1].Lines) != 6 {
		t.Fatalf("hunks %+v", hunks)
	}
	if h, tr := linediff.Hunks(linediff.Diff(a, a), 3); h != nil || tr != 20 {
		t.Fatalf("a diff without changes has hunks %+v, %d trailing", h, tr)
	}
}
