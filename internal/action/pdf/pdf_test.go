package pdf

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

func TestCorpus(t *testing.T) {
	t.Parallel()
	exp := convertertest.Expectations(t)
	for _, name := range []string{"testJournalParser.pdf", "issue16538.pdf", "testPDF_acroform3.pdf", "testOCR.pdf"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			convertertest.RequireTools(t, "pdfinfo", "pdftotext", "pdftoppm")
			task := actiontest.NewFileTask(t, convertertest.File(t, name), "application/pdf", nil, nil)
			rec := &actiontest.Recorder{}
			if err := New().Run(t.Context(), task, rec); err != nil {
				t.Fatalf("run: %v", err)
			}
			if rec.Text == nil {
				t.Fatal("no text set")
			}
			convertertest.CheckPhrases(t, *rec.Text, exp[name].Phrases)
			convertertest.CheckThumbnail(t, rec.Thumbnail, rec.ThumbnailType)
			if rec.Metadata["page_count"].(int) < 1 {
				t.Errorf("page_count = %v", rec.Metadata["page_count"])
			}
			if rec.Metadata["is_from_ocr"] != false {
				t.Errorf("is_from_ocr = %v, want false", rec.Metadata["is_from_ocr"])
			}
		})
	}
}

func TestOCR(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdfinfo", "pdftotext", "pdftoppm", "tesseract")
	exp := convertertest.Expectations(t)["testOCR.pdf"]
	task := actiontest.NewFileTask(t, convertertest.File(t, "testOCR.pdf"), "application/pdf", nil, map[string]any{"ocr": true, "lang": "en"})
	rec := &actiontest.Recorder{}
	if err := New().Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	convertertest.CheckPhrases(t, *rec.Text, exp.OCRPhrases)
	if rec.Metadata["is_from_ocr"] != true {
		t.Errorf("is_from_ocr = %v, want true", rec.Metadata["is_from_ocr"])
	}
}

func TestOCRMissingLanguage(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdfinfo", "pdftotext", "pdftoppm", "tesseract")
	task := actiontest.NewFileTask(t, convertertest.File(t, "testOCR.pdf"), "application/pdf", nil, map[string]any{"ocr": true, "lang": "xx-no-such"})
	err := New().Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "is not installed: apt-get install tesseract-ocr-") {
		t.Fatalf("err = %v, want a permanent missing-language error", err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, want string
	}{
		{name: "password", file: "testUnicodePassword.pdf", want: "password-protected"},
		{name: "corrupt", file: "bug1020226.pdf", want: "read pdf: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			convertertest.RequireTools(t, "pdfinfo", "pdftotext", "pdftoppm")
			task := actiontest.NewFileTask(t, convertertest.File(t, tt.file), "application/pdf", nil, nil)
			err := New().Run(t.Context(), task, &actiontest.Recorder{})
			if !action.IsPermanent(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want permanent containing %q", err, tt.want)
			}
			t.Logf("error: %v", err)
		})
	}
}

func TestSplitByPage(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdfinfo", "pdftotext", "pdftoppm", "qpdf")
	name := "testJournalParser.pdf"
	task := actiontest.NewFileTask(t, convertertest.File(t, name), "application/pdf", nil, map[string]any{"split_by_page": true})
	rec := &actiontest.Recorder{}
	if err := New().Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	if rec.Text != nil {
		t.Error("split parent got text")
	}
	n := rec.Metadata["page_count"].(int)
	if n < 2 || len(rec.Children) != n {
		t.Fatalf("%d children for %d pages", len(rec.Children), n)
	}
	var all []string
	for i, c := range rec.Children {
		if want := name + "/page-" + pad4(i+1) + ".pdf"; c.Name != want {
			t.Errorf("child %d name = %q, want %q", i, c.Name, want)
		}
		if c.Metadata["page_number"] != i+1 || c.ContentType != "application/pdf" || c.Text == nil {
			t.Errorf("child %d: page_number %v, type %q, text set %v", i, c.Metadata["page_number"], c.ContentType, c.Text != nil)
			continue
		}
		if !strings.HasPrefix(string(c.Data), "%PDF-") {
			t.Errorf("child %d blob is not a PDF", i)
		}
		convertertest.CheckThumbnail(t, c.ThumbnailData, c.ThumbnailType)
		all = append(all, *c.Text)
	}
	convertertest.CheckPhrases(t, strings.Join(all, "\n"), convertertest.Expectations(t)[name].Phrases)
}

// TestPageThumbnails: rendered a few pages a run, each page's thumbnail is the one rendered
// alone, in page order.
func TestPageThumbnails(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdftoppm")
	r := &converter.Runner{Dir: t.TempDir()}
	path, err := r.Stage(convertertest.File(t, "testJournalParser.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	thumbs, err := pageThumbnails(t.Context(), r, path, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(thumbs) != 10 {
		t.Fatalf("%d thumbnails for 10 pages", len(thumbs))
	}
	for i, th := range thumbs {
		want, err := r.PDFThumbnail(t.Context(), path, i+1)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(th, want) {
			t.Errorf("page %d: the thumbnail differs from the page's rendered alone", i+1)
		}
	}
	if entries, _ := os.ReadDir(r.Dir); len(entries) != 1 {
		t.Errorf("the runner's dir holds %d entries after, want the staged PDF alone", len(entries))
	}
}

func TestCanceled(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdfinfo")
	ctx, cancel := contextWithCancel(t)
	cancel()
	task := actiontest.NewFileTask(t, convertertest.File(t, "testJournalParser.pdf"), "application/pdf", nil, nil)
	if err := New().Run(ctx, task, &actiontest.Recorder{}); err == nil || action.IsPermanent(err) {
		t.Fatalf("err = %v, want a transient context error", err)
	}
}

func TestSortedFilesOrder(t *testing.T) {
	t.Parallel()
	got := []int{pageNumber("/x/page-10.pdf"), pageNumber("/x/page-9.pdf"), pageNumber("/x/t-001.png")}
	if got[0] != 10 || got[1] != 9 || got[2] != 1 {
		t.Errorf("pageNumber = %v", got)
	}
}

func pad4(n int) string {
	s := "000" + itoa(n)
	return s[len(s)-4:]
}

func TestScanResolutions(t *testing.T) {
	t.Parallel()
	list := `page   num  type   width height color comp bpc  enc interp  object ID x-ppi y-ppi size ratio
--------------------------------------------------------------------------------------------
   1     0 image    1700  2200  gray    1   8  jpeg   no         7  0   200   200  554K  15%
   1     1 smask     100   100  gray    1   8  image  no         8  0   600   600  1K    1%
   2     2 image     934   261  index   1   8  image  yes        9  0    93    93 33.7K  14%
   2     3 image     900   900  rgb     3   8  jpeg   no        10  0   240   180  100K  4%
`
	got := scanResolutions(list)
	if len(got) != 2 || got[1] != 200 || got[2] != 180 {
		t.Errorf("scanResolutions = %v, want map[1:200 2:180] (masks skipped, the smaller ppi, the finest image)", got)
	}
}

// TestOCRResolutions reads the resolutions through the sandboxed pdfimages: testJournalParser.pdf
// has figures of 200 to 248 dpi on some pages and none on pages 1, 6, 9 and 10.
func TestOCRResolutions(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdfinfo", "pdftoppm")
	r := &converter.Runner{Dir: t.TempDir()}
	path, err := r.Stage(convertertest.File(t, "testJournalParser.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := PageCount(t.Context(), r, path)
	if err != nil {
		t.Fatal(err)
	}
	got := ocrResolutions(t.Context(), r, path, n)
	if want := []int{300, 239, 248, 200, 200, 300, 200, 200, 300, 300}; !slices.Equal(got, want) {
		t.Errorf("ocrResolutions = %v, want %v", got, want)
	}
}
