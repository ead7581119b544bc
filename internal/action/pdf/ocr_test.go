package pdf

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

// TestOCRPages: texts come back in page order whatever order the pages end in, as many pages run
// at once as there are slots (never more), progress only grows, and the first error ends the rest.
func TestOCRPages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pages := []int{0, 2, 3, 5, 8, 9}
	want := min(2, cap(ocrSlots))
	var (
		mu             sync.Mutex
		running, most  int
		together       = make(chan struct{})
		togetherClosed bool
		progress       []int
	)
	workers := min(len(pages), cap(ocrSlots))
	busy := make([]bool, workers)
	texts, err := ocrPages(ctx, pages, workers, func(ctx context.Context, w, i int) (string, error) {
		mu.Lock()
		if busy[w] {
			t.Errorf("worker %d given page %d while busy", w, i)
		}
		busy[w] = true
		running++
		most = max(most, running)
		if running >= want && !togetherClosed {
			close(together)
			togetherClosed = true
		}
		mu.Unlock()
		// The first pages wait until want of them run at once: one page at a time would stop here.
		select {
		case <-together:
		case <-ctx.Done():
			return "", fmt.Errorf("page %d: never %d pages at once", i, want)
		}
		mu.Lock()
		running--
		busy[w] = false
		mu.Unlock()
		return "page " + strconv.Itoa(i), nil
	}, func(done int) { progress = append(progress, done) })
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range pages {
		if texts[k] != "page "+strconv.Itoa(i) {
			t.Errorf("texts[%d] = %q, want page %d", k, texts[k], i)
		}
	}
	if most > cap(ocrSlots) {
		t.Errorf("%d pages at once, more than the %d slots", most, cap(ocrSlots))
	}
	for k, d := range progress {
		if d != k+1 {
			t.Errorf("progress = %v, want 1, 2, … %d", progress, len(pages))
			break
		}
	}

	boom := errors.New("tesseract crashed")
	var started sync.Map
	_, err = ocrPages(ctx, []int{0, 1, 2, 3, 4, 5, 6, 7}, min(8, cap(ocrSlots)), func(ctx context.Context, _, i int) (string, error) {
		started.Store(i, true)
		if i == 0 {
			return "", boom
		}
		<-ctx.Done()
		return "", ctx.Err()
	}, func(int) {})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the first page's error", err)
	}
	if _, ok := started.Load(7); ok && cap(ocrSlots) < 8 {
		t.Error("the last page started after the first had failed")
	}
}

// TestOCRScan OCRs an image-only PDF of three pages (testJournalParser.pdf's pages 1–3 rendered
// at 150 dpi, the way a scanner's PDF holds them): each page's text in its place, read at the
// scan's 150 dpi.
func TestOCRScan(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdfinfo", "pdftotext", "pdftoppm", "tesseract")
	src := convertertest.File(t, "testJournalParser.pdf")
	dir := t.TempDir()
	var sources []string
	var images [][]byte
	for p := 1; p <= 3; p++ {
		out, err := exec.Command("pdftotext", "-f", strconv.Itoa(p), "-l", strconv.Itoa(p), src, "-").Output()
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, string(out))
		prefix := filepath.Join(dir, "p"+strconv.Itoa(p))
		if err := exec.Command("pdftoppm", "-r", "150", "-gray", "-f", strconv.Itoa(p), "-l", strconv.Itoa(p), "-singlefile", src, prefix).Run(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(prefix + ".pgm")
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, b)
	}
	scan := filepath.Join(dir, "scan.pdf")
	if err := os.WriteFile(scan, imagePDF(t, images, 150), 0o600); err != nil {
		t.Fatal(err)
	}
	task := actiontest.NewFileTask(t, scan, "application/pdf", nil, map[string]any{"ocr": true, "lang": "en"})
	rec := &actiontest.Recorder{}
	if err := New().Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	if rec.Metadata["is_from_ocr"] != true || rec.Metadata["page_count"] != 3 {
		t.Errorf("metadata = %v, want 3 pages from OCR", rec.Metadata)
	}
	text, at := *rec.Text, -1
	for p := range sources {
		w := longestWord(sources[p], slices.Delete(slices.Clone(sources), p, p+1)...)
		i := strings.Index(text, w)
		if i <= at {
			t.Errorf("page %d's %q at %d in the OCR text, want after %d:\n%s", p+1, w, i, at, text)
		}
		at = i
	}

	// Within bounds: the text kept in page order, a page past the whole bound keeping nothing
	// and not counted as OCRed, however the pages' OCR finished.
	for _, b := range []struct{ page, text int }{{100, 150}, {100, 100}} {
		r := &converter.Runner{Dir: t.TempDir()}
		in, err := r.Stage(scan)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Read(t.Context(), r, in, Options{OCR: true, PageBytes: b.page, TextBytes: b.text})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for i, p := range doc.Pages {
			total += len(p.Text)
			if len(p.Text) > b.page || !p.Cut || p.FromOCR != (p.Text != "") || !utf8.ValidString(p.Text) {
				t.Errorf("bounds %v: page %d kept %d bytes, cut %v, from OCR %v", b, i+1, len(p.Text), p.Cut, p.FromOCR)
			}
		}
		// Cut between characters, after trailing blanks were trimmed: a few bytes short at most.
		if total > b.text || total < b.text-8 || doc.Pages[2].Text != "" {
			t.Errorf("bounds %v: kept %d bytes in all (page 3: %d), want about %d and none of page 3", b, total, len(doc.Pages[2].Text), b.text)
		}
	}
}

// longestWord returns the longest run of letters in s that none of others holds (the first of
// equal length).
func longestWord(s string, others ...string) string {
	var best string
	for _, w := range regexp.MustCompile(`[A-Za-z]+`).FindAllString(s, -1) {
		if len(w) > len(best) && !slices.ContainsFunc(others, func(o string) bool { return strings.Contains(o, w) }) {
			best = w
		}
	}
	return best
}

// imagePDF writes a PDF of one page per binary PGM image (P5, 8 bits), each image deflated and
// filling a page of its size at dpi: what a scanner writes, text only as pixels.
func imagePDF(t *testing.T, pgms [][]byte, dpi int) []byte {
	t.Helper()
	var objs []string // objects 1…n; 1 catalog, 2 pages, then page, contents, image per page
	kids := make([]string, len(pgms))
	body := make([]string, 0, 3*len(pgms))
	for i, pgm := range pgms {
		var w, h, maxval int
		var magic, rest string
		if _, err := fmt.Sscan(string(pgm[:min(len(pgm), 64)]), &magic, &w, &h, &maxval); err != nil || magic != "P5" || maxval != 255 {
			t.Fatalf("image %d is not an 8-bit binary PGM: %v", i, err)
		}
		header := fmt.Sprintf("P5\n%d %d\n255\n", w, h)
		if !bytes.HasPrefix(pgm, []byte(header)) {
			t.Fatalf("image %d: header %q is not pdftoppm's", i, pgm[:20])
		}
		rest = string(pgm[len(header):])
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write([]byte(rest))
		zw.Close()
		pw, ph := float64(w)*72/float64(dpi), float64(h)*72/float64(dpi)
		page, contents, image := 3+3*i, 4+3*i, 5+3*i
		kids[i] = fmt.Sprintf("%d 0 R", page)
		draw := fmt.Sprintf("q %.2f 0 0 %.2f 0 0 cm /Im0 Do Q", pw, ph)
		body = append(body,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %.2f %.2f] /Resources << /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>", pw, ph, image, contents),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(draw), draw),
			fmt.Sprintf("<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream", w, h, z.Len(), z.String()))
	}
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pgms)))
	objs = append(objs, body...)
	return writePDF(objs)
}
