package html

import (
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

// TestHostileHTML renders documents that try to read a local file (file:// iframes, objects,
// images, a meta refresh, a script redirect) or reach a loopback server (fetch, subresources,
// <base>): each PDF and text must hold nothing of the canary, and the server must get nothing.
func TestHostileHTML(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "chromium", "pdftoppm", "pdftotext", "pdfimages", "bwrap")
	c := convertertest.NewCanary(t)
	// One action: the documents go through one warm converter, one after the other.
	a := New(nil)
	t.Cleanup(a.Close)
	for name, doc := range c.HostileHTML() {
		t.Run(name, func(t *testing.T) {
			task := actiontest.NewTask(t, name, "text/html", []byte(doc), nil, nil)
			rec := &actiontest.Recorder{}
			if err := a.Run(t.Context(), task, rec); err != nil {
				t.Fatalf("run: %v", err)
			}
			ch := rec.Children[0]
			if ch.Metadata["renderer"] != "chromium" {
				t.Fatalf("not rendered by chromium: %v", ch.Metadata)
			}
			word := strings.TrimSuffix(name, ".html") + " page"
			// The control: the document's own words are in the PDF, so a PDF without the
			// canary is a real rendering, not an empty page.
			if txt := convertertest.PDFText(t, ch.Data); !strings.Contains(txt, word) {
				t.Errorf("the PDF's text %q lacks %q", txt, word)
			}
			if strings.Contains(convertertest.PDFText(t, ch.Data), "script ran") {
				t.Error("a script ran")
			}
			c.CheckNoLeak(t, name, ch.Data, *ch.Text)
		})
	}
}

// TestHostileHTMLRequestsCounted checks the refused requests are recorded on the document.
func TestHostileHTMLRequestsCounted(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "chromium", "pdftoppm", "bwrap")
	c := convertertest.NewCanary(t)
	doc := `<html><body><p>x</p><img src="` + c.URL + `/a.png"><img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="></body></html>`
	task := actiontest.NewTask(t, "img.html", "text/html", []byte(doc), nil, nil)
	rec := &actiontest.Recorder{}
	a := New(nil)
	t.Cleanup(a.Close)
	if err := a.Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n, _ := rec.Children[0].Metadata["blocked_requests"].(int); n < 1 {
		t.Errorf("blocked_requests = %v, want ≥ 1", rec.Children[0].Metadata["blocked_requests"])
	}
	if h := c.Hits(); len(h) > 0 {
		t.Errorf("the canary server was reached: %v", h)
	}
}
