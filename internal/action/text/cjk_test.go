package text

import (
	"strings"
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"

	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// TestLegacyCJKDocument: a text file in a legacy CJK encoding becomes a document whose text is
// the decoded sentence and whose metadata names the encoding (#16: a Korean EUC-KR file was read
// as windows-1251, mojibake, and nothing said so).
func TestLegacyCJKDocument(t *testing.T) {
	t.Parallel()
	a := New(nil)
	for _, tt := range []struct {
		charset string
		enc     encoding.Encoding
		text    string
	}{
		{"euc-kr", korean.EUCKR, "대한민국 헌법 제1조 대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다."},
		{"euc-jp", japanese.EUCJP, "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"},
		{"shift_jis", japanese.ShiftJIS, "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"},
		{"gb18030", simplifiedchinese.GB18030, "中华人民共和国是工人阶级领导的、以工农联盟为基础的人民民主专政的社会主义国家。"},
		{"big5", traditionalchinese.Big5, "中華民國基於三民主義，為民有民治民享之民主共和國。"},
	} {
		t.Run(tt.charset, func(t *testing.T) {
			t.Parallel()
			raw, err := tt.enc.NewEncoder().Bytes([]byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			rec := &actiontest.Recorder{}
			if err := a.Run(t.Context(), actiontest.NewTask(t, tt.charset+".txt", "text/plain", raw, nil, nil), rec); err != nil {
				t.Fatalf("run: %v", err)
			}
			if len(rec.Children) != 1 || rec.Children[0].Text == nil {
				t.Fatalf("%d children, want one document with text", len(rec.Children))
			}
			c := rec.Children[0]
			if c.Metadata["charset"] != tt.charset {
				t.Errorf("metadata charset = %v, want %s", c.Metadata["charset"], tt.charset)
			}
			if got := strings.TrimSpace(*c.Text); got != tt.text {
				t.Errorf("text = %q, want %q", got, tt.text)
			}
		})
	}
}
