package converter

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
)

// uniqueIDBase is the first of the private-interchange UniqueIDs LibreOffice gives the Type 1
// fonts it makes from CFF (OpenType) fonts: base+1 for the first such font a LibreOffice process
// writes, base+2 for the next, and so on over every document that process converts.
const uniqueIDBase = 4100000

var (
	// type1Stream matches the head of an embedded Type 1 font program (/FontFile): its
	// dictionary, with /Length1 (the length of its clear-text part), and "stream".
	type1Stream = regexp.MustCompile(`(?m)^(\d+) 0 obj\s*<<([^<>]*/Length1 \d+[^<>]*)>>\s*stream\r?\n`)
	streamLen   = regexp.MustCompile(`/Length\s+(\d+)(\s+0\s+R)?`)
	fontUID     = regexp.MustCompile(`/UniqueID (\d{7}) def`)
	startXref   = regexp.MustCompile(`startxref\s+(\d+)\s+%%EOF\s*$`)
)

// maxFontProgram caps a font program decompressed by renumberType1.
const maxFontProgram = 64 << 20

// edit replaces b[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// renumberType1 makes the Type 1 fonts of a PDF written by LibreOffice independent of what the
// same LibreOffice process converted before: the UniqueID in each font program is a counter of
// the process, so the same document converted second in a batch got other font bytes than
// converted alone. The fonts are numbered again in the order they are written, as a process
// converting only this document numbers them (base+1, base+2, …), and each font program is
// compressed again by Go's zlib, so that the bytes depend on the font program only, whichever
// numbers it had. Offsets that move are corrected: the stream lengths and the cross-reference
// table. A PDF this cannot rewrite — no Type 1 font, a cross-reference stream, a stream that does
// not decompress — is returned unchanged.
func renumberType1(b []byte) []byte {
	heads := type1Stream.FindAllSubmatchIndex(b, -1)
	if len(heads) == 0 {
		return b
	}
	xref, ok := xrefEdits(b)
	if !ok {
		return b
	}
	var edits []edit
	k := 0 // the Type 1 fonts seen
	for _, h := range heads {
		dict := b[h[4]:h[5]]
		// TrueType programs (/FontFile2) have a /Length1 too, and no number to change.
		clearLen, privateLen := fontLengths(dict)
		if privateLen == 0 {
			continue
		}
		if !bytes.Contains(dict, []byte("/Filter/FlateDecode")) || bytes.Contains(dict, []byte("/DecodeParms")) {
			return b
		}
		lm := streamLen.FindSubmatchIndex(dict)
		if lm == nil {
			return b
		}
		n, _ := strconv.Atoi(string(dict[lm[2]:lm[3]]))
		// Where the length's digits are: in the dictionary, or in the object it refers to.
		lenStart, lenEnd := h[4]+lm[2], h[4]+lm[3]
		if lm[4] >= 0 {
			obj := regexp.MustCompile(`(?m)^` + strconv.Itoa(n) + ` 0 obj\s*(\d+)\s*endobj`).FindSubmatchIndex(b)
			if obj == nil {
				return b
			}
			lenStart, lenEnd = obj[2], obj[3]
			n, _ = strconv.Atoi(string(b[lenStart:lenEnd]))
		}
		start := h[1]
		if start+n > len(b) || !bytes.HasPrefix(bytes.TrimLeft(b[start+n:], "\r\n"), []byte("endstream")) {
			return b
		}
		zr, err := zlib.NewReader(bytes.NewReader(b[start : start+n]))
		if err != nil {
			return b
		}
		prog, err := io.ReadAll(io.LimitReader(zr, maxFontProgram+1))
		if err != nil || len(prog) > maxFontProgram {
			return b
		}
		// The UniqueID is written twice: in the clear-text part (/Length1 bytes) and in the
		// private dictionary, in the eexec-encrypted part that follows (/Length2 bytes).
		if clearLen <= 0 || clearLen+privateLen > len(prog) {
			return b
		}
		k++
		id := strconv.Itoa(uniqueIDBase + k)
		if m := fontUID.FindSubmatchIndex(prog[:clearLen]); m != nil {
			copy(prog[m[2]:m[3]], id)
		}
		enc := prog[clearLen : clearLen+privateLen]
		plain := eexec(enc, false)
		if m := fontUID.FindSubmatchIndex(plain); m != nil {
			copy(plain[m[2]:m[3]], id)
			copy(enc, eexec(plain, true))
		}
		var z bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
		zw.Write(prog) //nolint:errcheck // a bytes.Buffer does not fail
		zw.Close()     //nolint:errcheck
		edits = append(edits, edit{start, start + n, z.Bytes()},
			edit{lenStart, lenEnd, []byte(strconv.Itoa(z.Len()))})
	}
	slices.SortFunc(edits, func(x, y edit) int { return x.start - y.start })
	for i := 1; i < len(edits); i++ {
		if edits[i].start < edits[i-1].end {
			return b
		}
	}
	// moved returns where the byte at old offset o lands once edits are made.
	moved := func(o int) int {
		for _, e := range edits {
			if e.end > o {
				break
			}
			o += len(e.repl) - (e.end - e.start)
		}
		return o
	}
	// The cross-reference table follows every object: its entries keep their width.
	for _, x := range xref.entries {
		edits = append(edits, edit{x, x + 10, fmt.Appendf(nil, "%010d", moved(xref.offset(b, x)))})
	}
	edits = append(edits, edit{xref.start, xref.end, []byte(strconv.Itoa(moved(xref.at)))})
	slices.SortFunc(edits, func(x, y edit) int { return x.start - y.start })
	out := make([]byte, 0, len(b)+len(b)/8)
	prev := 0
	for _, e := range edits {
		if e.start < prev {
			return b
		}
		out = append(out, b[prev:e.start]...)
		out = append(out, e.repl...)
		prev = e.end
	}
	return append(out, b[prev:]...)
}

// xrefTable is where a PDF's one cross-reference table is.
type xrefTable struct {
	at         int   // the table's offset (startxref's value)
	start, end int   // where startxref's value is written
	entries    []int // the offset of each in-use entry's ten-digit offset
}

func (x xrefTable) offset(b []byte, entry int) int {
	n, _ := strconv.Atoi(string(b[entry : entry+10]))
	return n
}

// xrefEdits finds the cross-reference table of a PDF written in one piece: one classic table
// (not a stream) that startxref points to, with no earlier revision (/Prev) to correct.
func xrefEdits(b []byte) (xrefTable, bool) {
	m := startXref.FindSubmatchIndex(b)
	if m == nil {
		return xrefTable{}, false
	}
	at, err := strconv.Atoi(string(b[m[2]:m[3]]))
	if err != nil || at >= len(b) || !bytes.HasPrefix(b[at:], []byte("xref")) {
		return xrefTable{}, false
	}
	x := xrefTable{at: at, start: m[2], end: m[3]}
	p := at + len("xref")
	for {
		for p < len(b) && (b[p] == '\r' || b[p] == '\n' || b[p] == ' ') {
			p++
		}
		if bytes.HasPrefix(b[p:], []byte("trailer")) {
			break
		}
		// A subsection: "first count", then count entries of 20 bytes.
		eol := bytes.IndexAny(b[p:], "\r\n")
		if eol < 0 {
			return xrefTable{}, false
		}
		var first, count int
		if _, err := fmt.Sscanf(string(b[p:p+eol]), "%d %d", &first, &count); err != nil || count < 0 {
			return xrefTable{}, false
		}
		p += eol
		for p < len(b) && (b[p] == '\r' || b[p] == '\n') {
			p++
		}
		if p+20*count > len(b) {
			return xrefTable{}, false
		}
		for i := range count {
			e := b[p+20*i : p+20*i+20]
			if e[10] != ' ' || e[16] != ' ' {
				return xrefTable{}, false
			}
			if e[17] == 'n' {
				x.entries = append(x.entries, p+20*i)
			}
		}
		p += 20 * count
	}
	trailer := b[p:m[0]]
	if bytes.Contains(trailer, []byte("/Prev")) {
		return xrefTable{}, false
	}
	return x, true
}

var (
	length1 = regexp.MustCompile(`/Length1\s+(\d+)`)
	length2 = regexp.MustCompile(`/Length2\s+(\d+)`)
)

// fontLengths returns a Type 1 font program's /Length1 and /Length2: the lengths of its
// clear-text and encrypted parts.
func fontLengths(dict []byte) (clearLen, privateLen int) {
	if m := length1.FindSubmatch(dict); m != nil {
		clearLen, _ = strconv.Atoi(string(m[1]))
	}
	if m := length2.FindSubmatch(dict); m != nil {
		privateLen, _ = strconv.Atoi(string(m[1]))
	}
	return clearLen, privateLen
}

// eexec decrypts (or, with encrypt, encrypts) the private part of a Type 1 font program, in
// binary form, with the eexec key (Adobe Type 1 Font Format, section 7.2). The result is a new
// slice.
func eexec(in []byte, encrypt bool) []byte {
	const c1, c2 = 52845, 22719
	r := uint16(55665)
	out := make([]byte, len(in))
	for i, x := range in {
		y := x ^ byte(r>>8)
		out[i] = y
		cipher := x
		if encrypt {
			cipher = y
		}
		r = (uint16(cipher)+r)*c1 + c2
	}
	return out
}
