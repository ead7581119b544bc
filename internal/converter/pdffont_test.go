package converter

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"testing"
)

// type1PDF returns a PDF laid out as LibreOffice writes one: a Type 1 font program made from a
// CFF font, with UniqueID uid in its clear-text part and in its encrypted private dictionary,
// compressed at level, its length in an object of its own, and a cross-reference table.
func type1PDF(t *testing.T, uid, level int) []byte {
	t.Helper()
	clear := fmt.Sprintf("%%!PS-AdobeFont-1.0: Test-Font\n/FontName /Test-Font def\n/UniqueID %d def\ncurrentfile eexec\n", uid)
	private := eexec(fmt.Appendf(nil, "HDU dup\n/Private 4 dict dup begin\n/UniqueID %d def\nend\n", uid), true)
	trailer := "0000000000000000\ncleartomark\n"
	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, level)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write([]byte(clear))
	zw.Write(private)
	zw.Write([]byte(trailer))
	zw.Close()
	var b bytes.Buffer
	var offsets []int
	obj := func(body string) {
		offsets = append(offsets, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n\n", len(offsets), body)
	}
	b.WriteString("%PDF-1.6\n")
	obj("<</Type/Catalog>>")
	obj(fmt.Sprintf("<</Length 3 0 R/Filter/FlateDecode/Length1 %d/Length2 %d/Length3 %d>>\nstream\n%s\nendstream", len(clear), len(private), len(trailer), z.Bytes()))
	obj(strconv.Itoa(z.Len()))
	obj("<</Type/FontDescriptor/FontName/GAAAAA+Test-Font/FontFile 2 0 R>>")
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, xref)
	return b.Bytes()
}

// TestRenumberType1: two conversions of one document whose fonts a LibreOffice process numbered
// differently (it had converted other documents first) become the same bytes, numbered as a
// process converting only this document numbers them, and every offset of the result is right.
func TestRenumberType1(t *testing.T) {
	t.Parallel()
	alone, afterOthers := type1PDF(t, 4100001, zlib.DefaultCompression), type1PDF(t, 4100007, zlib.BestSpeed)
	a, b := renumberType1(alone), renumberType1(afterOthers)
	if !bytes.Equal(a, b) {
		t.Fatalf("the two conversions still differ:\n%q\n%q", a, b)
	}
	// The cross-reference table points at each object, startxref at the table.
	m := regexp.MustCompile(`startxref\n(\d+)\n`).FindSubmatch(a)
	at, _ := strconv.Atoi(string(m[1]))
	if !bytes.HasPrefix(a[at:], []byte("xref\n0 5\n")) {
		t.Fatalf("startxref %d points at %q", at, a[at:min(at+20, len(a))])
	}
	for i, e := range regexp.MustCompile(`(\d{10}) 00000 n `).FindAllSubmatch(a[at:], -1) {
		o, _ := strconv.Atoi(string(e[1]))
		if want := fmt.Sprintf("%d 0 obj", i+1); !bytes.HasPrefix(a[o:], []byte(want)) {
			t.Errorf("object %d's entry points at %q", i+1, a[o:min(o+10, len(a))])
		}
	}
	// The stream is as long as object 3 says, and holds the font numbered 4100001 twice.
	s := bytes.Index(a, []byte("stream\n")) + len("stream\n")
	n, _ := strconv.Atoi(string(regexp.MustCompile(`3 0 obj\n(\d+)\n`).FindSubmatch(a)[1]))
	if !bytes.HasPrefix(a[s+n:], []byte("\nendstream")) {
		t.Fatalf("the stream does not end where its length says")
	}
	zr, err := zlib.NewReader(bytes.NewReader(a[s : s+n]))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	clearLen, privateLen := fontLengths(a)
	if !bytes.Contains(prog[:clearLen], []byte("/UniqueID 4100001 def")) {
		t.Errorf("clear text: %q", prog[:clearLen])
	}
	if private := eexec(prog[clearLen:clearLen+privateLen], false); !bytes.Contains(private, []byte("/UniqueID 4100001 def")) {
		t.Errorf("private dictionary: %q", private)
	}
	// NormalizePDF does the same, and then its length-keeping replacements.
	if !bytes.Equal(NormalizePDF(type1PDF(t, 4100001, 6)), NormalizePDF(type1PDF(t, 4100042, 1))) {
		t.Error("NormalizePDF: the two conversions differ")
	}
	// A PDF it cannot rewrite (here, no cross-reference table) is left as it is.
	broken := bytes.Replace(type1PDF(t, 4100007, 6), []byte("xref\n0 5"), []byte("xref\n0 x"), 1)
	if got := renumberType1(bytes.Clone(broken)); !bytes.Equal(got, broken) {
		t.Error("a PDF without a readable cross-reference table was changed")
	}
}
