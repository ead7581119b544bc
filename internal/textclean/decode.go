package textclean

import (
	"bytes"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// sniffLen is how much of the input the UTF-16 and legacy-encoding detectors look at.
const sniffLen = 64 << 10

// legacy lists the legacy encodings [Decode] scores, in order of preference on a tie.
var legacy = []struct {
	name string
	enc  encoding.Encoding
}{
	{"windows-1252", charmap.Windows1252},
	{"shift_jis", japanese.ShiftJIS},
	{"euc-jp", japanese.EUCJP},
	{"gbk", simplifiedchinese.GBK},
	{"big5", traditionalchinese.Big5},
	{"euc-kr", korean.EUCKR},
	{"windows-1251", charmap.Windows1251},
}

// Decode converts b to a string and names the character set it found: a byte-order mark
// (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE; the mark is dropped), UTF-16 without a mark (recognised by
// its pattern of NUL bytes), valid UTF-8, and otherwise the most plausible of windows-1252,
// Shift_JIS, EUC-JP, GBK, Big5, EUC-KR and windows-1251, chosen by scoring a decoded sample.
// The charset name is lowercase ("utf-8", "utf-16le", "shift_jis", "windows-1252", …).
//
// The result is not sanitised: pass it to [Sanitize]. Decode is safe for concurrent use.
func Decode(b []byte) (text string, charsetName string) {
	switch {
	case bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}):
		return string(b[3:]), "utf-8"
	case bytes.HasPrefix(b, []byte{0xff, 0xfe, 0, 0}):
		return decodeWith(utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM), b[4:]), "utf-32le"
	case bytes.HasPrefix(b, []byte{0, 0, 0xfe, 0xff}):
		return decodeWith(utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM), b[4:]), "utf-32be"
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		return decodeWith(unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), b[2:]), "utf-16le"
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		return decodeWith(unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), b[2:]), "utf-16be"
	}
	if le, ok := sniffUTF16(b); ok {
		if le {
			return decodeWith(unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), b), "utf-16le"
		}
		return decodeWith(unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), b), "utf-16be"
	}
	if utf8.Valid(b) {
		return string(b), "utf-8"
	}
	sample := b
	truncated := false
	if len(sample) > sniffLen {
		sample, truncated = sample[:sniffLen], true
	}
	best, bestScore := 0, 0.0
	for i, c := range legacy {
		s := score(decodeWith(c.enc, sample), truncated)
		if i == 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return decodeWith(legacy[best].enc, b), legacy[best].name
}

// LookupCharset returns the decoder-backed encoding for a charset label such as one found in an
// HTML <meta charset> or a MIME header, and its canonical name. It reports false for an unknown
// label.
func LookupCharset(label string) (encoding.Encoding, string, bool) {
	enc, name := lookup(label)
	return enc, name, enc != nil
}

func decodeWith(enc encoding.Encoding, b []byte) string {
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		// x/text decoders replace bad input rather than fail; keep the bytes if one does fail.
		return string(b)
	}
	return string(out)
}

// sniffUTF16 recognises UTF-16 without a byte-order mark by where its NUL bytes fall: text that is
// mostly Latin script has a NUL in every other byte. It reports whether the text is little-endian.
func sniffUTF16(b []byte) (littleEndian, ok bool) {
	n := min(len(b), 4096) &^ 1
	if n < 4 {
		return false, false
	}
	var even, odd int
	for i := 0; i < n; i += 2 {
		if b[i] == 0 {
			even++
		}
		if b[i+1] == 0 {
			odd++
		}
	}
	pairs := n / 2
	switch {
	case odd*10 >= pairs*3 && even*20 <= pairs:
		return true, true
	case even*10 >= pairs*3 && odd*20 <= pairs:
		return false, true
	}
	return false, false
}

// score rates how plausible s is as natural-language text. Replacement characters (decoding
// errors) and controls weigh heavily against; letters of a script in a run of the same script
// count for it. The weights are tuned so that each legacy encoding wins on its own text.
func score(s string, truncated bool) float64 {
	total := 0.0
	errs := 0
	var prev rune = ' '
	for _, r := range s {
		w := 0.0
		switch {
		case r == utf8.RuneError:
			errs++
		case r == '\t' || r == '\n' || r == '\r' || r == '\f':
		case r < 0x20 || (r >= 0x7f && r < 0xa0):
			w = -20
		case r < 0x80:
		case r >= 0xc0 && r <= 0xff && r != 0xd7 && r != 0xf7:
			// A Latin-1 letter is plausible next to ASCII letters ("élevé"), suspicious in a run of
			// its own (Cyrillic or CJK bytes read as windows-1252).
			if isASCIILetter(prev) || prev == ' ' || prev == '\'' {
				w = 1
			}
		case r >= 0xa0 && r < 0xc0:
			w = -0.5
		case r >= 0x100 && r <= 0x17f:
			w = 0.25
		case r == 0x192 || r == 0x2c6 || r == 0x2dc || r == 0x2030 || r == 0x2039 || r == 0x203a || r == 0x2122:
			w = -1 // windows-1252 oddities: ƒ ˆ ˜ ‰ ‹ › ™
		case r >= 0x400 && r <= 0x4ff:
			switch {
			case prev >= 0x400 && prev <= 0x4ff, prev == ' ':
				w = 1
			case isASCIILetter(prev):
				w = -1
			}
		case r >= 0x3040 && r <= 0x30ff:
			w = 2 // hiragana and katakana
		case r >= 0x3000 && r <= 0x303f:
			w = 1 // CJK punctuation
		case r >= 0x4e00 && r <= 0x9fff:
			w = 1
		case r >= 0xac00 && r <= 0xd7a3:
			w = 1
		case r >= 0xff61 && r <= 0xff9f:
			w = -1 // half-width katakana: usually other bytes read as Shift_JIS
		case r >= 0xe000 && r <= 0xf8ff:
			w = -5
		}
		total += w
		prev = r
	}
	if truncated && errs > 0 {
		errs-- // the sample may end inside a character
	}
	return total - 100*float64(errs)
}

func isASCIILetter(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}
