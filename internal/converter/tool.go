// Package converter knows the external programs Sluice's document actions run — poppler,
// qpdf, LibreOffice, tesseract, libvips, Chromium, msgconvert — and runs them the same way
// everywhere: through [subprocess] with a timeout, a memory limit, a private working
// directory and heartbeats, turning "not installed", "timed out" and "out of memory" into
// specific errors. [Doctor] reports which tools are present for `sluice doctor`.
package converter

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// Tool describes one external program.
type Tool struct {
	// Name is how actions refer to the tool; it is also the binary looked up in PATH.
	Name string
	// VersionArgs print the tool's version (on stdout or stderr); nil means ask dpkg.
	VersionArgs []string
	// Packages are the Debian packages that provide the tool.
	Packages []string
	// Purpose is what Sluice uses it for, as in "office conversion needs LibreOffice".
	Purpose string
	// Product is the name users know the tool by.
	Product string
	// Impact says which content types are unhandled or degraded without it.
	Impact string
}

var versionRE = regexp.MustCompile(`\d+\.\d+`)

const (
	popplerImpact = "application/pdf (and office, text and html thumbnails) is unhandled"
)

// Tools returns the registry of external tools, in a stable order.
func Tools() []Tool {
	office := []string{"libreoffice-writer-nogui", "libreoffice-calc-nogui", "libreoffice-impress-nogui"}
	return []Tool{
		{Name: "pdfinfo", VersionArgs: []string{"-v"}, Packages: []string{"poppler-utils"},
			Purpose: "pdf reading", Product: "poppler-utils (pdfinfo)", Impact: popplerImpact},
		{Name: "pdftotext", VersionArgs: []string{"-v"}, Packages: []string{"poppler-utils", "poppler-data"},
			Purpose: "pdf text extraction", Product: "poppler-utils (pdftotext)", Impact: popplerImpact},
		{Name: "pdftoppm", VersionArgs: []string{"-v"}, Packages: []string{"poppler-utils"},
			Purpose: "pdf rendering", Product: "poppler-utils (pdftoppm)",
			Impact: "no thumbnails for pdf, office, text and html; no OCR of pdf pages"},
		{Name: "qpdf", VersionArgs: []string{"--version"}, Packages: []string{"qpdf"},
			Purpose: "pdf page splitting", Product: "qpdf",
			Impact: "split_by_page falls back to pdfseparate (poppler-utils)"},
		{Name: "soffice", VersionArgs: []string{"--version"}, Packages: office,
			Purpose: "office conversion", Product: "LibreOffice",
			Impact: "Word, Excel, PowerPoint, OpenDocument, RTF and other office types are unhandled"},
		{Name: "tesseract", VersionArgs: []string{"--version"}, Packages: []string{"tesseract-ocr", "tesseract-ocr-eng"},
			Purpose: "ocr", Product: "tesseract",
			Impact: "the ocr option fails: scanned pdfs and images get no text"},
		{Name: "vipsthumbnail", VersionArgs: []string{"--vips-version"}, Packages: []string{"libvips-tools"},
			Purpose: "image thumbnails", Product: "libvips (vipsthumbnail)",
			Impact: "image thumbnails fall back to slower pure-Go resizing; heic and odd tiffs are unhandled"},
		{Name: "vips", VersionArgs: []string{"--version"}, Packages: []string{"libvips-tools"},
			Purpose: "image conversion", Product: "libvips (vips)",
			Impact: "images fall back to pure-Go decoders: only the first tiff page, no heic"},
		{Name: "chromium", VersionArgs: []string{"--version"}, Packages: []string{"chromium"},
			Purpose: "html rendering", Product: "Chromium",
			Impact: "text/html is rendered as plain text (metadata degraded: true)"},
		{Name: "bwrap", VersionArgs: []string{"--version"}, Packages: []string{"bubblewrap"},
			Purpose: "converter sandbox", Product: "bubblewrap",
			Impact: "every external converter is refused (they run only sandboxed): PDFs, office files, HTML, images and .msg are unhandled"},
		{Name: "exiftool", VersionArgs: []string{"-ver"}, Packages: []string{"libimage-exiftool-perl"},
			Purpose: "embedded metadata extraction", Product: "ExifTool",
			Impact: "the objects workflow's ExtractExifMetadata fails its file sets"},
		{Name: "ffprobe", VersionArgs: []string{"-version"}, Packages: []string{"ffmpeg"},
			Purpose: "audio and video metadata", Product: "FFmpeg (ffprobe)",
			Impact: "the objects workflow's ExtractMediaMetadata fails its audio and video file sets"},
		{Name: "msgconvert", Packages: []string{"libemail-outlook-message-perl", "libemail-address-perl"},
			Purpose: "outlook message conversion", Product: "msgconvert",
			Impact: "application/vnd.ms-outlook (.msg) is unhandled"},
	}
}

// Lookup returns the registered tool with the given name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// InstallHint returns the command that installs the tool, such as
// "apt-get install poppler-utils".
func (t Tool) InstallHint() string {
	return "apt-get install " + strings.Join(t.Packages, " ")
}

// NotInstalledError returns the permanent error an action reports when tool is missing, such as
// "office conversion needs LibreOffice: apt-get install libreoffice-writer-nogui …".
func NotInstalledError(tool string) error {
	t, ok := Lookup(tool)
	if !ok {
		return action.Permanentf("%s is not installed", tool)
	}
	return action.Permanentf("%s needs %s: %s", t.Purpose, t.Product, t.InstallHint())
}

// Installed reports whether tool's binary is in PATH.
func Installed(tool string) bool {
	_, err := exec.LookPath(tool)
	return err == nil
}

// ToolStatus is one row of [Doctor]'s report.
type ToolStatus struct {
	Name      string `json:"name"`
	Path      string `json:"path,omitempty"`
	Version   string `json:"version,omitempty"`
	Package   string `json:"package"`
	Installed bool   `json:"installed"`
	// Impact says what is unhandled or degraded while the tool is missing.
	Impact string `json:"impact"`
}

// Doctor checks every tool in [Tools]: whether it is installed, where, and its version. It runs
// each tool's version command with a short timeout; a tool that does not answer is still reported
// as installed, with an empty version.
func Doctor(ctx context.Context) []ToolStatus {
	tools := Tools()
	out := make([]ToolStatus, 0, len(tools))
	home, err := os.MkdirTemp("", "sluice-doctor-")
	if err == nil {
		defer os.RemoveAll(home)
	}
	for _, t := range tools {
		st := ToolStatus{Name: t.Name, Package: strings.Join(t.Packages, " "), Impact: t.Impact}
		if p, err := exec.LookPath(t.Name); err == nil {
			st.Path, st.Installed = p, true
			st.Version = version(ctx, t, home)
		}
		out = append(out, st)
	}
	return out
}

func version(ctx context.Context, t Tool, home string) string {
	var buf bytes.Buffer
	c := subprocess.Cmd{Path: t.Name, Args: t.VersionArgs, Dir: home, Stdout: &buf, Stderr: &buf, Timeout: 15 * time.Second}
	if t.VersionArgs == nil {
		c.Path, c.Args = "dpkg-query", []string{"-W", "-f=${Version}", t.Packages[0]}
	}
	_ = subprocess.Run(ctx, c) // poppler's -v exits non-zero on some versions; the text is what counts
	// Wrapper scripts may complain first (Debian's chromium does): take the first line that
	// looks like a version.
	for _, line := range strings.Split(buf.String(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "/") && versionRE.MatchString(line) {
			return line
		}
	}
	return ""
}

// String returns the tool's name and product, as in "soffice (LibreOffice)".
func (t Tool) String() string { return fmt.Sprintf("%s (%s)", t.Name, t.Product) }
