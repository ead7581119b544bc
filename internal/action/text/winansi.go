package text

import (
	"bytes"
	"fmt"
	"github.com/klauspost/compress/zlib"
	"io"
	"strconv"
	"sync"

	"golang.org/x/text/encoding/charmap"
)

// renderWinAnsi writes lines as a PDF set in Courier, one of the 14 standard fonts every PDF
// reader carries, so no font is embedded: a page of text costs its compressed content stream and
// a few hundred bytes of objects, where the embedded DejaVu Sans Mono subset alone is about 9 KB
// (gopdf's subset keeps the font's full glyph count, its hinting tables and metrics, and drops
// only unused outlines). The PDF profile promised is plain PDF 1.4, not PDF/A (which would
// require embedding). It reports false, writing nothing, when a character of lines is outside
// WinAnsiEncoding (Latin-1 and the cp1252 punctuation): such text keeps the embedded fonts.
//
// The page geometry is [Renderer.Render]'s: every character starts at its column times charW
// (Courier's own advance, 0.6 em, plus a character spacing that makes up the difference), on the
// same lines; the output is deterministic, with no date or identifier.
func renderWinAnsi(lines [][]cell, charW float64) ([]byte, bool) {
	enc := winAnsiEncoders.Get().(*winAnsiEncoder)
	defer winAnsiEncoders.Put(enc)
	line := enc.line[:0]
	defer func() { enc.line = line[:0] }()
	// Check every character first: most text is entirely Latin, and a document is set in one
	// way or the other, never in both.
	for _, l := range lines {
		for _, c := range l {
			if _, ok := winAnsiByte(c.r); !ok {
				return nil, false
			}
		}
	}
	var out bytes.Buffer
	out.Grow(1024 + len(lines)*40)
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	var offsets []int
	obj := func(body string) {
		offsets = append(offsets, out.Len())
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", len(offsets), body)
	}
	nPages := max(1, (len(lines)+linesPerPage-1)/linesPerPage)
	// Objects: 1 catalog, 2 pages, 3 font, then a page and its contents for each page.
	kids := make([]byte, 0, nPages*10)
	for p := range nPages {
		kids = strconv.AppendInt(kids, int64(4+2*p), 10)
		kids = append(kids, " 0 R "...)
	}
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj(fmt.Sprintf("<< /Type /Pages /Kids [ %s] /Count %d /MediaBox [0 0 %.2f %.2f] /Resources << /Font << /F1 3 0 R >> >> >>", kids, nPages, pageW, pageH))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>")
	content := &enc.content
	for p := range nPages {
		content.Reset()
		// The first baseline is fontSize below the top margin, as in the thumbnail.
		fmt.Fprintf(content, "BT\n/F1 %g Tf\n%g TL\n%.3f Tc\n%g %.2f Td\n", fontSize, lineHeight, charW-0.6*fontSize, margin, pageH-margin-fontSize)
		for j := p * linesPerPage; j < min(len(lines), (p+1)*linesPerPage); j++ {
			line = line[:0]
			for _, c := range lines[j] {
				for len(line) < int(c.col) {
					line = append(line, ' ')
				}
				b, _ := winAnsiByte(c.r)
				if b == '(' || b == ')' || b == '\\' {
					line = append(line, '\\')
				}
				line = append(line, b)
			}
			if len(line) > 0 {
				content.WriteByte('(')
				content.Write(line)
				content.WriteString(") Tj ")
			}
			content.WriteString("T*\n")
		}
		content.WriteString("ET\n")
		enc.z.Reset(&enc.deflated)
		enc.deflated.Reset()
		enc.z.Write(content.Bytes())
		enc.z.Close()
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Contents %d 0 R >>", 5+2*p))
		offsets = append(offsets, out.Len())
		fmt.Fprintf(&out, "%d 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n", len(offsets), enc.deflated.Len())
		out.Write(enc.deflated.Bytes())
		out.WriteString("\nendstream\nendobj\n")
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, xref)
	return out.Bytes(), true
}

// winAnsiByte returns the WinAnsiEncoding byte of r, if it has one that Courier draws.
func winAnsiByte(r rune) (byte, bool) {
	switch {
	case r >= 0x20 && r < 0x7f, r >= 0xa0 && r <= 0xff:
		return byte(r), true
	case r < 0x100:
		return 0, false // C0 and C1 controls, DEL
	}
	b, ok := charmap.Windows1252.EncodeRune(r)
	return b, ok && b >= 0x80 && b < 0xa0
}

// winAnsiEncoder is renderWinAnsi's reusable state: a zlib writer is about 0.7 MB to make.
type winAnsiEncoder struct {
	line     []byte
	content  bytes.Buffer
	deflated bytes.Buffer
	z        *zlib.Writer
}

var winAnsiEncoders = sync.Pool{New: func() any {
	z, _ := zlib.NewWriterLevel(io.Discard, zlib.DefaultCompression)
	return &winAnsiEncoder{z: z}
}}
