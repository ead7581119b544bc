package unpack

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zip"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// TestZipDirPages: a zip's directory is read a page of zipPage records at a time (2 in the
// tests), every entry once and in order — for a plain zip and for a zip64 one (more than 65,535
// entries, the size of the archive of 100,000 files whose whole directory used to be held) —
// while an archive whose offsets count from data before it is read whole, as before.
func TestZipDirPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entries int
		prefix  bool
		paged   bool
	}{{"plain", 25, false, true}, {"zip64", 70000, false, true}, {"after other data", 25, true, false}} {
		data := makeZip(t, tc.entries)
		if tc.prefix {
			data = append(makeZip(t, 1), data...)
		}
		f := writeTemp(t, data)
		d, ok := openZipDir(f, int64(len(data)))
		if ok != tc.paged {
			t.Fatalf("%s: paged = %v, want %v", tc.name, ok, tc.paged)
		}
		if !ok {
			continue
		}
		n := 0
		err := d.each(func(files []*zip.File) error {
			if len(files) > zipPage {
				t.Fatalf("%s: a page of %d records, want at most %d", tc.name, len(files), zipPage)
			}
			for _, zf := range files {
				if want := "f" + strconv.Itoa(n) + ".txt"; zf.Name != want {
					t.Fatalf("%s: entry %d is %q, want %q", tc.name, n, zf.Name, want)
				}
				n++
			}
			return nil
		})
		if err != nil || n != tc.entries {
			t.Fatalf("%s: %d entries (err %v), want %d", tc.name, n, err, tc.entries)
		}
	}
	// Unpacked whole either way.
	for _, prefix := range []bool{false, true} {
		data := makeZip(t, 25)
		if prefix {
			// Its offsets count from its own start, not the file's: read whole.
			data = append(makeZip(t, 1), data...)
		}
		rec := &actiontest.Recorder{}
		if err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "a.zip", "", data, nil, nil), rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.Children) != 25 || rec.Children[24].Name != "a.zip/f24.txt" {
			t.Errorf("after other data %v: children %q, want f0.txt to f24.txt", prefix, childNames(rec))
		}
	}
}

// TestZipCorruptDirectoryLate: a directory that is corrupt in a later page is refused before any
// entry is unpacked, as when the directory was read whole.
func TestZipCorruptDirectoryLate(t *testing.T) {
	t.Parallel()
	data := makeZip(t, 25)
	sig := []byte("PK\x01\x02")
	at := -1
	for i, from := 0, 0; i <= 20; i++ {
		at = from + bytes.Index(data[from:], sig)
		from = at + 1
	}
	data[at+3] = 0x09 // record 20's signature
	rec := &actiontest.Recorder{}
	err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, "a.zip", "", data, nil, nil), rec)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "corrupt archive") {
		t.Fatalf("err = %v, want a corrupt archive", err)
	}
	if len(rec.Children) != 0 {
		t.Errorf("%d children of a corrupt archive, want none", len(rec.Children))
	}
}

func writeTemp(t *testing.T, data []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "a.zip")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// FuzzZipDirPages: wherever a zip's directory is read in pages, the pages hold the entries
// zip.NewReader finds over the whole file, in its order, with the same offsets; where the whole
// read fails, so do the pages. (Where the pages fail, unpackZip reads the directory whole.)
func FuzzZipDirPages(f *testing.F) {
	f.Add(makeZip(f, 5))
	f.Add(append(makeZip(f, 1), makeZip(f, 3)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "a.zip")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		d, ok := openZipDir(fh, int64(len(data)))
		if !ok {
			return
		}
		whole, werr := zip.NewReader(fh, int64(len(data)))
		var paged []*zip.File
		perr := d.each(func(files []*zip.File) error {
			paged = append(paged, files...)
			return nil
		})
		if werr != nil {
			if perr == nil {
				t.Fatalf("whole: %v; paged: no error (%d entries)", werr, len(paged))
			}
			return
		}
		if perr != nil {
			return // unpackZip then reads the directory whole: the library's verdict
		}
		if len(paged) != len(whole.File) {
			t.Fatalf("paged %d entries, whole %d", len(paged), len(whole.File))
		}
		for i, zf := range whole.File {
			po, perr := paged[i].DataOffset()
			wo, werr := zf.DataOffset()
			if paged[i].Name != zf.Name || po != wo || (perr == nil) != (werr == nil) || paged[i].CRC32 != zf.CRC32 {
				t.Fatalf("entry %d: paged %q at %d, whole %q at %d", i, paged[i].Name, po, zf.Name, wo)
			}
		}
	})
}

// stubZip returns a zip of records directory records after other data, its offsets
// counting from its own start, with an end record declaring declared records: every record is
// the same one-byte stored entry "a", so the records cost 47 bytes each.
func stubZip(records int, declared uint16) []byte {
	le := binary.LittleEndian
	// The stub starts as a zip does, so that unpack reads the file as a zip.
	b := []byte("PK\x03\x04" + strings.Repeat(" data before the archive", 8))
	stub := len(b)
	b = append(b, "PK\x03\x04"...)
	b = le.AppendUint16(b, 10)                              // needed
	b = append(b, make([]byte, 8)...)                       // flags, method (stored), time, date
	b = le.AppendUint32(b, crc32.ChecksumIEEE([]byte("x"))) // checksum
	b = le.AppendUint32(b, 1)                               // compressed size
	b = le.AppendUint32(b, 1)                               // size
	b = le.AppendUint16(b, 1)                               // name
	b = le.AppendUint16(b, 0)                               // extra
	b = append(b, "ax"...)
	dir := len(b) - stub
	var rec []byte
	rec = append(rec, "PK\x01\x02"...)
	rec = le.AppendUint16(rec, 20)
	rec = le.AppendUint16(rec, 10)
	rec = append(rec, make([]byte, 8)...)
	rec = le.AppendUint32(rec, crc32.ChecksumIEEE([]byte("x")))
	rec = le.AppendUint32(rec, 1)
	rec = le.AppendUint32(rec, 1)
	rec = le.AppendUint16(rec, 1)         // name
	rec = append(rec, make([]byte, 8)...) // extra, comment, disk, internal attributes
	rec = le.AppendUint32(rec, 0o644<<16) // external attributes
	rec = le.AppendUint32(rec, 0)         // the local header's offset
	rec = append(rec, 'a')
	b = append(b, bytes.Repeat(rec, records)...)
	b = append(b, "PK\x05\x06"...)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, declared)
	b = le.AppendUint16(b, declared)
	b = le.AppendUint32(b, uint32(records*len(rec)))
	b = le.AppendUint32(b, uint32(dir))
	b = le.AppendUint16(b, 0)
	return b
}

// TestZipWholeDirectoryBounded: a directory the pages do not read is read whole by the library,
// which keeps every record and compares the declared count only modulo 65,536. One of 65,541
// records declaring 5 (under max_entries 10) is refused before the library reads it, with no
// entry unpacked; one within the limits still unpacks; and one of more bytes than
// zipWholeDirMax is refused too.
func TestZipWholeDirectoryBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		data     []byte
		with     map[string]any
		children int
		wantErr  string
	}{
		{name: "stub.zip", data: stubZip(65536+5, 5), with: map[string]any{"max_entries": 10}, wantErr: "archive has more than 10 entries"},
		{name: "small.zip", data: stubZip(5, 5), with: map[string]any{"max_entries": 10}, children: 5},
		// 47 bytes a record: 3,000 of them are 141,000 bytes, over the test's bound.
		{name: "wide.zip", data: stubZip(3000, 3000), wantErr: "archive's central directory (its list of entries) is larger than 100000 bytes"},
	}
	for _, tt := range tests {
		if _, ok := openZipDir(writeTemp(t, tt.data), int64(len(tt.data))); ok {
			t.Fatalf("%s: read by pages, want whole", tt.name)
		}
		rec := &actiontest.Recorder{}
		err := New(Config{}).Run(t.Context(), actiontest.NewTask(t, tt.name, "", tt.data, tt.with, nil), rec)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (!action.IsPermanent(err) || err.Error() != tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
		if len(rec.Children) != tt.children {
			t.Errorf("%s: %d children, want %d", tt.name, len(rec.Children), tt.children)
		}
	}
}
