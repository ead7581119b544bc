package unpack

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"

	"github.com/sluice-project/sluice/internal/textclean"
)

// Entry names are only ever names: they become the tail of a child's derived name
// ("Archive.zip/dir/entry"), never a path on disk. Still, they are cleaned so that every name
// is a local, slash-separated, valid UTF-8 path a user can read and a later extractor could use.

const (
	maxComponent = 255  // bytes per path component
	maxName      = 4096 // bytes per entry name
)

// entryName returns the cleaned form of an archive entry's (already decoded) name:
//   - invalid UTF-8 becomes U+FFFD; control characters (C0, DEL, C1, including NUL) become "_";
//   - backslashes are separators (Windows tools write them);
//   - a drive letter ("C:") and leading slashes are dropped;
//   - empty, "." and ".." components are dropped: "../../etc/passwd" becomes "etc/passwd";
//   - components are cut at 255 bytes on a rune boundary, and components past 4096 bytes dropped;
//   - an empty result is "unnamed".
//
// The result always satisfies filepath.IsLocal on Unix.
func entryName(raw string) string {
	s := strings.ToValidUTF8(raw, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		switch {
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
			return '_'
		case r == '\\':
			return '/'
		}
		return r
	}, s)
	var b strings.Builder
	for _, p := range strings.Split(s, "/") {
		for b.Len() == 0 && len(p) >= 2 && p[1] == ':' && isASCIILetter(p[0]) {
			p = p[2:] // "C:" or "C:name" leading the name (after any "/": "/C:" is one too)
		}
		if p == "" || p == "." || p == ".." {
			continue
		}
		p = truncate(p, maxComponent)
		if b.Len()+1+len(p) > maxName {
			break // whole components only, so a cut never makes a new ".."
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(p)
	}
	if b.Len() == 0 {
		return "unnamed"
	}
	return b.String()
}

// fileName returns s cleaned to a single path component (attachment names, decompressed files).
func fileName(s string) string {
	return entryName(strings.NewReplacer("/", "_", "\\", "_").Replace(s))
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// legacyCharset picks the DOS code page of a zip's non-UTF-8 names. The zip format says such
// names are CP437, but Russian-locale tools wrote CP866. Both code pages put letters in
// 0x80–0xAF; CP437 has symbols, box drawing and Greek where CP866 has the rest of the Cyrillic
// alphabet (0xE0–0xF7). So every high byte of every name is scored as "a letter" or "not a
// letter" under each code page, and CP866 wins only if it explains strictly more bytes as
// letters over the whole archive (a per-archive choice keeps sibling names consistent; ties
// go to CP437, the standard).
func legacyCharset(names []string) *charmap.Charmap {
	var bad437, bad866 int
	for _, n := range names {
		for i := 0; i < len(n); i++ {
			b := n[i]
			if b < 0x80 {
				continue
			}
			if !(b <= 0xa5) { // CP437 letters: 0x80–0xA5 (accented Latin)
				bad437++
			}
			if !(b <= 0xaf || (b >= 0xe0 && b <= 0xf7)) { // CP866 Cyrillic letters
				bad866++
			}
		}
	}
	if bad866 < bad437 {
		return charmap.CodePage866
	}
	return charmap.CodePage437
}

// legacyNames picks the encoding of a zip's non-UTF-8 names: a CJK code page when the names read
// as Japanese, Chinese or Korean text in it (Japanese and Chinese Windows tools write Shift_JIS,
// GBK or Big5 names without the UTF-8 flag), else [legacyCharset]'s DOS code page.
func legacyNames(names []string) encoding.Encoding {
	if len(names) == 0 {
		return charmap.CodePage437
	}
	_, cs := textclean.Decode([]byte(strings.Join(names, "\n")))
	switch cs {
	case "shift_jis", "euc-jp", "gb18030", "big5", "euc-kr":
		if enc, _, ok := textclean.LookupCharset(cs); ok {
			return enc
		}
	}
	return legacyCharset(names)
}

// decodeLegacy decodes s with cm; undecodable input (impossible for these single-byte code
// pages) falls back to U+FFFD replacement.
func decodeLegacy(s string, cm encoding.Encoding) string {
	out, err := cm.NewDecoder().String(s)
	if err != nil {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	return out
}

// decodeName decodes a non-zip entry name: UTF-8 when valid, else Windows-1252 (tar and old
// RAR archives from Unix and Windows tools carry Latin-1-like bytes).
func decodeName(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return decodeLegacy(s, charmap.Windows1252)
}

// compressionSuffixes maps the suffix of a compressed file to what its content is named.
var compressionSuffixes = []struct{ suffix, repl string }{
	{".tgz", ".tar"}, {".tbz2", ".tar"}, {".tbz", ".tar"}, {".txz", ".tar"}, {".tzst", ".tar"},
	{".gz", ""}, {".gzip", ""}, {".bz2", ""}, {".bz", ""}, {".xz", ""}, {".zst", ""}, {".zstd", ""},
	{".lz4", ""}, {".lz", ""}, {".br", ""}, {".sz", ""}, {".z", ""}, {".zz", ""}, {".mz", ""},
}

// decompressedName returns the name of a single compressed file's content: its own base name
// without the compression suffix ("notes.txt.gz" → "notes.txt"); a name without a known suffix
// is kept as it is.
func decompressedName(base string) string {
	lower := strings.ToLower(base)
	for _, s := range compressionSuffixes {
		if strings.HasSuffix(lower, s.suffix) && len(base) > len(s.suffix) {
			return fileName(base[:len(base)-len(s.suffix)] + s.repl)
		}
	}
	return fileName(base)
}
