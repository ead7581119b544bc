package text

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

// TestRenderLatinWithoutEmbeddedFont: text whose every character is in WinAnsiEncoding is set
// in the standard Courier font, embedding no font, so a page of 1 KB of text is a PDF of about
// the text's size (13 KB with the embedded font subset); poppler reads the same text back, with
// the characters PDF strings escape and cp1252's own. Text outside it still embeds its fonts.
func TestRenderLatinWithoutEmbeddedFont(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdftotext")
	r := &Renderer{}
	latin := "Café (naïve) \\ back-slash — “quotes” €5 ½\n\tindented\n" + strings.Repeat("lorem ipsum dolor sit amet ", 35)
	pdf, err := r.Render(latin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(pdf, []byte("/FontFile")) || !bytes.Contains(pdf, []byte("/BaseFont /Courier")) {
		t.Errorf("Latin text: want Courier, no embedded font")
	}
	if len(pdf) > 2000 {
		t.Errorf("Latin PDF of %d bytes for %d bytes of text, want at most 2,000", len(pdf), len(latin))
	}
	got := pdfText(t, pdf)
	// pdftotext guesses spaces from the glyphs' positions: compare without them.
	squeeze := func(s string) string { return strings.ReplaceAll(s, " ", "") }
	for _, want := range []string{"Café (naïve) \\ back-slash — “quotes” €5 ½\nindented", "lorem ipsum dolor sit amet lorem"} {
		if !strings.Contains(squeeze(got), squeeze(want)) {
			t.Errorf("pdftotext lacks %q in %q", want, got[:min(len(got), 300)])
		}
	}
	// One wrapped line per 96 columns: 945 characters make 10 lines, as the embedded layout does.
	if n := strings.Count(strings.TrimSpace(got[strings.Index(got, "lorem"):]), "\n"); n != 9 {
		t.Errorf("%d line breaks in the wrapped paragraph, want 9", n)
	}
	other, err := r.Render("Привет, мир")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(other, []byte("/FontFile2")) || !strings.Contains(pdfText(t, other), "Привет, мир") {
		t.Errorf("Cyrillic text: want an embedded font and the text back")
	}
}

// TestRenderLatinPages: the Courier PDF breaks pages where the embedded one does, 69 lines each.
func TestRenderLatinPages(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdftotext")
	pdf, err := (&Renderer{}).Render(strings.Repeat("line (x)\n", 139))
	if err != nil {
		t.Fatal(err)
	}
	got := pdfText(t, pdf)
	if n := strings.Count(got, "\f"); n != 3 {
		t.Errorf("%d pages, want 3", n)
	}
	if n := strings.Count(got, "line (x)"); n != 139 {
		t.Errorf("%d lines read back, want 139", n)
	}
}
