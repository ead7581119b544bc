// Package textclean turns the bytes of an untrusted document into text Sluice can store and show:
// [Decode] detects the character set (byte-order marks, UTF-16 without a BOM, UTF-8, common legacy
// encodings) and [Sanitize] normalises the result to valid UTF-8 without control characters or
// noncharacters, capped at a maximum length.
package textclean

import (
	"strings"
	"unicode/utf8"
)

// DefaultMaxChars is the cap [Sanitize] applies when maxChars is zero or negative.
const DefaultMaxChars = 1_000_000

// Sanitize returns s as valid UTF-8 fit for storage and display:
//
//   - each invalid byte sequence becomes U+FFFD;
//   - "\r\n", "\r" and U+0085 (NEL) become "\n";
//   - every other C0 or C1 control character except tab and newline becomes a space;
//   - Unicode noncharacters (U+FDD0..U+FDEF and U+xFFFE, U+xFFFF in every plane) are removed;
//   - the result holds at most maxChars characters (runes), cut between characters.
//
// A maxChars of zero or less means [DefaultMaxChars]. Sanitize is safe for concurrent use.
func Sanitize(s string, maxChars int) string {
	t, _ := SanitizeCut(s, maxChars)
	return t
}

// SanitizeCut is [Sanitize] that also reports whether the cap cut characters off s: what a
// document's "truncated" metadata says.
func SanitizeCut(s string, maxChars int) (string, bool) {
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	if clean(s) && (len(s) <= maxChars || utf8.RuneCountInString(s) <= maxChars) {
		return s, false
	}
	var b strings.Builder
	b.Grow(min(len(s), maxChars*utf8.UTFMax))
	n, i := 0, 0
	for i < len(s) && n < maxChars {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				i++
			}
			r = '\n'
		case r == 0x85:
			r = '\n'
		case r == '\t' || r == '\n':
		case r < 0x20 || (r >= 0x7f && r < 0xa0):
			r = ' '
		case isNonchar(r):
			continue
		}
		// utf8.RuneError from an invalid byte is written as U+FFFD, which is what we want.
		b.WriteRune(r)
		n++
	}
	return b.String(), i < len(s)
}

// clean reports whether s needs no change other than, possibly, the length cap.
func clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		if (r >= 0x80 && r < 0xa0) || isNonchar(r) {
			return false
		}
		i += size
	}
	return true
}

// isNonchar reports whether r is one of Unicode's 66 noncharacters.
func isNonchar(r rune) bool {
	return (r >= 0xfdd0 && r <= 0xfdef) || (r&0xfffe == 0xfffe && r <= utf8.MaxRune)
}
