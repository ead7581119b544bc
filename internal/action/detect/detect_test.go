package detect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// corpusDir returns the shared test corpus, skipping the test only when it is absent.
func corpusDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "shared", "corpus", "files")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("corpus %s not present", dir)
	}
	return dir
}

// wantRoute is the route of every corpus file, or "!<error substring>" for an expected error.
var wantRoute = map[string]string{
	"LibreOfficeCalc_ods_1.3.ods":             "office",
	"LibreOfficeImpress_odp_1.3.odp":          "office",
	"LibreOfficeWriter_odt_1.3.odt":           "office",
	"bug1020226.pdf":                          "pdf",
	"candide-utf-16le.txt":                    "text",
	"candide-windows-1252.txt":                "text",
	"complex.mbox":                            "email",
	"droste.zip":                              "archive",
	"empty.zip":                               "archive",
	"file10_permahang.txt":                    "text",
	"hostile-20000-entries.zip":               "archive",
	"hostile-nested-30-levels.zip":            "archive",
	"hostile-traversal.zip":                   "archive",
	"hostile-zipbomb-1GiB.zip":                "archive",
	"hostile-zipbomb-nested.zip":              "archive",
	"issue16538.pdf":                          "pdf",
	"metadata-keys-3x.json":                   "text",
	"rashomon-shift-jis.txt":                  "text",
	"test-documents.7z":                       "archive",
	"test-documents.rar":                      "archive",
	"test-documents.tar":                      "archive",
	"test-documents.tbz2":                     "archive",
	"test-documents.tgz":                      "archive",
	"test-documents.zip":                      "archive",
	"test-zip-of-zip.zip":                     "archive",
	"testBMP.bmp":                             "image",
	"testCSV.csv":                             "text",
	"testEXCEL.xls":                           "office",
	"testEXCEL.xlsx":                          "office",
	"testGIF.gif":                             "image",
	"testHEIF.heic":                           "image",
	"testHTML_charset_utf16le.html":           "html",
	"testHTML_utf8.html":                      "html",
	"testJPEG_EXIF.jpg":                       "image",
	"testJournalParser.pdf":                   "pdf",
	"testMARKDOWN.md":                         "text",
	"testMSG_att_msg.msg":                     "email",
	"testOCR.pdf":                             "pdf",
	"testPDF_acroform3.pdf":                   "pdf",
	"testPNG.png":                             "image",
	"testPPT.ppt":                             "office",
	"testPPT_various.pptx":                    "office",
	"testRFC822_normal_zip":                   "email",
	"testRTFVarious.rtf":                      "office",
	"testTIFF_multipage.tif":                  "image",
	"testTXTNonASCIIUTF8.txt":                 "text",
	"testUnicodePassword.pdf":                 "pdf",
	"testWEBP.webp":                           "image",
	"testWORD_protected_passtika.docx":        "!password-protected",
	"testWORD_various.doc":                    "office",
	"testWORD_various.docx":                   "office",
	"testWindows-x86-32.exe":                  "!unhandled: application/vnd.microsoft.portable-executable",
	"testXML.xml":                             "text",
	"testZIP_corrupted_oom.zip":               "archive",
	"testZipEncrypted.zip":                    "archive",
	"test_extract.tar.xz":                     "archive",
	"test_read_format_zip_filename_cp866.zip": "archive",
}

// wantType pins the detected content type of the files where detection has to work hardest.
var wantType = map[string]string{
	"candide-utf-16le.txt":          "text/plain; charset=utf-16le",
	"complex.mbox":                  "application/mbox",
	"testHTML_charset_utf16le.html": "text/html; charset=utf-16le",
	"testRFC822_normal_zip":         "message/rfc822",
	"testWORD_various.doc":          "application/msword",
	"testEXCEL.xls":                 "application/vnd.ms-excel",
	"testPPT.ppt":                   "application/vnd.ms-powerpoint",
	"testMSG_att_msg.msg":           "application/vnd.ms-outlook",
	"testWORD_various.docx":         "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"test-documents.rar":            "application/vnd.rar",
	"testRTFVarious.rtf":            "application/rtf",
}

func TestDetectCorpus(t *testing.T) {
	t.Parallel()
	dir := corpusDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		want, ok := wantRoute[e.Name()]
		if !ok {
			t.Errorf("corpus file %s has no expected route", e.Name())
			continue
		}
		seen++
		t.Run(e.Name(), func(t *testing.T) {
			t.Parallel()
			// Small reads force the two-step path on the small corpus files too.
			for _, cfg := range []Config{{}, {HeadSize: 3 << 10}} {
				rec := &actiontest.Recorder{}
				task := actiontest.NewFileTask(t, filepath.Join(dir, e.Name()), "", nil, nil)
				err := New(cfg).Run(t.Context(), task, rec)
				if msg, isErr := strings.CutPrefix(want, "!"); isErr {
					if err == nil || !action.IsPermanent(err) || !strings.Contains(err.Error(), msg) {
						t.Fatalf("err = %v, want permanent error containing %q", err, msg)
					}
					if len(rec.Events) != 0 {
						t.Fatalf("events = %v on error", rec.Events)
					}
					continue
				}
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if len(rec.Events) != 1 || rec.Events[0] != "detected."+want {
					t.Fatalf("events = %v (type %q), want [detected.%s]", rec.Events, rec.ContentType, want)
				}
				if wt, ok := wantType[e.Name()]; ok && rec.ContentType != wt {
					t.Fatalf("content type = %q, want %q", rec.ContentType, wt)
				}
			}
		})
	}
	if seen != len(wantRoute) {
		t.Errorf("saw %d corpus files, expected %d", seen, len(wantRoute))
	}
}

func TestDetectGivenType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, given, wantEvent, wantType string
		hasText                          bool
	}{
		{name: "alias zip", given: "application/x-zip-compressed", wantEvent: "detected.archive", wantType: "application/zip"},
		{name: "alias pdf", given: "application/x-pdf", wantEvent: "detected.pdf", wantType: "application/pdf"},
		{name: "params kept", given: "Text/Plain; charset=ISO-8859-1", wantEvent: "detected.text", wantType: "text/plain; charset=iso-8859-1"},
		{name: "octet-stream sniffed", given: "application/octet-stream", wantEvent: "detected.text", wantType: "text/plain; charset=utf-8"},
		{name: "has text is final", given: "application/pdf", hasText: true, wantEvent: "detected.final"},
		{name: "json", given: "application/json", wantEvent: "detected.text", wantType: "application/json"},
		{name: "rtf goes to office", given: "text/rtf", wantEvent: "detected.office", wantType: "application/rtf"},
		{name: "image wildcard", given: "image/x-portable-pixmap", wantEvent: "detected.image", wantType: "image/x-portable-pixmap"},
		{name: "xml suffix", given: "application/atom+xml", wantEvent: "detected.text", wantType: "application/atom+xml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &actiontest.Recorder{}
			task := actiontest.NewTask(t, "x.bin", tt.given, []byte("hello world\n"), nil, nil)
			task.Item.HasText = tt.hasText
			if err := New(Config{}).Run(t.Context(), task, rec); err != nil {
				t.Fatal(err)
			}
			if len(rec.Events) != 1 || rec.Events[0] != tt.wantEvent {
				t.Fatalf("events = %v, want %s", rec.Events, tt.wantEvent)
			}
			if rec.ContentType != tt.wantType {
				t.Fatalf("content type = %q, want %q", rec.ContentType, tt.wantType)
			}
		})
	}
}

func TestDetectUnhandledGiven(t *testing.T) {
	t.Parallel()
	task := actiontest.NewTask(t, "x", "application/x-unknown-thing", []byte{1, 2, 3}, nil, nil)
	err := New(Config{}).Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || err.Error() != "unhandled: application/x-unknown-thing" {
		t.Fatalf("err = %v", err)
	}
}

func TestDetectBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		data       []byte
		want       string
	}{
		{name: "eml by extension", file: "note.eml", data: []byte("hello\n"), want: "message/rfc822"},
		{name: "headers without extension", file: "mail", data: []byte("Received: by x\r\nFrom: a@b\r\nTo: c@d\r\nSubject: hi\r\n\r\nbody\r\n"), want: "message/rfc822"},
		{name: "plain text with colons", file: "notes", data: []byte("Note: this\nTodo: that\n\nmore\n"), want: "text/plain; charset=utf-8"},
		{name: "mbox", file: "box", data: []byte("From a@b Sat Jan  1 00:00:00 2000\nFrom: a@b\nSubject: x\n\nhi\n"), want: "application/mbox"},
		{name: "utf-16be no bom", file: "t", data: utf16be("Hello, world. This is text.\n"), want: "text/plain; charset=utf-16be"},
		{name: "binary is not utf-16", file: "b", data: []byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 1, 0, 2}, want: "application/octet-stream"},
		{name: "empty", file: "e.bin", data: nil, want: "text/plain"},
		{name: "pst", file: "o.pst", data: []byte("!BDN\x00\x00\x00\x00"), want: "application/vnd.ms-outlook-pst"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := detectBytes(tt.data, tt.file); got != tt.want {
				t.Fatalf("detectBytes = %q, want %q", got, tt.want)
			}
		})
	}
}

func utf16be(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r>>8), byte(r))
	}
	return b
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"application/x-zip-compressed": "application/zip",
		"APPLICATION/X-PDF; foo=bar":   "application/pdf",
		"application/x-gzip":           "application/gzip",
		"application/x-rar-compressed": "application/vnd.rar",
		"text/xml":                     "application/xml",
		"":                             "",
		"image/jpg":                    "image/jpeg",
		"application/vnd.ms-outlook":   "application/vnd.ms-outlook",
		"application/x-msdownload":     "application/vnd.microsoft.portable-executable",
		"application/x-bzip2":          "application/x-bzip2",
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}
