package text

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding/htmlindex"

	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// TestLegacyCJKDocument: a text file in a legacy CJK encoding becomes a document whose text is
// the decoded sentence and whose metadata names the encoding (#16: a Korean EUC-KR file was read
// as windows-1251, mojibake, and nothing said so).
func TestLegacyCJKDocument(t *testing.T) {
	t.Parallel()
	a := New(nil)
	japanese := "羅生門が、朱雀大路にある以上は、この男のほかにも、雨やみをする市女笠や揉烏帽子が、もう二三人はありそうなものである。"
	sentences := map[string]string{
		"euc-kr":    "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다. 인간은 천부적으로 이성과 양심을 부여받았다.",
		"euc-jp":    japanese,
		"shift_jis": japanese,
		"gb18030":   "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。",
		"big5":      "人人生而自由，在尊嚴和權利上一律平等。他們賦有理性和良心，並應以兄弟關係的精神相對待。",
	}
	for charset, sentence := range sentences {
		t.Run(charset, func(t *testing.T) {
			t.Parallel()
			enc, err := htmlindex.Get(charset)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := enc.NewEncoder().Bytes([]byte(sentence))
			if err != nil {
				t.Fatal(err)
			}
			rec := &actiontest.Recorder{}
			if err := a.Run(t.Context(), actiontest.NewTask(t, charset+".txt", "text/plain", raw, nil, nil), rec); err != nil {
				t.Fatalf("run: %v", err)
			}
			if len(rec.Children) != 1 || rec.Children[0].Text == nil {
				t.Fatalf("%d children, want one document with text", len(rec.Children))
			}
			md, text := rec.Children[0].Metadata, strings.TrimSpace(*rec.Children[0].Text)
			if md["charset"] != charset || text != sentence {
				t.Errorf("charset %v, text %q; want %s, %q", md["charset"], text, charset, sentence)
			}
		})
	}
}

// TestTruncated: a text longer than max_text_chars keeps the cap's worth and says so in its
// metadata — whether the bytes read stopped it or the characters counted did; one within the
// cap has no truncated key.
func TestTruncated(t *testing.T) {
	t.Parallel()
	a := New(nil)
	for _, tc := range []struct {
		name, text string
		truncated  bool
	}{
		{"within the bound of bytes", strings.Repeat("word ", 60), true}, // 300 bytes: under 4×100+4
		{"beyond the bound of bytes", strings.Repeat("word ", 1000), true},
		{"within the cap", strings.Repeat("word ", 20), false},
	} {
		rec := &actiontest.Recorder{}
		tk := actiontest.NewTask(t, "long.txt", "text/plain", []byte(tc.text), map[string]any{"max_text_chars": 100}, nil)
		if err := a.Run(t.Context(), tk, rec); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := rec.Children[0]
		n := utf8.RuneCountInString(*c.Text)
		if _, ok := c.Metadata["truncated"]; ok != tc.truncated || (tc.truncated && n != 100) {
			t.Errorf("%s: %d characters, metadata %v; want truncated %v", tc.name, n, c.Metadata, tc.truncated)
		}
	}
}
