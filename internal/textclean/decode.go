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
	{"gb18030", simplifiedchinese.GB18030},
	{"big5", traditionalchinese.Big5},
	{"euc-kr", korean.EUCKR},
	{"windows-1251", charmap.Windows1251},
}

// Decode converts b to a string and names the character set it found: a byte-order mark
// (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE; the mark is dropped), UTF-16 without a mark (recognised by
// its pattern of NUL bytes), valid UTF-8, and otherwise the most plausible of windows-1252,
// Shift_JIS, EUC-JP, GB18030, Big5, EUC-KR and windows-1251, chosen by scoring a decoded sample.
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
		// A character of a double-byte encoding weighs as its two bytes would read as letters
		// of a single-byte one; what tells the double-byte encodings apart is coherence: Japanese
		// has kana, Chinese its common characters, Korean Hangul with hardly any Hanja between.
		case r >= 0x3040 && r <= 0x30ff:
			w = 3 // hiragana and katakana
		case r >= 0x3000 && r <= 0x303f:
			w = 1.5 // CJK punctuation
		case r >= 0x4e00 && r <= 0x9fff:
			w = 1
			if commonHan[r] {
				w = 3
			}
			if isHangul(prev) {
				w = -2 // Hanja inside a Hangul word: other bytes read as EUC-KR
			}
		case isHangul(r):
			w = 2.5
			if prev >= 0x4e00 && prev <= 0x9fff {
				w = -2
			}
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

func isHangul(r rune) bool { return r >= 0xac00 && r <= 0xd7a3 }

// commonHan holds the most frequent Chinese characters, simplified and traditional: real Chinese
// text is mostly made of them, and Chinese bytes read in another CJK encoding (or Korean or
// Japanese bytes read as Chinese) rarely are.
var commonHan = func() map[rune]bool {
	const simplified = "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交规万取拉格望觉术领共确传师观清今切院让识候带导争运笔华联盟基础专政会义阶级领导"
	const traditional = "這個們來為國說時會對裡後發經麼學現當沒動還進開從實軍無與長機關點業將兩間問並應戰頭體見產給門兒東聲員解論處義幾認條氣爾別變總電數報結量務場計區隊決治馬書則聽卻達強難權設記類據邊張該規萬覺術領確傳師觀讓識帶導爭運筆華聯盟礎專政會義階級於著種樣當動們發國"
	m := map[rune]bool{}
	for _, r := range simplified + traditional {
		m[r] = true
	}
	return m
}()

func isASCIILetter(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}
