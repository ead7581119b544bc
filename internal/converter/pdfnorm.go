package converter

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// FixedDate is the date [NormalizePDF] writes in place of a converter's clock.
const FixedDate = "20000101000000"

var (
	pdfDate = regexp.MustCompile(`/(?:CreationDate|ModDate)\s*\(D:(\d{4,14})`)
	pdfID   = regexp.MustCompile(`/ID\s*\[\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*\]`)
	xmpDate = regexp.MustCompile(`<xmp:(?:CreateDate|ModifyDate|MetadataDate)>(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)`)
	xmpUUID = regexp.MustCompile(`uuid:([0-9a-fA-F-]{36})`)
	// LibreOffice's trailer checksum covers the dates.
	docSum = regexp.MustCompile(`/DocChecksum\s*/([0-9A-Fa-f]+)`)
)

// NormalizePDF makes a PDF written by LibreOffice or Chromium depend on its input only: the
// creation and modification dates become [FixedDate] and the document /ID becomes a hash of the
// rest, so two conversions of one document, in two runs or after a crash, are the same bytes.
// LibreOffice's Type 1 fonts, whose UniqueIDs count the fonts a process has written, are
// numbered per document and compressed again (see renumberType1), with the offsets that moves
// corrected; every other replacement keeps its length, so the cross-reference offsets stay
// right. b may be changed in place; the result is returned.
func NormalizePDF(b []byte) []byte {
	b = renumberType1(b)
	for _, m := range pdfDate.FindAllSubmatchIndex(b, -1) {
		copy(b[m[2]:m[3]], FixedDate[:m[3]-m[2]])
	}
	for _, m := range xmpDate.FindAllSubmatchIndex(b, -1) {
		copy(b[m[2]:m[3]], "2000-01-01T00:00:00")
	}
	for _, m := range docSum.FindAllSubmatchIndex(b, -1) {
		copy(b[m[2]:m[3]], bytes.Repeat([]byte{'0'}, m[3]-m[2]))
	}
	ids := pdfID.FindAllSubmatchIndex(b, -1)
	uuids := xmpUUID.FindAllSubmatchIndex(b, -1)
	if len(ids) == 0 && len(uuids) == 0 {
		return b
	}
	// The id is a hash of the document with its ids blanked: stable, and still unique per content.
	for _, m := range ids {
		for _, g := range [][2]int{{m[2], m[3]}, {m[4], m[5]}} {
			copy(b[g[0]:g[1]], bytes.Repeat([]byte{'0'}, g[1]-g[0]))
		}
	}
	for _, m := range uuids {
		copy(b[m[2]:m[3]], "00000000-0000-0000-0000-000000000000")
	}
	sum := sha256.Sum256(b)
	h := []byte(hex.EncodeToString(sum[:]) + hex.EncodeToString(sum[:]))
	for _, m := range ids {
		for _, g := range [][2]int{{m[2], m[3]}, {m[4], m[5]}} {
			copy(b[g[0]:g[1]], bytes.ToUpper(h[:min(g[1]-g[0], len(h))]))
		}
	}
	for _, m := range uuids {
		u := string(h[:32])
		copy(b[m[2]:m[3]], u[:8]+"-"+u[8:12]+"-"+u[12:16]+"-"+u[16:20]+"-"+u[20:32])
	}
	return b
}
