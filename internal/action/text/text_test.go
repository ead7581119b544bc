package text

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
)

func TestCorpus(t *testing.T) {
	t.Parallel()
	exp := convertertest.Expectations(t)
	a := New(nil)
	tests := []struct{ file, ct, charset string }{
		{"testTXTNonASCIIUTF8.txt", "text/plain", "utf-8"},
		{"candide-utf-16le.txt", "text/plain", "utf-16le"},
		{"candide-windows-1252.txt", "text/plain", "windows-1252"},
		{"rashomon-shift-jis.txt", "text/plain", "shift_jis"},
		{"testCSV.csv", "text/csv", "utf-8"},
		{"metadata-keys-3x.json", "application/json", "utf-8"},
		{"testXML.xml", "text/xml", "utf-8"},
		{"testMARKDOWN.md", "text/markdown", "utf-8"},
		{"file10_permahang.txt", "inode/x-empty", "utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			convertertest.RequireTools(t, "pdftoppm", "pdftotext")
			task := actiontest.NewFileTask(t, convertertest.File(t, tt.file), tt.ct, nil, nil)
			rec := &actiontest.Recorder{}
			if err := a.Run(t.Context(), task, rec); err != nil {
				t.Fatalf("run: %v", err)
			}
			if len(rec.Children) != 1 {
				t.Fatalf("%d children", len(rec.Children))
			}
			c := rec.Children[0]
			if c.Name != tt.file || c.ContentType != "application/pdf" || c.Text == nil {
				t.Fatalf("child %q %q text set %v", c.Name, c.ContentType, c.Text != nil)
			}
			if c.Metadata["charset"] != tt.charset {
				t.Errorf("charset = %v, want %s", c.Metadata["charset"], tt.charset)
			}
			convertertest.CheckPhrases(t, *c.Text, exp[tt.file].Phrases)
			convertertest.CheckThumbnail(t, c.ThumbnailData, c.ThumbnailType)
			if !bytes.HasPrefix(c.Data, []byte("%PDF-")) {
				t.Errorf("child blob is not a PDF")
			}
		})
	}
}

func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.pdf")
	if err := os.WriteFile(p, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", p, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return string(out)
}

func TestRenderLayout(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdftotext")
	r := &Renderer{}
	long := strings.Repeat("x", 250)
	text := "a\tb\n" + long + "\n日本語 — Привет \U0001F600 \u0378\n" + strings.Repeat("line\n", 300)
	pdf, err := r.Render(text)
	if err != nil {
		t.Fatal(err)
	}
	got := pdfText(t, pdf)
	// 1 + 3 (250 columns wrapped at 96) + 1 + 300 lines at 69 per page.
	if n := strings.Count(got, "\f"); n != 5 {
		t.Errorf("%d pages, want 5", n)
	}
	if !strings.Contains(got, "Привет") || !strings.Contains(strings.ReplaceAll(got, " ", ""), "日本語") {
		t.Errorf("missing scripts in %q", got[:min(len(got), 600)])
	}
	if strings.Count(got, "x") != 250 {
		t.Errorf("wrapped line lost characters")
	}
}

func TestRenderEmptyAndControls(t *testing.T) {
	t.Parallel()
	r := &Renderer{}
	for _, s := range []string{"", "\x00\x01\r\f", "\uFFFD"} {
		pdf, err := r.Render(s)
		if err != nil || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
			t.Errorf("Render(%q): %v", s, err)
		}
	}
}

func TestRenderNoFonts(t *testing.T) {
	t.Parallel()
	r := &Renderer{Fonts: []string{filepath.Join(t.TempDir(), "missing.ttf")}}
	if _, err := r.Render("x"); err == nil || !strings.Contains(err.Error(), "no usable TrueType font") {
		t.Errorf("err = %v", err)
	}
}

func TestRenderConcurrent(t *testing.T) {
	t.Parallel()
	r := &Renderer{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Render(strings.Repeat("concurrent é 日本 ", 50+i))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func BenchmarkRenderSmall(b *testing.B) {
	r := &Renderer{}
	text := strings.Repeat("A small text file, like most of a 10,000-file ingest. café\n", 20)
	if _, err := r.Render(text); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(text); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRendersBounded checks that the action renders no more files at once than its render
// tokens, however many of its tasks run: a task past the bound waits for a token before it
// reads its file, and a task canceled while it waits returns without reading it.
func TestRendersBounded(t *testing.T) {
	t.Parallel()
	a := New(nil)
	a.renders = make(chan struct{}, 2)
	var opened atomic.Int32
	entered := make(chan struct{}, 3)
	release := make(chan struct{})
	task := func(name string) *action.Task {
		tk := actiontest.NewTask(t, name, "text/plain", []byte("some text of "+name), nil, nil)
		tk.OpenBlob = func(ctx context.Context) (io.ReadCloser, error) {
			opened.Add(1)
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return io.NopCloser(strings.NewReader("some text of " + name)), nil
		}
		return tk
	}
	type ran struct {
		rec *actiontest.Recorder
		err error
	}
	done := make(chan ran, 2)
	for _, name := range []string{"a.txt", "b.txt"} {
		go func() {
			rec := &actiontest.Recorder{}
			done <- ran{rec, a.Run(t.Context(), task(name), rec)}
		}()
	}
	<-entered
	<-entered // both tokens held, each by a task reading its file
	ctx, cancel := context.WithCancel(t.Context())
	third := make(chan error, 1)
	go func() { third <- a.Run(ctx, task("c.txt"), &actiontest.Recorder{}) }()
	cancel()
	if err := <-third; !errors.Is(err, context.Canceled) {
		t.Fatalf("the third task, canceled while the tokens were held: err = %v, want context.Canceled", err)
	}
	if n := opened.Load(); n != 2 {
		t.Fatalf("%d tasks read their files with 2 render tokens, want 2", n)
	}
	close(release)
	for range 2 {
		r := <-done
		if r.err != nil || len(r.rec.Children) != 1 {
			t.Fatalf("a task holding a token: err %v, %d children", r.err, len(r.rec.Children))
		}
	}
	if len(a.renders) != 0 {
		t.Fatalf("%d render tokens still held after every task returned", len(a.renders))
	}
}

// TestLayoutFirstLines checks that a layout cut at maxLines is the whole layout's first lines,
// and that a thumbnail of a large text lays out no more than its page: it allocated 120 MB for
// 2 MB of text when it laid out all of it. Not parallel: it reads the process's allocations.
func TestLayoutFirstLines(t *testing.T) {
	r := &Renderer{}
	if err := r.load(); err != nil {
		t.Skip(err)
	}
	var sb strings.Builder
	for i := range 400 {
		fmt.Fprintf(&sb, "line %d\twith a tab, then words enough to wrap past the page's width at least once: %s\n", i, strings.Repeat("mot ", i%40))
	}
	text := sb.String()
	all := r.layout(text, 0)
	if len(all) <= 2*linesPerPage {
		t.Fatalf("%d lines: the text must fill more than two pages", len(all))
	}
	first := r.layout(text, linesPerPage)
	if len(first) != linesPerPage {
		t.Fatalf("layout cut at %d lines made %d", linesPerPage, len(first))
	}
	for i := range first {
		if !slices.Equal(first[i], all[i]) {
			t.Fatalf("line %d differs: %v, the whole layout's %v", i, first[i], all[i])
		}
	}
	big := strings.Repeat(text, 2<<20/len(text)+1)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if _, err := r.Thumbnail(big); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	if n := m1.TotalAlloc - m0.TotalAlloc; n > 4<<20 {
		t.Errorf("the thumbnail of %d MB of text allocated %d MB, want at most 4", len(big)>>20, n>>20)
	}
}
