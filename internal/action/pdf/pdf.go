// Package pdf provides the "pdf" action of the documents workflow: it reads an application/pdf
// item's text page by page with poppler's pdftotext, renders a thumbnail of page 1, optionally
// OCRs pages that have no text with tesseract, and optionally splits the PDF into one final child
// per page.
package pdf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/textclean"
)

// Name is the action's name in workflows.
const Name = "pdf"

// PageSeparator joins the texts of a document's pages: a blank line, which the UI can show
// (unlike pdftotext's form feed).
const PageSeparator = "\n\n"

// Action is the "pdf" action. The zero value is ready to use and safe for concurrent use.
type Action struct{}

// New returns the "pdf" action.
func New() *Action { return &Action{} }

// Spec describes the action.
func (a *Action) Spec() action.Spec {
	w := 1.0
	return action.Spec{
		Name:    Name,
		Version: "4", // 2: split pages get deterministic ids; 3: OCR at the scan's own resolution; 4: page-1 thumbnail encoded by Sluice (gray pages as 8-bit gray)
		Doc: "Read a PDF's text per page (pdftotext) and a page-1 thumbnail; with the item option ocr, " +
			"OCR pages without text (tesseract, option lang); with split_by_page, one final child per page.",
		Settings:       converter.Settings(),
		Validate:       converter.ValidateSettings,
		Concurrency:    2,
		Timeout:        30 * time.Minute,
		ProgressWeight: &w,
	}
}

// Policy caches the action's effects by its input (the conversion cache).
func (a *Action) Policy() action.Policy { return action.Policy{Cacheable: true} }

// Run converts one PDF. A password-protected PDF fails with the permanent error
// "password-protected"; a corrupt one with poppler's cleaned-up message.
func (a *Action) Run(ctx context.Context, t *action.Task, out action.Output) error {
	cfg, err := converter.ParseSettings(t.With)
	if err != nil {
		return err
	}
	path, err := t.BlobPath(ctx)
	if err != nil {
		return fmt.Errorf("get pdf blob: %w", err)
	}
	r := &converter.Runner{Limits: cfg.Limits, Dir: t.TempDir, Heartbeat: out.Heartbeat}
	if path, err = r.Stage(path); err != nil {
		return err
	}
	split := converter.BoolOption(t.Item.Options, "split_by_page")
	// The text kept: the cap's worth for the document, or for each page when each page becomes
	// a document of its own (and 64 of those in all).
	textBytes := TextBytes(cfg.MaxTextChars)
	pageBytes := textBytes
	if split {
		textBytes *= splitTextPages
	}
	doc, err := Read(ctx, r, path, Options{
		OCR:       converter.BoolOption(t.Item.Options, "ocr"),
		Lang:      converter.StringOption(t.Item.Options, "lang"),
		Thumbnail: !split,
		Progress: func(f float64) {
			out.Progress(0.8 * f)
		},
		PageBytes: pageBytes,
		TextBytes: textBytes,
	})
	if err != nil {
		return err
	}
	if split && doc.PageCount > 0 {
		return a.split(ctx, r, t, out, path, doc, cfg.MaxTextChars)
	}
	texts := make([]string, len(doc.Pages))
	for i, p := range doc.Pages {
		texts[i] = p.Text
	}
	text, cut := textclean.SanitizeCut(strings.Join(texts, PageSeparator), cfg.MaxTextChars)
	if err := out.SetText(ctx, text); err != nil {
		return err
	}
	if doc.Thumbnail != nil {
		if err := out.SetThumbnail(ctx, bytes.NewReader(doc.Thumbnail), "image/png"); err != nil {
			return err
		}
	}
	md := map[string]any{"page_count": doc.PageCount, "is_from_ocr": doc.FromOCR()}
	if cut || doc.Cut() {
		md["truncated"] = true
	}
	out.SetMetadata(converter.AddedMetadata(t.Item, md))
	out.Progress(1)
	return nil
}

// split creates one final child per page: "<name>/page-0001.pdf" with the page's text,
// thumbnail and page_number metadata.
func (a *Action) split(ctx context.Context, r *converter.Runner, t *action.Task, out action.Output, path string, doc *Document, maxChars int) error {
	pageFiles, err := SplitPages(ctx, r, path)
	if err != nil {
		return err
	}
	if len(pageFiles) != doc.PageCount {
		return action.Permanentf("split pdf: got %d page files for %d pages", len(pageFiles), doc.PageCount)
	}
	thumbs, err := pageThumbnails(ctx, r, path, doc.PageCount, thumbnailRun)
	if err != nil {
		return err
	}
	for i, pf := range pageFiles {
		n := i + 1
		text, cut := textclean.SanitizeCut(doc.Pages[i].Text, maxChars)
		md := map[string]any{"page_number": n, "is_from_ocr": doc.Pages[i].FromOCR}
		if cut || doc.Pages[i].Cut {
			md["truncated"] = true
		}
		f, err := os.Open(pf)
		if err != nil {
			return fmt.Errorf("open page %d: %w", n, err)
		}
		c := action.Child{
			Name:        fmt.Sprintf("%s/page-%04d.pdf", t.Item.Name, n),
			ContentType: "application/pdf",
			Metadata:    md,
			Blob:        f,
			Text:        &text,
		}
		if thumbs[i] != nil {
			c.Thumbnail, c.ThumbnailType = bytes.NewReader(thumbs[i]), "image/png"
		}
		err = out.CreateChild(ctx, c)
		f.Close()
		if err != nil {
			return err
		}
		out.Progress(0.8 + 0.2*float64(n)/float64(len(pageFiles)))
	}
	out.SetMetadata(converter.AddedMetadata(t.Item, map[string]any{"page_count": doc.PageCount, "is_from_ocr": doc.FromOCR()}))
	return nil
}

// Document is what [Read] finds in a PDF.
type Document struct {
	PageCount int
	Pages     []Page // one per page, in order
	// Thumbnail is page 1's PNG thumbnail, when [Options.Thumbnail] asked for it and poppler
	// could render the page.
	Thumbnail []byte
}

// Page is one page's text.
type Page struct {
	Text    string // as the tool produced it, not sanitised
	FromOCR bool
	// Cut says that pdftotext's text of the page was longer than the bounds let [Read] keep:
	// Text is its beginning (or nothing), and the page is not OCRed for having no text.
	Cut bool
}

// Cut reports whether any page's text was cut at [Options]' bounds.
func (d *Document) Cut() bool {
	for _, p := range d.Pages {
		if p.Cut {
			return true
		}
	}
	return false
}

// FromOCR reports whether any page's text came from OCR.
func (d *Document) FromOCR() bool {
	for _, p := range d.Pages {
		if p.FromOCR {
			return true
		}
	}
	return false
}

// Options control [Read].
type Options struct {
	// OCR recognises the text of pages that have none.
	OCR bool
	// Lang is the OCR language as ISO-639-1 ("fr") or a tesseract code. Defaults to English.
	Lang string
	// Progress, when set, receives the fraction of pages done.
	Progress func(float64)
	// Thumbnail renders page 1 for [Document.Thumbnail], in the run that reads the PDF.
	Thumbnail bool
	// PageBytes and TextBytes bound the bytes of pdftotext's output kept for one page and for
	// the whole document (0: [DefaultTextBytes] each). A page whose text was not kept whole is
	// marked [Page.Cut]; once the whole document's bound is reached the output is read no further.
	PageBytes, TextBytes int
}

// DefaultTextBytes is the bytes of text [Read] keeps when [Options] set no bound: the text of the
// default cap of characters (textclean.DefaultMaxChars) at 4 bytes each, the most UTF-8 takes.
const DefaultTextBytes = textclean.DefaultMaxChars * utf8.UTFMax

// TextBytes is the bound on the bytes of pdftotext's output kept for a document (or a page, when
// the PDF is split) whose text is capped at maxChars characters.
func TextBytes(maxChars int) int {
	if maxChars <= 0 {
		maxChars = textclean.DefaultMaxChars
	}
	return maxChars*utf8.UTFMax + utf8.UTFMax
}

// splitTextPages is how many pages' bounds a split PDF keeps in all: 64 pages of a million
// characters, or tens of thousands of real ones.
const splitTextPages = 64

// Read reads the page count (pdfinfo) and the text of each page (pdftotext) of the PDF at path —
// and with opts.Thumbnail renders page 1 for a thumbnail, all in one sandboxed run — OCRing
// text-less pages when opts.OCR is set.
func Read(ctx context.Context, r *converter.Runner, path string, opts Options) (*Document, error) {
	txtPath := filepath.Join(r.Dir, "pdftotext.txt")
	defer os.Remove(txtPath)
	steps := []converter.Step{
		{Tool: "pdfinfo", Args: []string{"-enc", "UTF-8", path}, MaxStdout: pdfinfoMax},
		{Tool: "pdftotext", Args: []string{"-enc", "UTF-8", "-eol", "unix", path, txtPath}},
	}
	if opts.Thumbnail {
		steps = append(steps, converter.ThumbnailStep(path, 1))
	}
	res, err := r.RunSteps(ctx, "poppler", steps)
	if err != nil {
		return nil, pdfFailure("read pdf", err)
	}
	if res[0].Err != nil {
		return nil, pdfFailure("read pdf", res[0].Err)
	}
	n, err := pageCount(res[0].Stdout)
	if err != nil {
		return nil, err
	}
	doc := &Document{PageCount: n, Pages: make([]Page, n)}
	if n == 0 {
		return doc, nil
	}
	if res[1].Err != nil {
		return nil, pdfFailure("extract pdf text", res[1].Err)
	}
	// A page that poppler cannot render leaves the document without a thumbnail, not unread.
	if opts.Thumbnail && res[2].Err == nil {
		doc.Thumbnail, _ = converter.EncodeThumbnail(res[2].Stdout)
	}
	f, err := os.Open(txtPath)
	if err != nil {
		return nil, fmt.Errorf("read pdftotext output: %w", err)
	}
	pageMax, textMax := opts.PageBytes, opts.TextBytes
	if pageMax <= 0 {
		pageMax = DefaultTextBytes
	}
	if textMax <= 0 {
		textMax = DefaultTextBytes
	}
	err = readPages(f, doc.Pages, pageMax, textMax)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read pdftotext output: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress(0.2)
	}
	if !opts.OCR {
		return doc, nil
	}
	var pages []int // the pages to OCR: those without text
	for i := range doc.Pages {
		if !doc.Pages[i].Cut && strings.TrimSpace(doc.Pages[i].Text) == "" {
			pages = append(pages, i)
		}
	}
	if len(pages) == 0 {
		return doc, nil
	}
	dpi := ocrResolutions(ctx, r, path, n)
	lang := converter.TesseractLang(opts.Lang)
	// Each worker runs its tools in a directory of its own, with a copy of the PDF: a run hands
	// its directory, and all under it, to a user of its own for its time (see sandbox), so two
	// runs at once cannot share one. A single worker uses r's.
	workers := min(len(pages), cap(ocrSlots))
	runners := make([]*converter.Runner, workers)
	inputs := make([]string, workers)
	if workers == 1 {
		runners[0], inputs[0] = r, path
	}
	var ocrKept atomic.Int64
	// By page: its OCR text was longer than pageMax; it was left unread for the bound.
	ocrCut, unread := make([]bool, n), make([]bool, n)
	texts, err := ocrPages(ctx, pages, workers, func(ctx context.Context, w, i int) (string, error) {
		if runners[w] == nil { // only worker w reads or writes runners[w]
			dir := filepath.Join(r.Dir, "ocr-"+strconv.Itoa(w))
			if err := os.Mkdir(dir, 0o700); err != nil {
				return "", err
			}
			rw := &converter.Runner{Limits: r.Limits, Dir: dir, Env: r.Env, Heartbeat: r.Heartbeat}
			in, err := rw.Stage(path)
			if err != nil {
				return "", err
			}
			runners[w], inputs[w] = rw, in
		}
		// Once the pages OCRed have as much text as the document may keep, the pages after
		// them can keep none: they are left unread. (The pages taken are a prefix of pages, so
		// those OCRed before the bound was seen are all that the bound lets in, whatever the
		// order they finished in.)
		if ocrKept.Load() >= int64(textMax) {
			unread[i] = true
			return "", nil
		}
		text, err := ocrPage(ctx, runners[w], inputs[w], i+1, dpi[i], lang)
		text = strings.TrimRight(text, " \t\n")
		if len(text) > pageMax {
			text, ocrCut[i] = cutUTF8(text, pageMax), true
		}
		ocrKept.Add(int64(len(text)))
		return text, err
	}, func(done int) {
		if opts.Progress != nil {
			opts.Progress(0.2 + 0.8*float64(done)/float64(len(pages)))
		}
	})
	if workers > 1 {
		for w := range workers {
			os.RemoveAll(filepath.Join(r.Dir, "ocr-"+strconv.Itoa(w)))
		}
	}
	if err != nil {
		return nil, err
	}
	for k, i := range pages {
		doc.Pages[i] = Page{Text: texts[k], FromOCR: !unread[i], Cut: ocrCut[i] || unread[i]}
	}
	// The whole text within textMax, in page order: a page past the bound keeps nothing and is
	// not counted as OCRed, whether or not it was read before the bound was seen.
	kept := 0
	for i := range doc.Pages {
		p := &doc.Pages[i]
		if room := textMax - kept; len(p.Text) > room {
			p.Text, p.Cut = cutUTF8(p.Text, room), true
			if p.Text == "" {
				p.FromOCR = false
			}
		}
		kept += len(p.Text)
	}
	return doc, nil
}

// readPages reads pdftotext's output — each page's text ended by a form feed — into pages, keeping
// at most pageMax bytes of a page and textMax bytes in all, each cut between UTF-8 characters,
// with trailing blanks trimmed. A page kept in part is marked Cut. It never holds more than it
// keeps and a buffer: a page's text past pageMax is read and dropped, and once textMax is reached,
// or twice textMax has been read, it stops reading and marks every page not yet read whole Cut —
// a PDF whose compressed content streams expand to gigabytes of text costs what it keeps.
func readPages(rd io.Reader, pages []Page, pageMax, textMax int) error {
	br := bufio.NewReaderSize(rd, 64<<10)
	var (
		buf        []byte // the current page's kept text
		i          int    // the current page
		kept, read int
		cut        bool // the current page's text is not all in buf
	)
	end := func() {
		if i < len(pages) {
			pages[i].Text = strings.TrimRight(string(buf), " \t\n")
			pages[i].Cut = cut
		}
		i, buf, cut = i+1, buf[:0], false
	}
	for i < len(pages) {
		if kept >= textMax || read >= 2*textMax {
			if _, err := br.Peek(1); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			// More text than the bounds: this page and the rest are cut here, unread.
			for cut = true; i < len(pages); {
				end()
				cut = true
			}
			return nil
		}
		chunk, err := br.ReadSlice('\f')
		read += len(chunk)
		data, ff := chunk, false
		if err == nil { // the chunk ends with the page's form feed
			data, ff = chunk[:len(chunk)-1], true
		}
		if cut { // the page's text past its cut is dropped
			data = nil
		} else if room := min(pageMax-len(buf), textMax-kept); len(data) > room {
			k := max(room, 0)
			for k > 0 && !utf8.RuneStart(data[k]) {
				k--
			}
			data, cut = data[:k], true
		}
		buf = append(buf, data...)
		kept += len(data)
		switch {
		case ff:
			end()
		case err == bufio.ErrBufferFull:
		case err == io.EOF:
			if len(buf) > 0 || cut {
				end()
			}
			return nil
		default:
			return err
		}
	}
	if len(buf) > 0 || cut {
		end()
	}
	return nil
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends between UTF-8 characters.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ocrSlots bounds the pages being OCRed at once in the whole process by its CPUs: the pages of one
// long scan use every CPU, as OCRmyPDF's --jobs does, and documents OCRed side by side share them
// (tesseract runs single-threaded, see converter.Runner).
var ocrSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// ocrPages runs ocr on each of pages with workers workers (numbered from 0), each page holding
// one of ocrSlots while it runs, and returns their texts in the order of pages. The first error
// ends the others and is returned. progress is called, one call at a time, with the number of
// pages done so far, which only grows.
func ocrPages(ctx context.Context, pages []int, workers int, ocr func(ctx context.Context, worker, page int) (string, error), progress func(done int)) ([]string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	texts := make([]string, len(pages))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int // the index in pages of the next page to take
		done int
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(pages) || ctx.Err() != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, ok := take()
				if !ok {
					return
				}
				select {
				case ocrSlots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				text, err := ocr(ctx, w, pages[k])
				<-ocrSlots
				if err != nil {
					cancel(err)
					return
				}
				texts[k] = text
				mu.Lock()
				done++
				progress(done)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return texts, nil
}

// OCR renders a page at the resolution of the scan on it, as OCRmyPDF does: rendering a 200 dpi
// scan at 300 dpi only interpolates pixels, and tesseract's time grows with their number (2.25×
// as many at 300 as at 200), for no detail the scan did not have. Scans finer than 300 dpi are
// rendered at 300 and coarser ones than 150 at 300 too (tesseract reads small type better
// upsampled), as every page was before; so is a page without images (text drawn as outlines).
const (
	ocrDPI    = 300
	ocrMinDPI = 150
)

// ocrResolutions returns the dpi to render each of the n pages of the PDF at for OCR, read from
// the resolutions of its images (pdfimages -list, which decodes nothing). Any failure to read them
// leaves every page at ocrDPI: the resolution is a saving, never a reason to fail.
func ocrResolutions(ctx context.Context, r *converter.Runner, path string, n int) []int {
	dpi := make([]int, n)
	for i := range dpi {
		dpi[i] = ocrDPI
	}
	out, err := r.Output(ctx, "pdfimages", 4<<20, "-list", path)
	if err != nil {
		return dpi
	}
	for page, ppi := range scanResolutions(string(out)) {
		if page >= 1 && page <= n && ppi >= ocrMinDPI && ppi < ocrDPI {
			dpi[page-1] = ppi
		}
	}
	return dpi
}

// scanResolutions parses pdfimages -list: the highest resolution of an image on each page (the
// smaller of its x-ppi and y-ppi), by page number.
//
//	page   num  type   width height color comp bpc  enc interp  object ID x-ppi y-ppi size ratio
//	--------------------------------------------------------------------------------------------
//	   1     0 image    1700  2200  gray    1   8  jpeg   no         7  0   200   200  554K  15%
func scanResolutions(list string) map[int]int {
	res := map[int]int{}
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) < 14 || f[2] != "image" {
			continue
		}
		page, err1 := strconv.Atoi(f[0])
		x, err2 := strconv.Atoi(f[12])
		y, err3 := strconv.Atoi(f[13])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if ppi := min(x, y); ppi > res[page] {
			res[page] = ppi
		}
	}
	return res
}

// ocrPage renders one page at dpi in grey and OCRs it; pages of a document may be OCRed at once. The page is written as a PGM, not a PNG:
// compressing a 300 dpi page to PNG took pdftoppm 2 s of CPU and tesseract longer to read back
// (2.7 s against 2.2 s), for a file that lives a moment in the task's temp dir.
func ocrPage(ctx context.Context, r *converter.Runner, path string, page, dpi int, lang string) (string, error) {
	prefix := filepath.Join(r.Dir, "ocr-page-"+strconv.Itoa(page))
	p := strconv.Itoa(page)
	if err := r.Run(ctx, "pdftoppm", []string{"-r", strconv.Itoa(dpi), "-gray", "-f", p, "-l", p, "-singlefile", path, prefix}, nil); err != nil {
		return "", pdfFailure(fmt.Sprintf("render page %d for ocr", page), err)
	}
	defer os.Remove(prefix + ".pgm")
	return r.OCR(ctx, prefix+".pgm", lang)
}

// PageCount returns the number of pages of the PDF at path (pdfinfo). It returns the permanent
// error "password-protected" for a PDF that needs a password to open.
func PageCount(ctx context.Context, r *converter.Runner, path string) (int, error) {
	info, err := r.Output(ctx, "pdfinfo", pdfinfoMax, "-enc", "UTF-8", path)
	if err != nil {
		return 0, pdfFailure("read pdf", err)
	}
	return pageCount(info)
}

// pdfinfoMax bounds what pdfinfo may print.
const pdfinfoMax = 4 << 20

// pageCount reads the page count from pdfinfo's output.
func pageCount(info []byte) (int, error) {
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "Pages:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return 0, action.Permanentf("read pdf: bad page count %q", strings.TrimSpace(v))
			}
			return n, nil
		}
	}
	return 0, action.Permanentf("read pdf: pdfinfo reported no page count")
}

// pdfFailure maps poppler's "Incorrect password" to "password-protected" and other failures to
// their cleaned-up message.
func pdfFailure(what string, err error) error {
	if s := converter.Stderr(err); strings.Contains(s, "Incorrect password") {
		return action.Permanentf("password-protected")
	}
	return converter.Failure(what, err)
}

// SplitPages writes each page of the PDF at path to its own PDF file under r.Dir and returns
// their paths in page order. It uses qpdf, or poppler's pdfseparate when qpdf is not installed.
func SplitPages(ctx context.Context, r *converter.Runner, path string) ([]string, error) {
	dir, err := os.MkdirTemp(r.Dir, "split-")
	if err != nil {
		return nil, err
	}
	if converter.Installed("qpdf") {
		err = r.Run(ctx, "qpdf", []string{"--deterministic-id", "--split-pages", path, filepath.Join(dir, "page.pdf")}, nil)
		// qpdf exits 3 when it succeeded with warnings (a damaged but recoverable file).
		if s := converter.ExitCode(err); s == 3 {
			err = nil
		}
	} else {
		err = r.Run(ctx, "pdfseparate", []string{path, filepath.Join(dir, "page-%d.pdf")}, nil)
	}
	if err != nil {
		return nil, pdfFailure("split pdf", err)
	}
	return sortedFiles(dir)
}

// pageThumbnails renders every page of the n of the PDF at path as a PNG thumbnail: pdftoppm
// writes raw images of thumbnailRun pages at a time ([thumbnailRun] in the action) (at most 1.5 MB each, so a run's scratch
// files stay bounded whatever the page count), which [converter.EncodeThumbnail] encodes. The
// result has one entry per page, nil for a page pdftoppm wrote no image for.
func pageThumbnails(ctx context.Context, r *converter.Runner, path string, n, thumbnailRun int) ([][]byte, error) {
	dir, err := os.MkdirTemp(r.Dir, "thumbs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := make([][]byte, n)
	for first := 1; first <= n; first += thumbnailRun {
		last := min(first+thumbnailRun-1, n)
		args := []string{"-f", strconv.Itoa(first), "-l", strconv.Itoa(last), "-scale-to", strconv.Itoa(converter.ThumbnailSize), path, filepath.Join(dir, "t")}
		if err := r.Run(ctx, "pdftoppm", args, nil); err != nil {
			return nil, pdfFailure("render pdf thumbnails", err)
		}
		files, err := sortedFiles(dir)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			page := pageNumber(f)
			raw, err := converter.ReadThumbnailFile(f)
			if err != nil {
				return nil, err
			}
			os.Remove(f)
			if page < first || page > last {
				continue
			}
			if out[page-1], err = converter.EncodeThumbnail(raw); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// thumbnailRun is how many pages one pdftoppm run renders for [pageThumbnails]: a sandbox's
// start (about 9 ms) for 16 pages, and at most 24 MB of scratch files.
const thumbnailRun = 16

// sortedFiles lists dir's files in page order. Tools number pages with zero padding (qpdf,
// pdftoppm) or without (pdfseparate), so sort by the number in the name.
func sortedFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		files = append(files, filepath.Join(dir, e.Name()))
	}
	sort.Slice(files, func(i, j int) bool { return pageNumber(files[i]) < pageNumber(files[j]) })
	return files, nil
}

func pageNumber(path string) int {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	i := len(base)
	for i > 0 && base[i-1] >= '0' && base[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(base[i:])
	return n
}
