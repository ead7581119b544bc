// Package detect implements the `detect` action, the router of the documents workflow: it finds
// an item's content type from its magic bytes and name (unless a specific type was given),
// canonicalises it and emits exactly one `detected.<route>` event that the workflow's steps
// listen for.
//
// Detection uses github.com/gabriel-vasile/mimetype on the first [Config.HeadSize] bytes and, when
// the answer is generic (OLE storage, zip, plain text, octet-stream), again on up to
// [Config.MaxRead] bytes: Word/Excel/PowerPoint 97 files and Outlook .msg files keep the directory
// that identifies them deep inside the file. On top of mimetype it recognises BOM-less UTF-16
// text, mbox mailboxes, RFC 822 messages without a .eml name and encrypted OOXML packages, and
// refines generic answers with the file name's extension.
//
// The package calls mimetype.SetLimit(0) once, in [New]: mimetype's read limit is process-wide,
// and this package chooses how much to pass itself.
package detect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"

	"github.com/sluice-project/sluice/internal/action"
)

// Config configures the detect action. The zero value uses the defaults.
type Config struct {
	// HeadSize is how many bytes are read for a first detection. Defaults to 64 KiB.
	HeadSize int
	// MaxRead is how many bytes at most are read when the first answer is generic. Defaults to
	// 8 MiB.
	MaxRead int
}

type detector struct {
	cfg Config
}

var setLimit sync.Once

// New returns the detect action. See the package documentation for what it does.
func New(cfg Config) action.Action {
	if cfg.HeadSize <= 0 {
		cfg.HeadSize = 64 << 10
	}
	if cfg.MaxRead <= 0 {
		cfg.MaxRead = 8 << 20
	}
	if cfg.MaxRead < cfg.HeadSize {
		cfg.MaxRead = cfg.HeadSize
	}
	setLimit.Do(func() { mimetype.SetLimit(0) })
	return &detector{cfg: cfg}
}

// Spec describes the action.
func (d *detector) Spec() action.Spec {
	outcomes := make([]string, len(routes))
	for i, r := range routes {
		outcomes[i] = "detected." + r
	}
	return action.Spec{
		Name:        "detect",
		Version:     "1",
		Doc:         "detect an item's content type and route it: emits one detected.<route> event",
		Outcomes:    outcomes,
		Concurrency: 8,
	}
}

// Policy runs detect without a temporary directory, and inline where it reads no blob: an item
// that already has its text (a converter's final child) is routed to final, and one with a
// specific content type (given, or recorded by unpack with Whole) is routed by it, as the item
// is created.
func (d *detector) Policy() action.Policy {
	return action.Policy{NoTempDir: true, Inline: func(it action.Item) bool { return it.HasText || specific(it.ContentType) }}
}

// Run detects the item's type, records it with SetContentType and emits its route.
// It returns a permanent "unhandled: <type>" error for types no step handles and a permanent
// "password-protected" error for encrypted OOXML packages.
func (d *detector) Run(ctx context.Context, t *action.Task, out action.Output) error {
	if t.Item.HasText {
		out.Emit("detected." + RouteFinal)
		return nil
	}
	ct, err := d.contentType(ctx, t)
	if err != nil {
		return err
	}
	canon := Canonical(ct)
	if canon == "application/encrypted" {
		return action.Permanentf("password-protected")
	}
	route, ok := Route(canon)
	if !ok {
		return action.Permanentf("unhandled: %s", canon)
	}
	out.SetContentType(withParams(canon, ct))
	out.Emit("detected." + route)
	return nil
}

// specific reports whether a given content type is used as it is, not detected again.
func specific(ct string) bool {
	c := Canonical(ct)
	return c != "" && c != "application/octet-stream"
}

// withParams returns canon with the charset parameter of orig, if any, for text types.
func withParams(canon, orig string) string {
	_, params, err := mime.ParseMediaType(orig)
	if err != nil || params["charset"] == "" {
		return canon
	}
	return mime.FormatMediaType(canon, map[string]string{"charset": strings.ToLower(params["charset"])})
}

// contentType returns the item's content type: the given one when it is specific, else the
// detected one (possibly with a charset parameter).
func (d *detector) contentType(ctx context.Context, t *action.Task) (string, error) {
	if specific(t.Item.ContentType) {
		return t.Item.ContentType, nil
	}
	if t.OpenBlob == nil {
		// No blob at all: an empty item is an empty text.
		return "text/plain", nil
	}
	rc, err := t.OpenBlob(ctx)
	if err != nil {
		return "", fmt.Errorf("open blob: %w", err)
	}
	defer rc.Close()
	return d.sniff(rc, path.Base(t.Item.Name))
}

// sniff detects the content type of r, named name.
func (d *detector) sniff(r io.Reader, name string) (string, error) {
	buf, complete, err := readUpTo(r, nil, d.cfg.HeadSize)
	if err != nil {
		return "", err
	}
	ct := detectBytes(buf, name)
	if !complete && generic(ct) {
		buf, _, err = readUpTo(r, buf, d.cfg.MaxRead)
		if err != nil {
			return "", err
		}
		ct = detectBytes(buf, name)
	}
	return ct, nil
}

// readUpTo extends buf with bytes from r until it holds max bytes or r ends. complete reports
// that r ended.
func readUpTo(r io.Reader, buf []byte, max int) (_ []byte, complete bool, _ error) {
	if cap(buf) < max {
		nb := make([]byte, len(buf), max)
		copy(nb, buf)
		buf = nb
	}
	n, err := io.ReadFull(r, buf[len(buf):max])
	buf = buf[:len(buf)+n]
	switch {
	case err == nil:
		// Full: whether r has more is learnt by the next read, if any.
		return buf, false, nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return buf, true, nil
	default:
		return nil, false, fmt.Errorf("read blob: %w", err)
	}
}

// generic reports whether ct is an answer more bytes could refine.
func generic(ct string) bool {
	switch Canonical(ct) {
	case "application/x-ole-storage", "application/zip", "application/octet-stream", "text/plain":
		return true
	}
	return false
}

// extTypes refines generic answers by extension. Only extensions whose content the generic
// answer is consistent with are listed per container kind.
var (
	oleExt = map[string]string{
		".doc": "application/msword", ".dot": "application/msword",
		".xls": "application/vnd.ms-excel", ".xlt": "application/vnd.ms-excel",
		".ppt": "application/vnd.ms-powerpoint", ".pps": "application/vnd.ms-powerpoint", ".pot": "application/vnd.ms-powerpoint",
		".msg": "application/vnd.ms-outlook",
		".pub": "application/vnd.ms-publisher",
		".vsd": "application/vnd.visio",
		".wps": "application/vnd.ms-works",
	}
	zipExt = map[string]string{
		".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		".docm": "application/vnd.ms-word.document.macroenabled.12",
		".dotx": "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
		".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		".xlsm": "application/vnd.ms-excel.sheet.macroenabled.12",
		".xltx": "application/vnd.openxmlformats-officedocument.spreadsheetml.template",
		".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
		".pptm": "application/vnd.ms-powerpoint.presentation.macroenabled.12",
		".ppsx": "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
		".potx": "application/vnd.openxmlformats-officedocument.presentationml.template",
		".odt":  "application/vnd.oasis.opendocument.text",
		".ods":  "application/vnd.oasis.opendocument.spreadsheet",
		".odp":  "application/vnd.oasis.opendocument.presentation",
		".odg":  "application/vnd.oasis.opendocument.graphics",
		".sxw":  "application/vnd.sun.xml.writer",
		".sxc":  "application/vnd.sun.xml.calc",
		".sxi":  "application/vnd.sun.xml.impress",
		".jar":  "application/java-archive",
	}
	textExt = map[string]string{
		".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml",
		".xml": "application/xml", ".csv": "text/csv", ".tsv": "text/tab-separated-values",
		".json": "application/json", ".md": "text/markdown", ".markdown": "text/markdown",
		".yaml": "application/yaml", ".yml": "application/yaml",
		".eml": "message/rfc822", ".mbox": "application/mbox", ".mbx": "application/mbox",
		".rtf": "application/rtf", ".fodt": "application/vnd.oasis.opendocument.text-flat-xml",
		".fods": "application/vnd.oasis.opendocument.spreadsheet-flat-xml",
		".fodp": "application/vnd.oasis.opendocument.presentation-flat-xml",
		".fodg": "application/vnd.oasis.opendocument.graphics-flat-xml",
	}
)

// utf16 pattern of the OLE stream name that marks an encrypted OOXML package (MS-OFFCRYPTO).
var encryptedPackage = utf16le("EncryptedPackage")

func utf16le(s string) []byte {
	var b []byte
	for _, r := range utf16.Encode([]rune(s)) {
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}

// WholeMax is the largest file [Whole] is meant for: up to this size, with the default
// [Config.HeadSize], detect reads a file whole in one go and its answer is Whole's.
const WholeMax = 64 << 10

// Whole returns the content type detect gives a file named name whose whole content is buf, as
// Run records it. A converter that holds a small child whole (unpack) records it as the child's
// content type: detect then routes the child without reading its blob, inline.
func Whole(buf []byte, name string) string {
	return detectBytes(buf, path.Base(name))
}

// detectBytes detects the type of buf, the start (or all) of a file named name.
func detectBytes(buf []byte, name string) string {
	ext := strings.ToLower(path.Ext(name))
	if len(buf) == 0 {
		return "text/plain"
	}
	if bytes.HasPrefix(buf, []byte("!BDN")) {
		return "application/vnd.ms-outlook-pst"
	}
	m := mimetype.Detect(buf)
	ct := m.String()
	switch Canonical(ct) {
	case "application/x-ole-storage", "application/msword", "application/vnd.ms-excel",
		"application/vnd.ms-powerpoint":
		if bytes.Contains(buf, encryptedPackage) {
			return "application/encrypted"
		}
		if Canonical(ct) == "application/x-ole-storage" {
			if t, ok := oleExt[ext]; ok {
				return t
			}
		}
	case "application/zip":
		if t, ok := zipExt[ext]; ok {
			return t
		}
	case "application/octet-stream":
		if enc := sniffUTF16(buf); enc != "" {
			return refineText(decodeUTF16(buf, enc), enc, ext)
		}
	case "text/plain":
		_, params, _ := mime.ParseMediaType(ct)
		cs := params["charset"]
		if cs == "utf-16le" || cs == "utf-16be" {
			return refineText(decodeUTF16(buf, cs), cs, ext)
		}
		return refineText(buf, cs, ext)
	}
	return ct
}

// refineText refines a text/plain answer: mbox and RFC 822 mail by content, then by extension,
// then by detecting again on the UTF-8 form of UTF-16 text. cs is the charset to report.
func refineText(text []byte, cs, ext string) string {
	with := func(t string) string {
		// A charset means something for text types, and UTF-16 must be told to any reader.
		if cs == "" || !(strings.HasPrefix(t, "text/") || strings.HasPrefix(cs, "utf-16")) {
			return t
		}
		return mime.FormatMediaType(t, map[string]string{"charset": cs})
	}
	switch {
	case isMbox(text):
		return with("application/mbox")
	case isRFC822(text):
		return with("message/rfc822")
	}
	if t, ok := textExt[ext]; ok {
		return with(t)
	}
	if cs == "utf-16le" || cs == "utf-16be" {
		m := mimetype.Detect(text)
		c := Canonical(m.String())
		if c != "application/octet-stream" {
			return with(c)
		}
	}
	return with("text/plain")
}

// sniffUTF16 recognises BOM-less UTF-16 by its NUL pattern: in mostly-Latin UTF-16LE text nearly
// every odd byte is NUL and almost no even byte is (big-endian is the mirror image). It returns
// "utf-16le", "utf-16be" or "".
func sniffUTF16(buf []byte) string {
	n := min(len(buf), 4096) &^ 1
	if n < 16 {
		return ""
	}
	var evenNUL, oddNUL int
	for i := 0; i < n; i += 2 {
		if buf[i] == 0 {
			evenNUL++
		}
		if buf[i+1] == 0 {
			oddNUL++
		}
	}
	pairs := n / 2
	var enc string
	switch {
	case oddNUL*10 >= pairs*6 && evenNUL*50 <= pairs:
		enc = "utf-16le"
	case evenNUL*10 >= pairs*6 && oddNUL*50 <= pairs:
		enc = "utf-16be"
	default:
		return ""
	}
	// The decoded text must be text: few control characters besides whitespace.
	var bad, total int
	for _, r := range string(decodeUTF16(buf[:n], enc)) {
		total++
		if r == utf8.RuneError || (r < 0x20 && r != '\n' && r != '\r' && r != '\t' && r != '\f') {
			bad++
		}
	}
	if total == 0 || bad*100 > total {
		return ""
	}
	return enc
}

// decodeUTF16 decodes UTF-16 (with or without BOM) to UTF-8, dropping a trailing odd byte.
func decodeUTF16(b []byte, enc string) []byte {
	if len(b) >= 2 && ((b[0] == 0xFF && b[1] == 0xFE) || (b[0] == 0xFE && b[1] == 0xFF)) {
		b = b[2:]
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		if enc == "utf-16be" {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		} else {
			u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		}
	}
	return []byte(string(utf16.Decode(u)))
}

// isMbox reports whether text starts like an mbox mailbox: a "From " separator line followed by
// header lines.
func isMbox(text []byte) bool {
	if !bytes.HasPrefix(text, []byte("From ")) {
		return false
	}
	nl := bytes.IndexByte(text, '\n')
	if nl < 0 {
		return false
	}
	return headerLines(text[nl+1:]) >= 2
}

// isRFC822 reports whether text starts with at least three mail header lines, two of them
// well-known mail headers, ending in a blank line or continuing.
func isRFC822(text []byte) bool {
	return headerLines(text) >= 2
}

var mailHeaders = map[string]bool{
	"from": true, "to": true, "cc": true, "subject": true, "date": true, "message-id": true,
	"received": true, "return-path": true, "mime-version": true, "delivered-to": true,
	"reply-to": true, "in-reply-to": true, "references": true, "sender": true, "x-mailer": true,
	"content-type": false, // common to HTTP dumps too: not counted
}

// headerLines counts the well-known mail header fields at the start of text, stopping at the
// first line that is not a header (or continuation) line. It returns 0 when such a line comes
// before the blank line that ends a header block, unless enough headers were already seen.
func headerLines(text []byte) int {
	known := 0
	lines := 0
	for len(text) > 0 && lines < 64 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimRight(line, "\r")
		lines++
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || bytes.ContainsAny(line[:colon], " \t") {
			if known >= 2 {
				break
			}
			return 0
		}
		if mailHeaders[strings.ToLower(string(line[:colon]))] {
			known++
		}
	}
	return known
}
