package textclean

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

func TestSanitize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "clean", in: "héllo\tworld\n", want: "héllo\tworld\n"},
		{name: "crlf", in: "a\r\nb\rc\u0085d", want: "a\nb\nc\nd"},
		{name: "cr at end", in: "a\r", want: "a\n"},
		{name: "controls", in: "a\x00b\x1bc\x7fd\u0090e\ff", want: "a b c d e f"},
		{name: "invalid bytes", in: "a\xffb\xc3", want: "a\uFFFDb\uFFFD"},
		{name: "noncharacters", in: "a\uFDD0b\uFFFEc\U0010FFFFd\U0001FFFE", want: "abcd"},
		{name: "cap", in: "aébc", max: 2, want: "aé"},
		{name: "cap counts runes", in: "日本語", max: 2, want: "日本"},
		{name: "cap with dirty input", in: "a\r\nb\x00c", max: 3, want: "a\nb"},
		{name: "empty", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Sanitize(tt.in, tt.max); got != tt.want {
				t.Errorf("Sanitize(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

// TestSanitizeCut: whether the cap cut characters off, for the "truncated" metadata.
func TestSanitizeCut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"日本語", 3, "日本語", false},
		{"日本語!", 3, "日本語", true},
		{"a\r\nb", 3, "a\nb", false}, // four bytes, three characters
		{"a\r\nb\x00", 3, "a\nb", true},
	} {
		if got, cut := SanitizeCut(tt.in, tt.max); got != tt.want || cut != tt.cut {
			t.Errorf("SanitizeCut(%q, %d) = %q, %v; want %q, %v", tt.in, tt.max, got, cut, tt.want, tt.cut)
		}
	}
}

func TestSanitizeDefaultCap(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", DefaultMaxChars+10)
	if got := utf8.RuneCountInString(Sanitize(s, 0)); got != DefaultMaxChars {
		t.Errorf("runes = %d, want %d", got, DefaultMaxChars)
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a\r\nb", "\xff\xfe", "\u0085\u009f\uFDD0", "日本語\x00"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max % 100
		got := Sanitize(s, max)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8: %q", got)
		}
		limit := max
		if limit <= 0 {
			limit = DefaultMaxChars
		}
		if n := utf8.RuneCountInString(got); n > limit {
			t.Fatalf("%d runes > cap %d", n, limit)
		}
		for _, r := range got {
			if r == '\r' || r == 0x85 || ((r < 0x20 || (r >= 0x7f && r < 0xa0)) && r != '\t' && r != '\n') {
				t.Fatalf("forbidden control %U in %q", r, got)
			}
			if isNonchar(r) {
				t.Fatalf("noncharacter %U in %q", r, got)
			}
		}
		if Sanitize(got, max) != got {
			t.Fatalf("not idempotent on %q", got)
		}
	})
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      []byte
		want    string
		charset string
	}{
		{name: "utf-8", in: []byte("café"), want: "café", charset: "utf-8"},
		{name: "utf-8 bom", in: []byte("\xef\xbb\xbfcafé"), want: "café", charset: "utf-8"},
		{name: "utf-16le bom", in: []byte("\xff\xfec\x00a\x00"), want: "ca", charset: "utf-16le"},
		{name: "utf-16be bom", in: []byte("\xfe\xff\x00c\x00a"), want: "ca", charset: "utf-16be"},
		{name: "utf-16le sniffed", in: []byte("h\x00e\x00l\x00l\x00o\x00"), want: "hello", charset: "utf-16le"},
		{name: "utf-16be sniffed", in: []byte("\x00h\x00e\x00l\x00l\x00o"), want: "hello", charset: "utf-16be"},
		{name: "windows-1252", in: []byte("caf\xe9 \x93quoted\x94"), want: "café “quoted”", charset: "windows-1252"},
		{name: "shift_jis", in: []byte("\x93\xfa\x96\x7b\x8c\xea\x82\xcc\x83\x65\x83\x4c\x83\x58\x83\x67"), want: "日本語のテキスト", charset: "shift_jis"},
		{name: "windows-1251", in: []byte("\xcf\xf0\xe8\xe2\xe5\xf2 \xec\xe8\xf0"), want: "Привет мир", charset: "windows-1251"},
		{name: "empty", in: nil, want: "", charset: "utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cs := Decode(tt.in)
			if got != tt.want || cs != tt.charset {
				t.Errorf("Decode(%q) = %q, %q; want %q, %q", tt.in, got, cs, tt.want, tt.charset)
			}
		})
	}
}

func TestDecodeCorpus(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "..", "shared", "corpus", "files")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("corpus not found: %v", err)
	}
	tests := []struct {
		file, charset, phrase string
	}{
		{"rashomon-shift-jis.txt", "shift_jis", "下人が、羅生門の下で雨やみを待っていた"},
		{"candide-windows-1252.txt", "windows-1252", "Comment Candide fut élevé dans un beau château"},
		{"candide-utf-16le.txt", "utf-16le", "Comment Candide fut élevé dans un beau château"},
		{"testTXTNonASCIIUTF8.txt", "utf-8", "Der schnelle braune Fuchs springt über den faulen Hund"},
		{"testHTML_charset_utf16le.html", "utf-16le", "This is a sample text"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, cs := Decode(b)
			if cs != tt.charset {
				t.Errorf("charset = %q, want %q", cs, tt.charset)
			}
			if !strings.Contains(strings.Join(strings.Fields(got), " "), tt.phrase) {
				t.Errorf("text does not contain %q; starts %q", tt.phrase, got[:min(len(got), 300)])
			}
		})
	}
}

func TestLookupCharset(t *testing.T) {
	t.Parallel()
	if _, name, ok := LookupCharset(" Latin1 "); !ok || name != "windows-1252" {
		t.Errorf("latin1 = %q, %v", name, ok)
	}
	if _, _, ok := LookupCharset("no-such"); ok {
		t.Error("unknown label found")
	}
}

func BenchmarkSanitize(b *testing.B) {
	s := strings.Repeat("Comment Candide fut élevé dans un beau château\r\n", 2000)
	b.ReportAllocs()
	for b.Loop() {
		Sanitize(s, 0)
	}
}

// TestDecodeLegacyCJK encodes real sentences in each legacy CJK encoding (and the single-byte
// ones they are confused with) and checks Decode names the encoding and restores the text.
func TestDecodeLegacyCJK(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		charset string
		enc     encoding.Encoding
		text    string
	}{
		{"euc-kr", korean.EUCKR, "대한민국 헌법 제1조 대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다."},
		{"euc-kr", korean.EUCKR, "서울 날씨 맑음"},
		{"shift_jis", japanese.ShiftJIS, "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"},
		{"euc-jp", japanese.EUCJP, "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"},
		{"gb18030", simplifiedchinese.GB18030, "中华人民共和国是工人阶级领导的、以工农联盟为基础的人民民主专政的社会主义国家。"},
		{"big5", traditionalchinese.Big5, "中華民國基於三民主義，為民有民治民享之民主共和國。"},
		{"windows-1251", charmap.Windows1251, "Все люди рождаются свободными и равными в своем достоинстве и правах."},
		{"windows-1252", charmap.Windows1252, "Tous les êtres humains naissent libres et égaux en dignité et en droits."},
	} {
		t.Run(tt.charset+"/"+tt.text[:6], func(t *testing.T) {
			t.Parallel()
			b, err := tt.enc.NewEncoder().Bytes([]byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			got, cs := Decode(b)
			if cs != tt.charset || got != tt.text {
				t.Errorf("Decode = %q, %q; want %q, %q", got, cs, tt.text, tt.charset)
			}
		})
	}
}
