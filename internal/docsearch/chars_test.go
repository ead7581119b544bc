package docsearch

import "testing"

// TestFirstChars: the cut counts characters, as SQLite's substr does, not bytes.
func TestFirstChars(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, s string
		n       int
		want    string
	}{
		{name: "ascii", s: "The dog chased", n: 10, want: "The dog ch"},
		{name: "multibyte", s: "Grüße, 東京", n: 8, want: "Grüße, 東"},
		{name: "shorter", s: "dog", n: 10, want: "dog"},
		{name: "none", s: "dog", n: 0, want: ""},
	} {
		if got := firstChars(tc.s, tc.n); got != tc.want {
			t.Errorf("%s: firstChars(%q, %d) = %q, want %q", tc.name, tc.s, tc.n, got, tc.want)
		}
	}
}
