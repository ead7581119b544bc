// Package html provides the "html" action of the documents workflow: it decodes an HTML
// document (byte-order mark, <meta charset>, else charset detection), takes its text from the
// DOM, renders it to PDF with headless Chromium (in the converter sandbox, JavaScript off, every
// request but data: URLs refused, the document never a file) and creates one final child with
// the PDF, the text and a thumbnail. Without Chromium the text is rendered as a monospace PDF
// and the child's metadata says degraded: true.
package html

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/action/text"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/textclean"
	"github.com/sluice-project/sluice/internal/warmpool"
)

// Name is the action's name in workflows.
const Name = "html"

// Action is the "html" action. Create it with [New]; it is safe for concurrent use. It renders
// with warm converters (see warm.go) and falls back to a cold Chromium of its own for a document
// no warm converter could render.
type Action struct {
	text    *text.Action
	browser string // the Chromium binary; tests point it at a missing one
	pool    pool
}

// New returns the "html" action. r renders the fallback PDF when Chromium is missing; share the
// text action's [text.Renderer] so the fonts are parsed once (nil means a new one).
func New(r *text.Renderer) *Action {
	return &Action{text: text.New(r), browser: "chromium"}
}

// Close retires the action's warm converters and waits until their sandboxes are gone. A later
// Run starts new ones.
func (a *Action) Close() { a.pool.Close() }

// config is the action's settings.
type config struct {
	Timeout time.Duration `with:"timeout" doc:"time limit of the Chromium run. Defaults to 120s."`
	converter.TextCap
}

var typed = settings.For(func() config { return config{Timeout: converter.DefaultTimeout, TextCap: converter.DefaultTextCap} },
	func(c *config) error { return c.TextCap.Check() })

// Spec describes the action.
func (a *Action) Spec() action.Spec {
	w := 0.75
	return action.Spec{
		Name:    Name,
		Version: "9", // 2: Chromium no longer crashes under a deep data dir (socket path length); 3: the text fallback's thumbnail glyphs; 4: sandboxed, over DevTools, no file:// and no requests, dates normalised; 5: a transient thumbnail failure is retried, not kept as thumbnail_skipped; 6: the text fallback's thumbnail and PDF deflated at the default level; 7: its thumbnail glyphs from a cache, placed to a quarter of a pixel; 8: thumbnails encoded by Sluice (gray pages as 8-bit gray); 9: the parse cut at MaxNodes, and after an <svg> or <math> a tag in raw text escaped and a <noscript>'s inside dropped
		Doc: "Take an HTML document's text from the DOM and render it to PDF with headless Chromium " +
			"(a monospace text PDF without it); one final child.",
		Settings:       typed.Settings(),
		Validate:       typed.Validate,
		Concurrency:    2,
		Timeout:        10 * time.Minute,
		ProgressWeight: &w,
	}
}

// Policy caches the action's effects by its input (the conversion cache).
func (a *Action) Policy() action.Policy { return action.Policy{Cacheable: true} }

// Run converts one HTML document.
func (a *Action) Run(ctx context.Context, t *action.Task, out action.Output) error {
	cfg, err := typed.Run(t.With)
	if err != nil {
		return err
	}
	rc, err := t.OpenBlob(ctx)
	if err != nil {
		return fmt.Errorf("open html blob: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(rc, MaxBytes+1))
	rc.Close()
	if err != nil {
		return fmt.Errorf("read html blob: %w", err)
	}
	md := map[string]any{}
	if len(raw) > MaxBytes {
		raw = raw[:MaxBytes]
		md["truncated"] = true
	}
	doc, charset := Decode(raw)
	md["charset"] = charset
	// The text and the PDF are both made from root: cut, they are cut alike.
	root, cut, err := parse(doc)
	if err != nil {
		return action.Permanent(err)
	}
	if cut {
		md["truncated"] = true
	}
	body, cut := textclean.SanitizeCut(Text(root), cfg.MaxTextChars)
	if cut {
		md["truncated"] = true
	}
	out.Progress(0.2)

	// Chromium reserves terabytes of address space: an rlimit kills it.
	lim := converter.Limits{Timeout: cfg.Timeout, MemoryLimit: -1}
	r := &converter.Runner{Limits: lim, Dir: t.TempDir, Heartbeat: out.Heartbeat}
	if !converter.Installed(a.browser) {
		md["degraded"] = true
		md["renderer"] = "text"
		return a.fallback(ctx, r, t, out, body, md)
	}
	pdf, blocked, err := a.render(ctx, t, r, Inert(root))
	if blocked > 0 {
		md["blocked_requests"] = blocked
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The text is still worth keeping: fall back to the text rendering and say why.
		md["degraded"] = true
		md["renderer"] = "text"
		md["render_error"] = err.Error()
		return a.fallback(ctx, r, t, out, body, md)
	}
	md["renderer"] = "chromium"
	pdf = converter.NormalizePDF(pdf)
	c := action.Child{Name: t.Item.Name, ContentType: "application/pdf", Metadata: md, Blob: bytes.NewReader(pdf), Text: &body}
	thumb, err := text.Thumbnail(ctx, r, pdf)
	switch {
	case err == nil:
		c.Thumbnail, c.ThumbnailType = bytes.NewReader(thumb), "image/png"
	case ctx.Err() != nil:
		return ctx.Err()
	case !skipThumbnail(err):
		return err
	default:
		md["thumbnail_skipped"] = err.Error()
	}
	return out.CreateChild(ctx, c)
}

// render prints doc to PDF with the job's warm converter, or with a cold Chromium when no warm
// converter could.
// A document a converter retired before rendering goes to the job's next (warmpool.Offer).
func (a *Action) render(ctx context.Context, t *action.Task, r *converter.Runner, doc string) ([]byte, int, error) {
	blocked := 0
	pdf, err := warmpool.Offer(func() (*warm, bool) {
		w := a.pool.get(ctx, t.JobID, a.browser, r.Limits, tempBase(t.TempDir))
		return w, w != nil
	}, func(w *warm) (pdf []byte, err error) {
		pdf, blocked, err = w.render(ctx, doc, r.Limits.Timeout, r.Heartbeat)
		return pdf, err
	})
	if !errors.Is(err, errNoWarm) && !errors.Is(err, warmpool.ErrRetry) {
		return pdf, blocked, err
	}
	return render(ctx, r, a.browser, doc)
}

// tempBase returns the directory warm converters are made in: the one holding the task's
// attempt dir (an engine's <data dir>/tmp, emptied when an engine opens the data dir), or ""
// for the system's temporary directory.
func tempBase(taskDir string) string {
	if taskDir == "" {
		return ""
	}
	return filepath.Dir(taskDir)
}

// skipThumbnail reports whether a thumbnail failure leaves the document without a thumbnail
// (a permanent one: pdftoppm refused the PDF) rather than failing the attempt to be retried (a
// transient one, such as pdftoppm's output not drained in time on a loaded machine, which once
// made a kill-looped run's document differ from an uninterrupted run's).
func skipThumbnail(err error) bool { return action.IsPermanent(err) }

func (a *Action) fallback(ctx context.Context, r *converter.Runner, t *action.Task, out action.Output, body string, md map[string]any) error {
	c, err := a.text.Child(ctx, r, t.Item.Name, body, md)
	if err != nil {
		return err
	}
	return out.CreateChild(ctx, c)
}

// MaxBytes is how much of a document is read; the rest is left out, and the child's metadata
// says truncated: true.
const MaxBytes = 64 << 20

// MaxDepth is how deeply the HTML parser (golang.org/x/net/html) lets elements nest: past it,
// it stops with an error. It keeps the parser's work per tag (it looks through the open elements
// for a scope) and the recursive text walk and rendering bounded.
const MaxDepth = 512

// parse parses doc, cut where its tree could pass [MaxNodes] nodes (and reports whether it
// was), in plain words when it cannot.
func parse(doc string) (root *html.Node, cut bool, err error) {
	doc, cut = limitNodes(doc, MaxNodes, MaxBytes)
	root, err = html.Parse(strings.NewReader(doc))
	if err != nil {
		if strings.Contains(err.Error(), "open stack of elements exceeds") {
			return nil, false, fmt.Errorf("the HTML nests elements more than %d levels deep (the limit)", MaxDepth)
		}
		return nil, false, fmt.Errorf("the HTML cannot be parsed: %v", err)
	}
	return root, cut, nil
}

// Inert returns the parsed document as HTML with what could act on its own removed: scripts,
// <meta http-equiv=refresh>, <base>, and event-handler attributes. Chromium renders it with
// JavaScript off and every request but data: URLs refused; this is the first of those walls.
func Inert(root *html.Node) string {
	var strip func(n *html.Node)
	strip = func(n *html.Node) {
		for c := n.FirstChild; c != nil; {
			next := c.NextSibling
			if c.Type == html.ElementNode {
				switch {
				case c.DataAtom == atom.Script, c.DataAtom == atom.Base,
					c.DataAtom == atom.Meta && strings.EqualFold(attr(c, "http-equiv"), "refresh"):
					n.RemoveChild(c)
					c = next
					continue
				}
				kept := c.Attr[:0]
				for _, a := range c.Attr {
					if !strings.HasPrefix(strings.ToLower(a.Key), "on") {
						kept = append(kept, a)
					}
				}
				c.Attr = kept
			}
			strip(c)
			c = next
		}
	}
	strip(root)
	var b strings.Builder
	if err := html.Render(&b, root); err != nil {
		return ""
	}
	return b.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}

// metaCharset finds a charset declaration in the first bytes of a document, as in
// <meta charset="x"> or <meta http-equiv="Content-Type" content="text/html; charset=x">.
var metaCharset = regexp.MustCompile(`(?i)<meta[^>]+charset\s*=\s*["']?\s*([a-z0-9_:.\-]+)`)

// Decode returns the document as UTF-8 and the charset it was in: a byte-order mark wins, then
// a <meta> charset declaration in the first 1024 bytes, then [textclean.Decode]'s detection.
func Decode(b []byte) (string, string) {
	if bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}) || bytes.HasPrefix(b, []byte{0xff, 0xfe}) || bytes.HasPrefix(b, []byte{0xfe, 0xff}) {
		return textclean.Decode(b)
	}
	if m := metaCharset.FindSubmatch(b[:min(len(b), 1024)]); m != nil {
		if enc, name, ok := textclean.LookupCharset(string(m[1])); ok && !strings.HasPrefix(name, "utf-16") {
			if s, err := enc.NewDecoder().Bytes(b); err == nil {
				return string(s), name
			}
		}
	}
	return textclean.Decode(b)
}

// Text returns the visible text of a parsed document: the title, then the body, with a line
// break after each block element and whitespace collapsed outside <pre>. Scripts, styles and
// templates are left out.
func Text(root *html.Node) string {
	var sb strings.Builder
	w := &textWriter{sb: &sb}
	w.walk(root, false)
	return strings.TrimSpace(sb.String())
}

type textWriter struct {
	sb      *strings.Builder
	pending bool // a space is due before the next word
}

func (w *textWriter) walk(n *html.Node, pre bool) {
	switch n.Type {
	case html.TextNode:
		if pre {
			w.sb.WriteString(n.Data)
			return
		}
		for i, f := range strings.Fields(n.Data) {
			if (i > 0 || w.pending || startsWithSpace(n.Data)) && !w.atLineStart() {
				w.sb.WriteByte(' ')
			}
			w.sb.WriteString(f)
			w.pending = false
		}
		if endsWithSpace(n.Data) {
			w.pending = true
		}
		return
	case html.ElementNode:
		switch n.DataAtom {
		case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Head:
			if n.DataAtom == atom.Head {
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					if c.DataAtom == atom.Title {
						w.walk(c, false)
						w.newline()
					}
				}
			}
			return
		case atom.Br:
			w.newline()
			return
		case atom.Pre, atom.Textarea:
			pre = true
		}
	case html.CommentNode, html.DoctypeNode:
		return
	}
	block := n.Type == html.ElementNode && isBlock(n.DataAtom)
	if block {
		w.newline()
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, pre)
	}
	if block {
		w.newline()
	} else if n.Type == html.ElementNode && (n.DataAtom == atom.Td || n.DataAtom == atom.Th) {
		w.pending = true
	}
}

func (w *textWriter) atLineStart() bool {
	s := w.sb.String()
	return s == "" || s[len(s)-1] == '\n'
}

func (w *textWriter) newline() {
	if !w.atLineStart() {
		w.sb.WriteByte('\n')
	}
	w.pending = false
}

func startsWithSpace(s string) bool { return s != "" && strings.TrimLeft(s, " \t\r\n\f") != s }
func endsWithSpace(s string) bool   { return s != "" && strings.TrimRight(s, " \t\r\n\f") != s }

func isBlock(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Body, atom.Caption,
		atom.Dd, atom.Details, atom.Dialog, atom.Div, atom.Dl, atom.Dt, atom.Fieldset,
		atom.Figcaption, atom.Figure, atom.Footer, atom.Form, atom.H1, atom.H2, atom.H3,
		atom.H4, atom.H5, atom.H6, atom.Header, atom.Hr, atom.Html, atom.Li, atom.Main,
		atom.Nav, atom.Ol, atom.P, atom.Pre, atom.Section, atom.Summary, atom.Table,
		atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr, atom.Ul, atom.Title:
		return true
	}
	return false
}
