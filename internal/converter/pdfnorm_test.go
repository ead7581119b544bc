package converter

import (
	"bytes"
	"strings"
	"testing"
)

func TestNormalizePDF(t *testing.T) {
	t.Parallel()
	lo := func(date, id string) []byte {
		return []byte("%PDF-1.6\n1 0 obj <</Producer(LibreOffice)/CreationDate(D:" + date + "Z')>>\ntrailer <</Size 9/ID [ <" + id + ">\n<" + id + "> ]/DocChecksum /" + id + ">>\n%%EOF")
	}
	a := NormalizePDF(lo("20261125031726", "F214AD8E8A033F22DC1CC87E2107FD45"))
	b := NormalizePDF(lo("20251231235959", "0123456789ABCDEF0123456789ABCDEF"))
	if !bytes.Equal(a, b) {
		t.Fatalf("two conversions differ:\n%s\n%s", a, b)
	}
	if len(a) != len(lo("20261125031726", "F214AD8E8A033F22DC1CC87E2107FD45")) {
		t.Error("the length changed: the xref offsets would break")
	}
	if !strings.Contains(string(a), "(D:20000101000000Z')") || strings.Contains(string(a), "<00000000") {
		t.Errorf("normalized: %s", a)
	}
	chrome := []byte("/CreationDate (D:20261125030141+00'00')\n/ModDate (D:20261125030141+00'00')>>")
	if got := string(NormalizePDF(chrome)); got != "/CreationDate (D:20000101000000+00'00')\n/ModDate (D:20000101000000+00'00')>>" {
		t.Errorf("chromium dates: %s", got)
	}
	// Different content keeps different ids.
	c := lo("20261125031726", "F214AD8E8A033F22DC1CC87E2107FD45")
	c = append(c[:len(c)-5], []byte("other")...)
	id := func(b []byte) string { i := bytes.Index(b, []byte("/ID [ <")); return string(b[i+7 : i+39]) }
	if id(NormalizePDF(c)) == id(a) {
		t.Error("different documents got the same id")
	}
}
