package pdf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

// TestReadPages: pdftotext's output read into pages within the bounds — each page and the whole
// text cut between UTF-8 characters, the pages past a cut marked so.
func TestReadPages(t *testing.T) {
	t.Parallel()
	type want struct {
		text string
		cut  bool
	}
	tests := []struct {
		name             string
		out              string
		pages            int
		pageMax, textMax int
		want             []want
	}{
		{"whole", "one\ftwo  \n\f\fthree\f", 4, 100, 100,
			[]want{{"one", false}, {"two", false}, {"", false}, {"three", false}}},
		{"fewer form feeds than pages", "one\ftwo", 3, 100, 100,
			[]want{{"one", false}, {"two", false}, {"", false}}},
		{"a page cut", "xxxxxxxxxx\fyy\f", 2, 4, 100,
			[]want{{"xxxx", true}, {"yy", false}}},
		{"cut between characters", "ééé\f", 1, 5, 100, // é is 2 bytes: 5 keeps two
			[]want{{"éé", true}}},
		{"a four-byte character", "a😀b\f", 1, 4, 100,
			[]want{{"a", true}}},
		{"the whole text cut", "aaaa\fbbbb\fcccc\f", 3, 100, 6,
			[]want{{"aaaa", false}, {"bb", true}, {"", true}}},
		{"ends exactly at the bound", "aaaa\fbb\f", 2, 100, 6,
			[]want{{"aaaa", false}, {"bb", false}}},
		{"more at the bound", "aaaa\fbb\fc\f", 3, 100, 6,
			[]want{{"aaaa", false}, {"bb", false}, {"", true}}},
		{"at the bound and the end", "aaaa\fbb", 2, 100, 6,
			[]want{{"aaaa", false}, {"bb", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := make([]Page, tt.pages)
			if err := readPages(strings.NewReader(tt.out), pages, tt.pageMax, tt.textMax); err != nil {
				t.Fatal(err)
			}
			for i, w := range tt.want {
				if pages[i].Text != w.text || pages[i].Cut != w.cut {
					t.Errorf("page %d = %q cut %v, want %q cut %v", i+1, pages[i].Text, pages[i].Cut, w.text, w.cut)
				}
			}
		})
	}
}

// endless is pdftotext's output of a PDF whose content streams expand without end: pages of
// 'A's, a form feed every 1 MiB, forever. It counts what was read.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		if (e.n+int64(i))%(1<<20) == 1<<20-1 {
			p[i] = '\f'
		} else {
			p[i] = 'A'
		}
	}
	e.n += int64(len(p))
	return len(p), nil
}

// TestReadPagesEndless: an endless text is read only to the bounds — twice the whole text's
// bound at most, a buffer aside — and kept to them; every page not read whole is marked cut.
func TestReadPagesEndless(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pageMax, textMax int }{{4 << 20, 4 << 20}, {64 << 10, 8 << 20}} {
		e := &endless{}
		pages := make([]Page, 1000)
		if err := readPages(e, pages, tc.pageMax, tc.textMax); err != nil {
			t.Fatal(err)
		}
		if max := int64(2*tc.textMax + 64<<10); e.n > max {
			t.Errorf("pageMax %d, textMax %d: read %d bytes, want at most %d", tc.pageMax, tc.textMax, e.n, max)
		}
		kept := 0
		for i, p := range pages {
			kept += len(p.Text)
			if len(p.Text) > tc.pageMax {
				t.Errorf("page %d kept %d bytes, over %d", i+1, len(p.Text), tc.pageMax)
			}
			// A page is read whole (1 MiB less its form feed, when the page bound allows) or cut.
			if whole := len(p.Text) == 1<<20-1; whole == p.Cut || (whole && tc.pageMax < 1<<20) {
				t.Errorf("page %d: %d bytes, cut %v", i+1, len(p.Text), p.Cut)
				break
			}
		}
		if !pages[len(pages)-1].Cut {
			t.Error("the last page is not marked cut")
		}
		if kept > tc.textMax || kept == 0 {
			t.Errorf("kept %d bytes in all, want 1 to %d", kept, tc.textMax)
		}
	}
}

// textPDF returns a PDF of the given pages, each a page of lines set in Helvetica (not embedded).
func textPDF(pages [][]string) []byte {
	var objs []string
	n := len(pages)
	// 1 catalog, 2 pages, 3 font, then a page and its contents for each page.
	kids := make([]string, n)
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, lines := range pages {
		var c strings.Builder
		c.WriteString("BT /F1 9 Tf 11 TL 30 810 Td\n")
		for _, l := range lines {
			fmt.Fprintf(&c, "(%s) '\n", l)
		}
		c.WriteString("ET\n")
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", c.Len(), c.String()))
	}
	return writePDF(objs)
}

// TestTextCap: a PDF with more text than max_text_chars gets the cap's worth and the metadata
// truncated — read whole or split by page — and with ocr, the pages whose text was cut are not
// taken for pages without text. A PDF within the cap has no truncated key.
func TestTextCap(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdfinfo", "pdftotext", "pdftoppm", "qpdf", "tesseract")
	var pages [][]string
	for p := range 3 {
		var lines []string
		for l := range 60 {
			lines = append(lines, fmt.Sprintf("page %d line %02d the quick brown fox jumps over the lazy dog", p+1, l))
		}
		pages = append(pages, lines)
	}
	path := filepath.Join(t.TempDir(), "long.pdf")
	if err := os.WriteFile(path, textPDF(pages), 0o644); err != nil {
		t.Fatal(err)
	}
	const cap = 1000
	with := map[string]any{"max_text_chars": cap}
	for _, opts := range []map[string]any{nil, {"ocr": true}} {
		rec := &actiontest.Recorder{}
		if err := New().Run(t.Context(), actiontest.NewFileTask(t, path, "application/pdf", with, opts), rec); err != nil {
			t.Fatalf("options %v: %v", opts, err)
		}
		if rec.Text == nil || utf8.RuneCountInString(*rec.Text) != cap || !strings.HasPrefix(*rec.Text, "page 1 line 00 the quick brown fox") {
			t.Fatalf("options %v: text %d characters, want %d from page 1's start", opts, len(*rec.Text), cap)
		}
		if rec.Metadata["truncated"] != true || rec.Metadata["is_from_ocr"] != false {
			t.Errorf("options %v: metadata %v, want truncated and not from OCR", opts, rec.Metadata)
		}
	}

	rec := &actiontest.Recorder{}
	if err := New().Run(t.Context(), actiontest.NewFileTask(t, path, "application/pdf", with, map[string]any{"split_by_page": true}), rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Children) != 3 {
		t.Fatalf("%d children, want 3", len(rec.Children))
	}
	for i, c := range rec.Children {
		want := fmt.Sprintf("page %d line 00", i+1)
		if c.Text == nil || utf8.RuneCountInString(*c.Text) != cap || !strings.HasPrefix(*c.Text, want) || c.Metadata["truncated"] != true {
			t.Errorf("page %d: %d characters, metadata %v; want %d from %q, truncated", i+1, len(*c.Text), c.Metadata, cap, want)
		}
	}

	rec = &actiontest.Recorder{}
	if err := New().Run(t.Context(), actiontest.NewFileTask(t, path, "application/pdf", nil, nil), rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.Metadata["truncated"]; ok || !strings.Contains(*rec.Text, "page 3 line 59 the quick brown fox") {
		t.Errorf("within the cap: metadata %v, text ends %q", rec.Metadata, (*rec.Text)[max(0, len(*rec.Text)-80):])
	}
}
