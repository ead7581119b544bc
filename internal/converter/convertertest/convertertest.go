// Package convertertest helps test converter actions against the shared corpus: it finds the
// corpus, reads its expected.json, checks thumbnails and decides whether a missing tool skips a
// test or fails it (SLUICE_TEST_REQUIRE_TOOLS=1).
package convertertest

import (
	"bytes"
	"encoding/json"
	"image"
	_ "image/jpeg" // thumbnails may be JPEG
	_ "image/png"  // or PNG
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/converter"
)

// Expectation is one entry of the corpus's expected.json.
type Expectation struct {
	File          string   `json:"file"`
	MIME          string   `json:"mime"`
	Expect        string   `json:"expect"`
	MinDocuments  int      `json:"min_documents"`
	Phrases       []string `json:"phrases"`
	ErrorContains *string  `json:"error_contains"`
	OCRPhrases    []string `json:"ocr_phrases"`
}

// CorpusDir returns the directory of corpus files, looking upwards from the package directory
// for shared/corpus/files. It fails the test when the corpus cannot be found.
func CorpusDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		c := filepath.Join(dir, "shared", "corpus", "files")
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("corpus not found: no shared/corpus/files above the package directory")
		}
		dir = parent
	}
}

// File returns the path of a corpus file.
func File(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(CorpusDir(t), name)
}

// Expectations returns the corpus's expected.json entries keyed by file name.
func Expectations(t testing.TB) map[string]Expectation {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(CorpusDir(t)), "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list []Expectation
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	m := make(map[string]Expectation, len(list))
	for _, e := range list {
		m[e.File] = e
	}
	return m
}

// RequireTools skips the test when one of the tools is not installed, or fails it when the
// environment sets SLUICE_TEST_REQUIRE_TOOLS=1 (as CI does): a skipped converter test must not
// pass silently there.
func RequireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if converter.Installed(tool) {
			continue
		}
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is not installed and SLUICE_TEST_REQUIRE_TOOLS=1: %v", tool, converter.NotInstalledError(tool))
		}
		t.Skipf("%s is not installed", tool)
	}
}

// Normalize collapses runs of whitespace to one space, for phrase matching.
func Normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// CheckPhrases fails the test for each phrase that does not occur in text (whitespace-normalised).
func CheckPhrases(t testing.TB, text string, phrases []string) {
	t.Helper()
	norm := Normalize(text)
	for _, p := range phrases {
		if !strings.Contains(norm, Normalize(p)) {
			t.Errorf("text does not contain %q; text starts %q", p, norm[:min(len(norm), 400)])
		}
	}
}

// CheckThumbnail fails the test unless data is a PNG or JPEG image of the given content type
// whose longest side is at most [converter.ThumbnailSize].
func CheckThumbnail(t testing.TB, data []byte, contentType string) {
	t.Helper()
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("thumbnail (%d bytes, %s) does not decode: %v", len(data), contentType, err)
	}
	if "image/"+format != contentType {
		t.Errorf("thumbnail is %s but labelled %s", format, contentType)
	}
	if cfg.Width > converter.ThumbnailSize || cfg.Height > converter.ThumbnailSize || cfg.Width == 0 || cfg.Height == 0 {
		t.Errorf("thumbnail is %dx%d, want longest side in 1..%d", cfg.Width, cfg.Height, converter.ThumbnailSize)
	}
}
