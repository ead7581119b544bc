package email

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	// Registers the legacy charsets (ISO-8859-*, Windows-125x, Shift_JIS, GB18030, …) with
	// go-message, which then converts text parts and encoded headers to UTF-8.
	_ "github.com/emersion/go-message/charset"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
	"golang.org/x/text/encoding/charmap"

	"github.com/sluice-project/sluice/internal/action"
)

// body is one kind of body alternative, buffered in a temporary file.
type body struct {
	ext       string // "txt", "html" or "rtf"
	mediaType string
	utf8      bool // every part was converted to UTF-8 from a declared charset
	file      *os.File
	parts     int
}

// bodyPreference lists body alternatives, best first.
var bodyPreference = []string{"txt", "html", "rtf"}

// bodyExt returns the body kind of a part's media type, or "".
func bodyExt(mediaType string) string {
	switch mediaType {
	case "text/plain":
		return "txt"
	case "text/html":
		return "html"
	case "application/rtf", "text/rtf":
		return "rtf"
	}
	return ""
}

// partReader remembers the first error reading a part, so that a broken message can be told
// from a failing output.
type partReader struct {
	r   io.Reader
	err error
}

func (p *partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) && p.err == nil {
		p.err = err
	}
	return n, err
}

// The bounds of one message's MIME tree. A part nested in n multiparts is read through n
// multipart readers, each scanning for its boundary, so unbounded nesting makes reading
// quadratic: 100,000 levels in 7 MB ran for hours.
const (
	// maxDepth bounds the nesting of multiparts.
	maxDepth = 32
	// defaultMaxParts is Config.MaxParts' default.
	defaultMaxParts = 10_000
	// maxHeader bounds the message's header and that of each part in a multipart: 1 MiB,
	// go-message's default for the message's header.
	maxHeader = 1 << 20
)

// errTooDeep, errTooManyParts and errHeaderTooLarge end the walk of a message over a bound.
var (
	errTooDeep        = fmt.Errorf("MIME parts nested more than %d levels deep", maxDepth)
	errTooManyParts   = errors.New("too many MIME parts")
	errHeaderTooLarge = errors.New("MIME header too large")
)

// multipart reads the parts of one multipart entity, as message.Entity.MultipartReader does,
// but with each part's header bounded by maxHeader.
//
// go-message bounds only the message's header (unpackMessage bounds that one itself, with the
// same budgetReader, for an error in plain words). Its textproto.MultipartReader reads each
// part's header with textproto.ReadHeader, which leaves the bound to its caller, and go-message
// has no option for one: a part header of 300 MB took 1.7 GB. So the parts are read here with
// go-message's textproto.MultipartReader over a budgetReader, which limits what one NextPart
// reads to maxHeader bytes. NextPart would also skip what is left of the previous part;
// next drains that first, outside the budget, so that NextPart reads only the boundary line,
// the header and, buffered, at most 4 KiB of the body after it: the bound is the header's, give
// or take 4 KiB. A bound on line length instead would refuse long body lines (quoted-printable
// and 8bit bodies have them) and would not stop a header of many short fields. The preamble
// before the first boundary is read by the first NextPart, so it counts toward the first part's
// header; real preambles are a line or two.
type multipart struct {
	mr   *textproto.MultipartReader
	in   *budgetReader
	part *textproto.Part // the part returned last, drained before the next is read
}

// newMultipart returns a reader of e's parts, or nil when e is not a multipart.
func newMultipart(e *message.Entity) *multipart {
	// The same test as message.Entity.MultipartReader's: message.New parsed the same header
	// with the same function. A multipart's body is not decoded, so e.Body is its raw bytes.
	mediaType, params, _ := e.Header.ContentType()
	if !strings.HasPrefix(mediaType, "multipart/") {
		return nil
	}
	in := &budgetReader{r: e.Body, left: -1}
	return &multipart{mr: textproto.NewMultipartReader(in, params["boundary"]), in: in}
}

// next returns the next part, or io.EOF after the last; errHeaderTooLarge when its header is
// over maxHeader. Like message.MultipartReader, a part of an unknown charset is returned with an
// error that message.IsUnknownCharset recognises.
func (m *multipart) next() (*message.Entity, error) {
	if m.part != nil {
		if _, err := io.Copy(io.Discard, m.part); err != nil {
			return nil, err
		}
		m.part = nil
	}
	m.in.left = maxHeader
	p, err := m.mr.NextPart()
	m.in.left = -1
	if m.in.over {
		// Whatever NextPart made of it: the reader stopped in or just after the header.
		return nil, errHeaderTooLarge
	}
	if err != nil {
		return nil, err
	}
	m.part = p
	return message.New(message.Header{Header: p.Header}, p)
}

// budgetReader reads r. While left is not negative, it reads at most left more bytes, then
// fails with errHeaderTooLarge, and from then on always (as textproto reads past a first error).
type budgetReader struct {
	r    io.Reader
	left int64 // bytes that may still be read; negative means no bound
	over bool  // the budget ran out
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.over {
		return 0, errHeaderTooLarge
	}
	if b.left < 0 {
		return b.r.Read(p)
	}
	if b.left == 0 {
		b.over = true
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// partWalker yields a message's leaf parts in order, depth first, as mail.Reader does, within
// the bounds: at most maxDepth nested multiparts, maxParts parts and part headers of
// maxHeader, checking ctx between parts.
type partWalker struct {
	top      *message.Entity
	readers  []*multipart // the open multiparts, outermost first
	parts    int
	maxParts int
}

func newPartWalker(e *message.Entity, maxParts int) *partWalker {
	w := &partWalker{maxParts: maxParts}
	if mr := newMultipart(e); mr != nil {
		w.readers = append(w.readers, mr)
	} else {
		w.top = e // a message of one part: its body
	}
	return w
}

// next returns the next leaf part, or io.EOF after the last. Like mail.Reader, a part of an
// unknown charset is returned with an error that message.IsUnknownCharset recognises.
func (w *partWalker) next(ctx context.Context) (*message.Entity, error) {
	if w.top != nil {
		e := w.top
		w.top = nil
		return e, nil
	}
	for len(w.readers) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		mr := w.readers[len(w.readers)-1]
		p, err := mr.next()
		if errors.Is(err, io.EOF) {
			w.readers = w.readers[:len(w.readers)-1]
			continue
		}
		if err != nil && !message.IsUnknownCharset(err) {
			return nil, err
		}
		if w.parts++; w.parts > w.maxParts {
			return nil, errTooManyParts
		}
		if pmr := newMultipart(p); pmr != nil {
			if len(w.readers) >= maxDepth {
				return nil, errTooDeep
			}
			w.readers = append(w.readers, pmr)
			continue
		}
		return p, err
	}
	return nil, io.EOF
}

// unpackMessage creates the children of one RFC 822 message read from r: attachments in order,
// then the body. maxParts bounds the message's parts.
func unpackMessage(ctx context.Context, t *action.Task, out action.Output, r io.Reader, maxParts int) error {
	cr := &countingReader{r: r}
	// The header is bounded here, as the parts' are, rather than by go-message's own
	// MaxHeaderBytes, whose error is its internal text.
	in := &budgetReader{r: cr, left: maxHeader}
	e, err := message.ReadWithOptions(in, &message.ReadOptions{MaxHeaderBytes: -1})
	in.left = -1
	if in.over {
		return action.Permanentf("message's header is larger than %d MiB (the limit)", maxHeader>>20)
	}
	if err != nil && !message.IsUnknownCharset(err) {
		return action.Permanentf("corrupt message: %s", oneLine(err.Error()))
	}
	walker := newPartWalker(e, maxParts)
	md := headerMetadata(mail.Header{Header: e.Header}, t.Item.Metadata)
	if len(md) > 0 {
		out.SetMetadata(md)
	}
	dir, err := os.MkdirTemp(t.TempDir, "email-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	bodies := map[string]*body{}
	defer func() {
		for _, b := range bodies {
			b.file.Close()
		}
	}()
	names := map[string]int{}
	nAttach := 0
	var broken error // the message's own error; the children so far stay
	last := time.Now()
	for {
		p, err := walker.next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !message.IsUnknownCharset(err) {
			broken = err
			break
		}
		converted := err == nil // an unknown charset leaves the bytes as they were
		h := p.Header
		mediaType, ctParams, _ := h.ContentType()
		mediaType = strings.ToLower(mediaType)
		disp, _, _ := h.ContentDisposition()
		filename, _ := (&mail.AttachmentHeader{Header: h}).Filename()
		if ext := bodyExt(mediaType); ext != "" && filename == "" && !strings.EqualFold(disp, "attachment") {
			if err := appendBody(bodies, dir, ext, mediaType, converted && ctParams["charset"] != "", p.Body); err != nil {
				var pe *partError
				if errors.As(err, &pe) {
					broken = pe.err
					break
				}
				return err
			}
			continue
		}
		nAttach++
		if filename == "" {
			filename = defaultName(mediaType, nAttach)
		}
		child := action.Child{
			Name:     t.Item.Name + "/" + unique(names, cleanFileName(filename)),
			Metadata: md,
		}
		if mediaType == "message/rfc822" || mediaType == "message/global" {
			child.ContentType = "message/rfc822"
		}
		progress(out, t.Item.Size, cr.n)
		if time.Since(last) > 5*time.Second {
			out.Heartbeat()
			last = time.Now()
		}
		pr := &partReader{r: p.Body}
		child.Blob = pr
		if err := out.CreateChild(ctx, child); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pr.err != nil {
				broken = pr.err
				break
			}
			return fmt.Errorf("create attachment %q: %w", child.Name, err)
		}
	}
	if err := addHeaders(bodies, dir, textHeaders(mail.Header{Header: e.Header})); err != nil {
		return err
	}
	for _, ext := range bodyPreference {
		b := bodies[ext]
		if b == nil {
			continue
		}
		if _, err := b.file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewind body: %w", err)
		}
		ct := b.mediaType
		if b.utf8 {
			ct += "; charset=utf-8"
		}
		err := out.CreateChild(ctx, action.Child{
			Name:        t.Item.Name + "/" + unique(names, "body."+ext),
			ContentType: ct,
			Metadata:    md,
			Blob:        b.file,
		})
		if err != nil {
			return fmt.Errorf("create body: %w", err)
		}
		break
	}
	out.Progress(1)
	switch {
	case errors.Is(broken, errTooDeep):
		return action.Permanentf("message has %s (the limit); the parts before them were kept", errTooDeep)
	case errors.Is(broken, errTooManyParts):
		return action.Permanentf("message has more than %d MIME parts (the limit); the parts before them were kept", maxParts)
	case errors.Is(broken, errHeaderTooLarge):
		return action.Permanentf("message has a MIME part whose header is larger than %d MiB (the limit); the parts before it were kept", maxHeader>>20)
	case broken != nil:
		return action.Permanentf("corrupt message: %s", oneLine(broken.Error()))
	}
	return nil
}

// partError is an error reading the message, as opposed to writing the temporary file.
type partError struct{ err error }

func (e *partError) Error() string { return e.err.Error() }

// appendBody appends a body part to the buffered alternative of its kind. Several text/plain
// parts are joined by a blank line; of the other kinds only the first part is kept.
func appendBody(bodies map[string]*body, dir, ext, mediaType string, utf8 bool, r io.Reader) error {
	b := bodies[ext]
	if b == nil {
		f, err := os.Create(filepath.Join(dir, "body."+ext))
		if err != nil {
			return fmt.Errorf("buffer body: %w", err)
		}
		b = &body{ext: ext, mediaType: mediaType, utf8: true, file: f}
		bodies[ext] = b
	} else if ext != "txt" {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return &partError{err}
		}
		return nil
	} else if _, err := b.file.WriteString("\n\n"); err != nil {
		return fmt.Errorf("buffer body: %w", err)
	}
	b.parts++
	b.utf8 = b.utf8 && utf8
	pr := &partReader{r: r}
	if _, err := io.Copy(b.file, pr); err != nil {
		if pr.err != nil {
			return &partError{pr.err}
		}
		return fmt.Errorf("buffer body: %w", err)
	}
	return nil
}

// extensions gives unnamed attachments of common types an extension. (mime.ExtensionsByType
// depends on the machine's mime.types, which would make names differ between machines.)
var extensions = map[string]string{
	"application/pdf": ".pdf", "application/zip": ".zip", "image/png": ".png", "image/jpeg": ".jpg",
	"image/gif": ".gif", "image/tiff": ".tif", "text/plain": ".txt", "text/html": ".html",
	"text/calendar": ".ics", "text/vcard": ".vcf", "text/x-vcard": ".vcf", "application/rtf": ".rtf",
	"application/msword": ".doc", "application/vnd.ms-excel": ".xls", "application/ms-tnef": ".dat",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   ".docx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         ".xlsx",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
}

// defaultName names the n-th attachment when it has no file name.
func defaultName(mediaType string, n int) string {
	if mediaType == "message/rfc822" || mediaType == "message/global" {
		return "message-" + strconv.Itoa(n) + ".eml"
	}
	return "attachment-" + strconv.Itoa(n) + extensions[mediaType]
}

// cleanFileName makes an attachment's file name a single, readable path component: no
// separators, no control characters, valid UTF-8, not "." or "..", at most 255 bytes.
func cleanFileName(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		switch {
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0, r == '/', r == '\\':
			return '_'
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > 255 {
		n := 255
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	if s == "" || s == "." || s == ".." {
		return "attachment"
	}
	return s
}

// unique returns name, or name with " (2)", " (3)", … before its extension when already used.
func unique(used map[string]int, name string) string {
	used[name]++
	n := used[name]
	if n == 1 {
		return name
	}
	ext := filepath.Ext(name)
	if ext == name {
		ext = ""
	}
	for {
		cand := fmt.Sprintf("%s (%d)%s", strings.TrimSuffix(name, ext), n, ext)
		if used[cand] == 0 {
			used[cand] = 1
			// The next duplicate starts after this one: names already taken are skipped once,
			// not once per duplicate (quadratic in a message's attachments).
			used[name] = n
			return cand
		}
		n++
	}
}

// headerMetadata returns the message's headers as metadata keys, without the keys existing
// already has.
func headerMetadata(h mail.Header, existing map[string]any) map[string]any {
	md := map[string]any{}
	set := func(key, value string) {
		value = strings.TrimSpace(value)
		if value == "" {
			return
		}
		if _, ok := existing[key]; ok {
			return
		}
		md[key] = rawHeaderText(value)
	}
	for _, k := range []struct{ header, key string }{{"From", "email_from"}, {"To", "email_to"}, {"Cc", "email_cc"}} {
		set(k.key, addresses(h, k.header))
	}
	if s, err := h.Subject(); err == nil {
		set("email_subject", s)
	} else {
		set("email_subject", h.Get("Subject"))
	}
	if d, err := h.Date(); err == nil && !d.IsZero() {
		set("email_date", d.UTC().Format(time.RFC3339))
	} else {
		set("email_date", h.Get("Date"))
	}
	if id, err := h.MessageID(); err == nil && id != "" {
		set("email_message_id", id)
	} else {
		set("email_message_id", strings.Trim(h.Get("Message-Id"), "<> "))
	}
	return md
}

// rawHeaderText turns a header value that is not valid UTF-8 into text. RFC 2047 words are
// decoded already; what is left is raw 8-bit bytes, as msgconvert writes an Outlook subject
// (Latin-1 when every character fits in it, UTF-8 otherwise). Bytes that are not UTF-8 are read
// as Windows-1252, Latin-1's superset, rather than replaced: "Grüße" stays "Grüße", not "Gr��e".
func rawHeaderText(value string) string {
	if utf8.ValidString(value) {
		return value
	}
	if s, err := charmap.Windows1252.NewDecoder().String(value); err == nil {
		return s
	}
	return strings.ToValidUTF8(value, "\uFFFD")
}

// addresses formats an address header as "Name <addr>, addr, …", decoded; when it does not
// parse, its decoded text.
func addresses(h mail.Header, key string) string {
	list, err := h.AddressList(key)
	if err != nil || len(list) == 0 {
		if s, err := h.Text(key); err == nil {
			return s
		}
		return h.Get(key)
	}
	parts := make([]string, len(list))
	for i, a := range list {
		if a.Name != "" {
			parts[i] = a.Name + " <" + a.Address + ">"
		} else {
			parts[i] = a.Address
		}
	}
	return strings.Join(parts, ", ")
}
