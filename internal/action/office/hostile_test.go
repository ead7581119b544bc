package office

import (
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

// TestLinkedImages converts .docx and .odt documents whose images are linked, not embedded,
// from the loopback canary server and from a local file: LibreOffice must fetch neither, and
// neither image may end up in the PDF.
func TestLinkedImages(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "soffice", "pdftotext", "pdfimages", "bwrap")
	c := convertertest.NewCanary(t)
	// One action, one job: the documents share a warm converter, as they would in the engine,
	// and none of them may fetch its image there either.
	a := New()
	base := t.TempDir()
	t.Cleanup(a.Close) // before the directory's removal: cleanups run last first
	docx := "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	odt := "application/vnd.oasis.opendocument.text"
	for _, tt := range []struct {
		name, ct string
		data     []byte
	}{
		{"http.docx", docx, convertertest.LinkedDOCX(t, c.URL+"/linked.png")},
		{"file.docx", docx, convertertest.LinkedDOCX(t, "file://"+c.Image)},
		{"http.odt", odt, convertertest.LinkedODT(t, c.URL+"/linked.png")},
		{"file.odt", odt, convertertest.LinkedODT(t, "file://"+c.Image)},
		{"path.odt", odt, convertertest.LinkedODT(t, c.Image)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task := sharedTask(t, base, 1, tt.name, tt.ct, tt.data)
			rec := &actiontest.Recorder{}
			if err := a.Run(t.Context(), task, rec); err != nil {
				t.Fatalf("run: %v", err)
			}
			pdf := rec.Children[0].Data
			if txt := convertertest.PDFText(t, pdf); !strings.Contains(txt, "Linked image document") {
				t.Errorf("the PDF's text %q lacks the document's own words", txt)
			}
			c.CheckNoLeak(t, tt.name, pdf)
		})
	}
}
