package office

import (
	"os"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/action/pdf"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

func TestCorpus(t *testing.T) {
	t.Parallel()
	exp := convertertest.Expectations(t)
	// One action, one job: the documents share a warm converter, as they would in the engine.
	a := New()
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	files := []string{
		"testWORD_various.docx", "testWORD_various.doc", "testEXCEL.xlsx", "testEXCEL.xls",
		"testPPT_various.pptx", "testPPT.ppt", "LibreOfficeWriter_odt_1.3.odt",
		"LibreOfficeCalc_ods_1.3.ods", "LibreOfficeImpress_odp_1.3.odp", "testRTFVarious.rtf",
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			convertertest.RequireTools(t, "soffice", "pdfinfo", "pdftotext", "pdftoppm")
			e := exp[name]
			// Like the engine, try again after a transient failure (LibreOffice, ten at once on
			// a loaded machine, has crashed on start-up); a permanent error fails at once.
			var rec *actiontest.Recorder
			for attempt := 1; ; attempt++ {
				data, err := os.ReadFile(convertertest.File(t, name))
				if err != nil {
					t.Fatal(err)
				}
				task := sharedTask(t, base, 1, name, e.MIME, data)
				rec = &actiontest.Recorder{}
				err = a.Run(t.Context(), task, rec)
				if err == nil {
					break
				}
				if action.IsPermanent(err) || attempt == 3 {
					t.Fatalf("run (attempt %d): %v", attempt, err)
				}
				t.Logf("attempt %d failed, retrying as the engine would: %v", attempt, err)
			}
			if len(rec.Children) != 1 {
				t.Fatalf("%d children, want 1", len(rec.Children))
			}
			c := rec.Children[0]
			if c.Name != name || c.ContentType != "application/pdf" || c.Text != nil {
				t.Fatalf("child %q %q text set %v", c.Name, c.ContentType, c.Text != nil)
			}
			// The workflow routes the child to pdf; do the same here.
			prec := &actiontest.Recorder{}
			ptask := actiontest.NewTask(t, c.Name, c.ContentType, c.Data, nil, nil)
			if err := pdf.New().Run(t.Context(), ptask, prec); err != nil {
				t.Fatalf("pdf of child: %v", err)
			}
			convertertest.CheckPhrases(t, *prec.Text, e.Phrases)
			convertertest.CheckThumbnail(t, prec.Thumbnail, prec.ThumbnailType)
		})
	}
}

func TestPasswordProtected(t *testing.T) {
	t.Parallel()
	task := actiontest.NewFileTask(t, convertertest.File(t, "testWORD_protected_passtika.docx"), "application/encrypted", nil, nil)
	a := New()
	t.Cleanup(a.Close)
	err := a.Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || err.Error() != "password-protected" {
		t.Fatalf("err = %v, want permanent password-protected", err)
	}
}

func TestCorrupt(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "soffice")
	// A zip that claims to be a document but is not.
	data, err := os.ReadFile(convertertest.File(t, "test-zip-of-zip.zip"))
	if err != nil {
		t.Fatal(err)
	}
	task := actiontest.NewTask(t, "broken.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", data, nil, nil)
	a := New()
	t.Cleanup(a.Close)
	err = a.Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || !strings.HasPrefix(err.Error(), "office conversion: ") {
		t.Fatalf("err = %v, want a permanent office conversion error", err)
	}
	t.Logf("error: %v", err)
}

func TestExtension(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, ct, file, want string }{
		{name: "by type", ct: "application/msword", file: "x", want: ".doc"},
		{name: "type with params", ct: "application/rtf; charset=x", file: "x", want: ".rtf"},
		{name: "by name", ct: "application/x-ole-storage", file: "a/B.XLS", want: ".xls"},
		{name: "other name", ct: "application/encrypted", file: "t.dot", want: ".dot"},
		{name: "unknown", ct: "application/octet-stream", file: "x.bin", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Extension(tt.ct, tt.file); got != tt.want {
				t.Errorf("Extension(%q, %q) = %q, want %q", tt.ct, tt.file, got, tt.want)
			}
		})
	}
}
