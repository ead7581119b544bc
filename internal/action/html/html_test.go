package html

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/action/text"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/subprocess"
)

func TestCorpus(t *testing.T) {
	t.Parallel()
	exp := convertertest.Expectations(t)
	a := New(&text.Renderer{})
	t.Cleanup(a.Close)
	for _, tt := range []struct{ file, charset string }{
		{"testHTML_utf8.html", "utf-8"},
		{"testHTML_charset_utf16le.html", "utf-16le"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			convertertest.RequireTools(t, "chromium", "pdftoppm")
			task := actiontest.NewFileTask(t, convertertest.File(t, tt.file), "text/html", nil, nil)
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
			if c.Metadata["renderer"] != "chromium" || c.Metadata["charset"] != tt.charset {
				t.Errorf("metadata %v", c.Metadata)
			}
			if !strings.HasPrefix(string(c.Data), "%PDF-") {
				t.Error("child blob is not a PDF")
			}
			convertertest.CheckPhrases(t, *c.Text, exp[tt.file].Phrases)
			convertertest.CheckThumbnail(t, c.ThumbnailData, c.ThumbnailType)
		})
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	doc := `<!doctype html><html><head><title>The  title</title><style>p{}</style><script>var x=1</script></head>
<body><h1>Head</h1><p>One <b>bold</b>word, <i>two</i>
 lines</p><ul><li>a</li><li>b</li></ul><pre>  keep
   this</pre><table><tr><td>c1</td><td>c2</td></tr></table>x<br>y<!-- gone --></body></html>`
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := "The title\nHead\nOne boldword, two lines\na\nb\n  keep\n   this\nc1 c2\nx\ny"
	if got := Text(root); got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want, charset string
	}{
		{"meta charset", `<meta charset="windows-1251"><p>` + "\xcf\xf0\xe8\xe2\xe5\xf2", `<meta charset="windows-1251"><p>Привет`, "windows-1251"},
		{"http-equiv", `<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">` + "caf\xe9", `<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">café`, "windows-1252"},
		{"bom beats meta", "\xef\xbb\xbf<meta charset=latin1>é", "<meta charset=latin1>é", "utf-8"},
		{"no declaration", "<p>é</p>", "<p>é</p>", "utf-8"},
		{"unknown label", "<meta charset=bogus><p>é</p>", "<meta charset=bogus><p>é</p>", "utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cs := Decode([]byte(tt.in))
			if got != tt.want || cs != tt.charset {
				t.Errorf("Decode = %q, %q; want %q, %q", got, cs, tt.want, tt.charset)
			}
		})
	}
}

func TestNoNetwork(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "chromium", "pdftoppm")
	// A page whose resources point at the network still renders, quickly and without them.
	doc := `<html><body><p>offline page</p><img src="http://example.com/x.png"><script src="https://example.com/x.js"></script>
<link rel="stylesheet" href="http://93.184.216.34/x.css"></body></html>`
	task := actiontest.NewTask(t, "net.html", "text/html", []byte(doc), nil, nil)
	rec := &actiontest.Recorder{}
	a := New(nil)
	t.Cleanup(a.Close)
	if err := a.Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	c := rec.Children[0]
	if c.Metadata["renderer"] != "chromium" {
		t.Errorf("metadata %v", c.Metadata)
	}
	convertertest.CheckPhrases(t, *c.Text, []string{"offline page"})
}

func TestFallbackWithoutChromium(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdftoppm")
	a := New(nil)
	t.Cleanup(a.Close)
	a.browser = "sluice-no-such-chromium"
	task := actiontest.NewFileTask(t, convertertest.File(t, "testHTML_utf8.html"), "text/html", nil, nil)
	rec := &actiontest.Recorder{}
	if err := a.Run(t.Context(), task, rec); err != nil {
		t.Fatalf("run: %v", err)
	}
	c := rec.Children[0]
	if c.Metadata["degraded"] != true || c.Metadata["renderer"] != "text" {
		t.Errorf("metadata %v", c.Metadata)
	}
	if !strings.HasPrefix(string(c.Data), "%PDF-") {
		t.Error("child blob is not a PDF")
	}
	convertertest.CheckPhrases(t, *c.Text, convertertest.Expectations(t)["testHTML_utf8.html"].Phrases)
	convertertest.CheckThumbnail(t, c.ThumbnailData, c.ThumbnailType)
}

// TestThumbnailFailureRetried: a transient thumbnail failure (pdftoppm's output not drained
// before its WaitDelay, as on a loaded machine) fails the attempt, to be retried, instead of
// leaving the document without a thumbnail for good; a permanent one (pdftoppm refused the PDF)
// leaves it without one.
func TestThumbnailFailureRetried(t *testing.T) {
	t.Parallel()
	transient := converter.Failure("render pdf thumbnail", fmt.Errorf("wait pdftoppm: %w", exec.ErrWaitDelay))
	if skipThumbnail(transient) {
		t.Errorf("%v: skipped, want retried", transient)
	}
	permanent := converter.Failure("render pdf thumbnail", &subprocess.ExitError{Path: "pdftoppm", Code: 1, Stderr: "Syntax Error: Couldn't read xref table"})
	if !skipThumbnail(permanent) {
		t.Errorf("%v: retried, want skipped", permanent)
	}
}

// TestTruncated: an HTML page with more text than max_text_chars keeps the cap's worth and says
// so in its metadata, though its bytes were within the bound read.
func TestTruncated(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "pdftoppm")
	a := New(nil)
	t.Cleanup(a.Close)
	a.browser = "sluice-no-such-chromium"
	page := []byte("<html><body><p>" + strings.Repeat("word ", 60) + "</p></body></html>")
	for _, tc := range []struct {
		max       int
		truncated bool
	}{{100, true}, {1000, false}} {
		rec := &actiontest.Recorder{}
		if err := a.Run(t.Context(), actiontest.NewTask(t, "long.html", "text/html", page, map[string]any{"max_text_chars": tc.max}, nil), rec); err != nil {
			t.Fatal(err)
		}
		c := rec.Children[0]
		if _, ok := c.Metadata["truncated"]; ok != tc.truncated || (tc.truncated && len([]rune(*c.Text)) != tc.max) {
			t.Errorf("max_text_chars %d: %d characters, metadata %v; want truncated %v", tc.max, len([]rune(*c.Text)), c.Metadata, tc.truncated)
		}
	}
}
