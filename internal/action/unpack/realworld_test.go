package unpack

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// The archives in testdata were made with p7zip: enc.7z and enc-headers.7z hold a.txt under
// the password PASS (the second with its names encrypted too), empty.7z holds nothing.

func runTestdata(t *testing.T, name string) (*actiontest.Recorder, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	rec := &actiontest.Recorder{}
	return rec, New(Config{}).Run(t.Context(), actiontest.NewTask(t, name, "application/x-7z-compressed", data, nil, nil), rec)
}

func TestUnpackEncrypted7z(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"enc.7z", "enc-headers.7z"} {
		rec, err := runTestdata(t, name)
		if !action.IsPermanent(err) || !strings.Contains(err.Error(), "password-protected") {
			t.Errorf("%s: err = %v, want password-protected", name, err)
		}
		if len(rec.Children) != 0 {
			t.Errorf("%s: children %q", name, childNames(rec))
		}
	}
}

func TestUnpackEmpty7z(t *testing.T) {
	t.Parallel()
	rec, err := runTestdata(t, "empty.7z")
	if err != nil || len(rec.Children) != 0 {
		t.Fatalf("err = %v, children %q; want an empty archive, no error", err, childNames(rec))
	}
}

// TestUnpackShiftJISNames: a Japanese zip tool writes names in Shift_JIS without the UTF-8 flag;
// Chinese and Korean Windows tools write GBK, Big5 or EUC-KR the same way.
func TestUnpackShiftJISNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		enc   encoding.Encoding
		names []string
	}{
		{japanese.ShiftJIS, []string{"日本語のファイル.txt", "報告書/会議の議事録.txt"}},
		{simplifiedchinese.GBK, []string{"会议记录/第一季度财务报告.txt", "项目计划书.txt"}},
		{traditionalchinese.Big5, []string{"會議記錄/第一季財務報告.txt", "專案計畫書.txt"}},
		{korean.EUCKR, []string{"회의록/일분기 재무 보고서.txt", "사업 계획서.txt"}},
	} {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, n := range tt.names {
			raw, err := tt.enc.NewEncoder().String(n)
			if err != nil {
				t.Fatal(err)
			}
			w, err := zw.CreateHeader(&zip.FileHeader{Name: raw, NonUTF8: true, Method: zip.Deflate})
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("内容"))
		}
		zw.Close()
		rec := &actiontest.Recorder{}
		if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "legacy.zip", "", b.Bytes(), nil, nil), rec); err != nil {
			t.Fatal(err)
		}
		got := childNames(rec)
		if len(got) != 2 || got[0] != "legacy.zip/"+tt.names[0] || got[1] != "legacy.zip/"+tt.names[1] {
			t.Errorf("%v: children %q, want %q", tt.enc, got, tt.names)
		}
	}
}

// TestUnpackSymlinkRecorded: a symlink entry is not followed or unpacked, and the user is told.
func TestUnpackSymlinkRecorded(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("real.txt")
	w.Write([]byte("real"))
	h := &zip.FileHeader{Name: "link.txt"}
	h.SetMode(os.ModeSymlink | 0o777)
	w, _ = zw.CreateHeader(h)
	w.Write([]byte("../../etc/passwd"))
	zw.Close()
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "links.zip", "", b.Bytes(), nil, nil), rec)
	if got := childNames(rec); len(got) != 1 || got[0] != "links.zip/real.txt" {
		t.Errorf("children %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), `link.txt: a symbolic link to "../../etc/passwd", not followed`) {
		t.Errorf("err = %v, want the symlink named", err)
	}
}

// TestUnpackLyingSizes: a zip whose entry claims fewer bytes than its data holds.
func TestUnpackLyingSizes(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "liar.txt", Method: zip.Store})
	w.Write(bytes.Repeat([]byte("x"), 1000))
	zw.Close()
	data := b.Bytes()
	// Rewrite the uncompressed size in the central directory entry: 1000 → 10.
	cd := bytes.LastIndex(data, []byte("PK\x01\x02"))
	binary.LittleEndian.PutUint32(data[cd+24:], 10)
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "liar.zip", "", data, nil, nil), rec)
	if err == nil || strings.Contains(err.Error(), "not a valid zip file") || !strings.Contains(err.Error(), "liar.txt: its data does not match the sizes the archive declares") {
		t.Errorf("err = %v", err)
	}
}

func TestUnpackTarLinksRecorded(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "real.txt", Mode: 0o644, Size: 4, Typeflag: tar.TypeReg})
	tw.Write([]byte("real"))
	tw.WriteHeader(&tar.Header{Name: "sym", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink})
	tw.WriteHeader(&tar.Header{Name: "hard", Linkname: "real.txt", Typeflag: tar.TypeLink})
	tw.Close()
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "links.tar", "", b.Bytes(), nil, nil), rec)
	if got := childNames(rec); len(got) != 1 || got[0] != "links.tar/real.txt" {
		t.Errorf("children %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), `sym: a symbolic link to "/etc/shadow", not followed`) ||
		!strings.Contains(err.Error(), `hard: a hard link to "real.txt", not followed`) {
		t.Errorf("err = %v", err)
	}
}

// TestUnpackResumes: a zip whose first children an earlier attempt recorded is resumed after
// them, without reading those entries again: their stored data is damaged here (it no longer
// matches its CRC-32), which a read of them would report.
func TestUnpackResumes(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := range 10 {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("f%d.txt", i), Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "entry %d", i)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	all := &actiontest.Recorder{}
	if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "a.zip", "", good, nil, nil), all); err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(good)
	for i := range 6 {
		at := bytes.Index(damaged, fmt.Appendf(nil, "entry %d", i))
		copy(damaged[at:], "ENTRY")
	}
	if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "a.zip", "", damaged, nil, nil), &actiontest.Recorder{}); err == nil {
		t.Fatal("the damaged entries read without an error: the test could not tell a resume that reads them")
	}
	rec := &actiontest.Recorder{Recorded: 6}
	if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "a.zip", "", damaged, nil, nil), rec); err != nil {
		t.Fatalf("resumed after 6 children: %v (the recorded entries were read again)", err)
	}
	if got, want := childNames(rec), childNames(all)[6:]; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("resumed children %q, want %q", got, want)
	}
}
