// Package office provides the "office" action of the documents workflow: it converts Word,
// Excel, PowerPoint, OpenDocument, RTF and the other formats LibreOffice imports to PDF with
// headless LibreOffice and creates one child holding the PDF, which the workflow routes on to the
// "pdf" action.
package office

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/warmpool"
)

// Name is the action's name in workflows.
const Name = "office"

// Action is the "office" action. It converts with warm converters (see warm.go) and falls back
// to a cold LibreOffice of its own for a document no warm converter could convert. The zero
// value is ready to use and safe for concurrent use; it must not be copied after first use.
type Action struct {
	pool pool
}

// coldSlots bounds the cold conversions running at once: each starts its own LibreOffice
// (about 2 s and 200 MB), and two use a 2-CPU machine fully without thrashing.
var coldSlots = make(chan struct{}, 2)

// New returns the "office" action.
func New() *Action { return &Action{} }

// Close retires the action's warm converters and waits until their sandboxes are gone. A later
// Run starts new ones.
func (a *Action) Close() { a.pool.Close() }

// Spec describes the action.
func (a *Action) Spec() action.Spec {
	w := 0.75
	return action.Spec{
		Name:     Name,
		Version:  "4", // 2: sandboxed, links never updated nor loaded; 3: dates and /ID normalised; 4: Type 1 font UniqueIDs per document
		Doc:      "Convert an office document to PDF with headless LibreOffice; the PDF becomes one child routed on to pdf.",
		Settings: typed.Settings(),
		Validate: typed.Validate,
		// Documents of a job wait together for their warm converter, which converts them in
		// batches: the more of them wait, the fewer calls. Cold conversions are bounded apart
		// (coldSlots).
		Concurrency:    2 * warmMaxBatch,
		Timeout:        10 * time.Minute,
		ProgressWeight: &w,
	}
}

// typed declares and parses the action's settings: the limits of the LibreOffice run.
var typed = settings.For(func() converter.Limits {
	return converter.Limits{Timeout: converter.DefaultTimeout, MemoryLimit: converter.DefaultMemoryLimit}
}, nil)

// Policy caches the action's effects by its input (the conversion cache).
func (a *Action) Policy() action.Policy { return action.Policy{Cacheable: true} }

// Run converts one office document. Password-protected documents fail with the permanent error
// "password-protected"; a missing LibreOffice fails with [converter.NotInstalledError].
func (a *Action) Run(ctx context.Context, t *action.Task, out action.Output) error {
	cfg, err := typed.Run(t.With)
	if err != nil {
		return err
	}
	src, err := t.BlobPath(ctx)
	if err != nil {
		return fmt.Errorf("get office blob: %w", err)
	}
	if protected, err := isEncrypted(src); err != nil {
		return fmt.Errorf("inspect office file: %w", err)
	} else if protected {
		return action.Permanentf("password-protected")
	}
	ext := Extension(t.Item.ContentType, t.Item.Name)
	if ext == "" {
		return action.Permanentf("office conversion: no known office format for %q (%s)", t.Item.Name, t.Item.ContentType)
	}
	out.Progress(0.1)
	// The job's warm converter, or its next if that one retires before it takes the document.
	pdf, err := warmpool.Offer(func() (*warm, bool) {
		w := a.pool.get(ctx, t.JobID, cfg, tempBase(t.TempDir))
		return w, w != nil
	}, func(w *warm) ([]byte, error) { return w.convert(ctx, src, ext, out.Heartbeat) })
	if err == nil {
		return a.child(ctx, t, out, pdf)
	}
	if !errors.Is(err, errNoWarm) && !errors.Is(err, warmpool.ErrRetry) {
		return err
	}
	select {
	case coldSlots <- struct{}{}:
		defer func() { <-coldSlots }()
	case <-ctx.Done():
		return ctx.Err()
	}
	inDir, outDir := filepath.Join(t.TempDir, "lo-in"), filepath.Join(t.TempDir, "lo-out")
	for _, d := range []string{inDir, outDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// LibreOffice picks its import filter by extension, so give the file the right one. A fixed
	// base name keeps odd names (leading dashes, newlines) away from its command line.
	in := filepath.Join(inDir, "document"+ext)
	if err := converter.CopyFile(src, in); err != nil {
		return fmt.Errorf("stage office file: %w", err)
	}
	// A private profile per task: LibreOffice runs sharing one profile fail at random. It
	// starts with the settings that keep a document from reaching out (see hardening).
	profileDir := filepath.Join(t.TempDir, "lo-profile")
	if err := writeProfile(profileDir); err != nil {
		return err
	}
	profile := url.URL{Scheme: "file", Path: profileDir}
	r := &converter.Runner{Limits: cfg, Dir: t.TempDir, Heartbeat: out.Heartbeat}
	msg, err := r.Combined(ctx, "soffice", 64<<10, "--headless", "--norestore", "--nolockcheck",
		"-env:UserInstallation="+profile.String(), "--convert-to", "pdf", "--outdir", outDir, in)
	if err != nil {
		return converter.Failure("office conversion", err)
	}
	pdfPath := filepath.Join(outDir, "document.pdf")
	pdf, err = readPDF(pdfPath)
	if err != nil {
		text := converter.CleanMessage(string(msg))
		if strings.Contains(text, "could not be loaded") {
			return action.Permanentf("office conversion: libreoffice could not load the file (corrupt, password-protected or not really %s)", ext)
		}
		if text == "" {
			text = "no pdf written"
		}
		return action.Permanentf("office conversion: %s", text)
	}
	return a.child(ctx, t, out, pdf)
}

// tempBase returns the directory warm converters are made in: the one holding the task's
// attempt dir (an engine's <data dir>/tmp, emptied when an engine opens the data dir), or ""
// for the system's temporary directory.
func tempBase(taskDir string) string {
	if taskDir == "" {
		return ""
	}
	return filepath.Dir(taskDir)
}

// child creates the child holding pdf.
func (a *Action) child(ctx context.Context, t *action.Task, out action.Output, pdf []byte) error {
	out.Progress(0.9)
	return out.CreateChild(ctx, action.Child{
		Name:        t.Item.Name,
		ContentType: "application/pdf",
		Metadata:    map[string]any{"converted_from": t.Item.ContentType},
		Blob:        bytes.NewReader(converter.NormalizePDF(pdf)),
	})
}

// maxPDF caps the PDF LibreOffice may write.
const maxPDF = 1 << 30

// readPDF reads the PDF LibreOffice wrote.
func readPDF(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readPDFFile(f)
}

// readPDFFile reads the PDF LibreOffice wrote from f.
func readPDFFile(f *os.File) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, maxPDF+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPDF {
		return nil, action.Permanentf("office conversion: the pdf is larger than %d bytes", maxPDF)
	}
	return b, nil
}

// hardening is the LibreOffice profile every conversion starts with: links (linked images,
// OLE links, DDE, external data) are never updated, images linked from a document are not
// loaded (BlockUntrustedRefererLinks, made for headless conversion of untrusted files),
// spreadsheets are never recalculated on load (so WEBSERVICE() and friends do not run), and
// macros never run. LibreOffice also runs in the converter sandbox, with no network and no file
// but its own: these settings are the first wall, the sandbox the second.
const hardening = `<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Writer/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>2</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>2</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" oor:op="fuse"><value>1</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="ODFRecalcMode" oor:op="fuse"><value>1</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseOpenCL" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
`

// Extension returns the file extension (with the dot) LibreOffice needs to import a document of
// the given content type, falling back to the extension of name when it is an office one. It
// returns "" when neither says which office format the file is.
func Extension(contentType, name string) string {
	ct := strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	if ext, ok := extensions[ct]; ok {
		return ext
	}
	ext := strings.ToLower(filepath.Ext(name))
	for _, e := range extensions {
		if e == ext {
			return ext
		}
	}
	if _, ok := otherExtensions[ext]; ok {
		return ext
	}
	return ""
}

// extensions maps office content types to the extension LibreOffice imports them by.
var extensions = map[string]string{
	"application/msword": ".doc",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   ".docx",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.template":   ".dotx",
	"application/vnd.ms-word.document.macroenabled.12":                          ".docm",
	"application/vnd.ms-word.template.macroenabled.12":                          ".dotm",
	"application/vnd.ms-excel":                                                  ".xls",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         ".xlsx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.template":      ".xltx",
	"application/vnd.ms-excel.sheet.macroenabled.12":                            ".xlsm",
	"application/vnd.ms-excel.sheet.binary.macroenabled.12":                     ".xlsb",
	"application/vnd.ms-powerpoint":                                             ".ppt",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
	"application/vnd.openxmlformats-officedocument.presentationml.slideshow":    ".ppsx",
	"application/vnd.openxmlformats-officedocument.presentationml.template":     ".potx",
	"application/vnd.ms-powerpoint.presentation.macroenabled.12":                ".pptm",
	"application/vnd.oasis.opendocument.text":                                   ".odt",
	"application/vnd.oasis.opendocument.text-template":                          ".ott",
	"application/vnd.oasis.opendocument.text-master":                            ".odm",
	"application/vnd.oasis.opendocument.spreadsheet":                            ".ods",
	"application/vnd.oasis.opendocument.spreadsheet-template":                   ".ots",
	"application/vnd.oasis.opendocument.presentation":                           ".odp",
	"application/vnd.oasis.opendocument.presentation-template":                  ".otp",
	"application/vnd.oasis.opendocument.graphics":                               ".odg",
	"application/vnd.oasis.opendocument.formula":                                ".odf",
	"application/vnd.sun.xml.writer":                                            ".sxw",
	"application/vnd.sun.xml.calc":                                              ".sxc",
	"application/vnd.sun.xml.impress":                                           ".sxi",
	"application/vnd.sun.xml.draw":                                              ".sxd",
	"application/rtf":                                                           ".rtf",
	"text/rtf":                                                                  ".rtf",
	"application/vnd.wordperfect":                                               ".wpd",
	"application/wordperfect":                                                   ".wpd",
	"application/x-wordperfect":                                                 ".wpd",
	"application/vnd.visio":                                                     ".vsd",
	"application/vnd.ms-visio.drawing.main+xml":                                 ".vsdx",
	"application/vnd.ms-visio.drawing":                                          ".vsdx",
	"application/vnd.ms-works":                                                  ".wps",
	"application/x-mswrite":                                                     ".wri",
	"application/vnd.ms-publisher":                                              ".pub",
	"application/x-mspublisher":                                                 ".pub",
	"application/x-hwp":                                                         ".hwp",
	"application/vnd.apple.pages":                                               ".pages",
	"application/vnd.apple.numbers":                                             ".numbers",
	"application/vnd.apple.keynote":                                             ".key",
	"application/x-abiword":                                                     ".abw",
	"application/vnd.lotus-1-2-3":                                               ".123",
	"application/x-t602":                                                        ".602",
	"application/x-iwork-pages-sffpages":                                        ".pages",
	"application/x-iwork-numbers-sffnumbers":                                    ".numbers",
	"application/x-iwork-keynote-sffkey":                                        ".key",
	"application/vnd.oasis.opendocument.text-flat-xml":                          ".fodt",
	"application/vnd.oasis.opendocument.spreadsheet-flat-xml":                   ".fods",
	"application/vnd.oasis.opendocument.presentation-flat-xml":                  ".fodp",
}

// otherExtensions are office extensions accepted from a file name when the content type is
// generic (an OLE container, an encrypted package, a zip).
var otherExtensions = map[string]struct{}{
	".dot": {}, ".xlt": {}, ".pot": {}, ".pps": {}, ".xltm": {}, ".potm": {}, ".ppsm": {},
	".fodg": {}, ".otg": {}, ".vdx": {}, ".vsdm": {}, ".wk1": {}, ".wks": {}, ".dbf": {},
	".cwk": {}, ".wpg": {}, ".xlw": {}, ".uof": {}, ".uot": {}, ".uos": {}, ".uop": {},
}

// isEncrypted recognises password-protected documents without LibreOffice: OOXML files
// encrypted with a password are OLE containers holding an "EncryptedPackage" stream, legacy
// PowerPoint files hold "EncryptedSummary", and encrypted OpenDocument files declare
// encryption-data in their manifest.
func isEncrypted(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(f, head); err != nil {
		return false, nil // too short to be either container
	}
	switch {
	case bytes.Equal(head, []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}):
		// Directory entry names are UTF-16LE; the directory of a small file lies in its first
		// megabytes.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
		b, err := io.ReadAll(io.LimitReader(f, 32<<20))
		if err != nil {
			return false, err
		}
		return bytes.Contains(b, utf16("EncryptedPackage")) || bytes.Contains(b, utf16("EncryptedSummary")), nil
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		st, err := f.Stat()
		if err != nil {
			return false, err
		}
		zr, err := zip.NewReader(f, st.Size())
		if err != nil {
			return false, nil // let LibreOffice report the damage
		}
		for _, zf := range zr.File {
			if zf.Name != "META-INF/manifest.xml" {
				continue
			}
			rc, err := zf.Open()
			if err != nil {
				return false, nil
			}
			defer rc.Close()
			m, err := io.ReadAll(io.LimitReader(rc, 4<<20))
			if err != nil {
				return false, nil
			}
			return bytes.Contains(m, []byte("encryption-data")), nil
		}
	}
	return false, nil
}

func utf16(s string) []byte {
	b := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		b = append(b, s[i], 0)
	}
	return b
}
