package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelativeDataDir runs the README's main command as written — the default data dir,
// ./sluice-data, a relative path — on files whose converters run tools in their task's
// directory (pdftotext writes a file there; LibreOffice keeps its profile there). A relative
// path handed to such a tool resolves against the wrong directory: every one of them failed.
func TestRelativeDataDir(t *testing.T) {
	skipWithoutTools(t, []string{"pdftotext", "soffice"})
	corpus, _ := loadCorpus(t)
	work := t.TempDir()
	files := []string{"testJournalParser.pdf", "testWORD_various.docx"}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(corpus, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := runSluice(t.Context(), append([]string{"ingest"}, files...)...)
	cmd.Dir = work // no --data: ./sluice-data
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ingest: %v\n%s", err, tail(out))
	}
	if sum := summaryOf(out); !strings.Contains(sum, ": 2 documents, 0 errors") {
		t.Fatalf("summary %q, want 2 documents and no errors\n%s", sum, tail(out))
	}
	if _, err := os.Stat(filepath.Join(work, "sluice-data", "sluice.db")); err != nil {
		t.Errorf("the default data dir was not used: %v", err)
	}
}
