package fileset

import (
	"archive/zip"
	"bytes"
	bin "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListBundle reads bundles within their bounds: a good one lists its files with digests and
// types; one of too many entries, one decompressing past the size bound (a bomb), one naming an
// unsafe path and one that is not a zip are refused with their status.
func TestListBundle(t *testing.T) {
	t.Parallel()
	write := func(files map[string][]byte, order ...string) string {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, name := range order {
			w, _ := zw.Create(name)
			w.Write(files[name])
		}
		zw.Close()
		p := filepath.Join(t.TempDir(), "b.zip")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write(map[string][]byte{"a.csv": []byte("x,y\n1,2\n"), "dir/": nil, "dir/b.txt": []byte("hello")}, "a.csv", "dir/", "dir/b.txt")
	got, err := listBundle(good, 10, 1<<20)
	if err != nil || len(got) != 2 || got[0].Path != "a.csv" || *got[0].Size != 8 || got[0].MD5 != md5hex([]byte("x,y\n1,2\n")) ||
		got[1].Path != "dir/b.txt" || got[1].SHA1 != sha1hex([]byte("hello")) || got[1].Mimetype != "text/plain" {
		t.Fatalf("good bundle: %+v, %v", got, err)
	}
	many := map[string][]byte{}
	var names []string
	for i := range 11 {
		n := fmt.Sprintf("f%d", i)
		many[n], names = []byte("1"), append(names, n)
	}
	bomb := write(map[string][]byte{"zeros": make([]byte, 4<<20)}, "zeros")
	for name, c := range map[string]struct {
		path string
		want string
	}{
		"too many entries": {write(many, names...), StatusBodyTooLarge},
		"bomb":             {bomb, StatusBodyTooLarge},
		"unsafe path":      {write(map[string][]byte{"../x": []byte("1")}, "../x"), StatusPlatformError},
		"not a zip": {func() string {
			p := filepath.Join(t.TempDir(), "n.zip")
			os.WriteFile(p, []byte("<html>"), 0o644)
			return p
		}(), StatusPlatformError},
	} {
		_, err := listBundle(c.path, 10, 1<<20)
		if st, _, _ := asStatus(err); st != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
	if fi, _ := os.Stat(bomb); fi.Size() > 64<<10 {
		t.Errorf("the bomb is %d bytes compressed", fi.Size())
	}
}

// TestListBundleDirectoryBounds: a bundle's directory is refused on what its end declares, before
// it is read — a count over the limit, a length over what the limit's entries could take (10
// entries: 74 KiB), a directory elsewhere than the end says — even when what stands there is not
// a directory at all; and a bundle that declares a few entries but holds 65,539 (the count
// archive/zip compares only modulo 65,536) is refused by its length.
func TestListBundleDirectoryBounds(t *testing.T) {
	t.Parallel()
	// end is an end-of-directory record declaring records entries in size bytes at offset.
	end := func(records uint16, size, offset uint32) []byte {
		b := []byte("PK\x05\x06\x00\x00\x00\x00")
		b = bin.LittleEndian.AppendUint16(b, records)
		b = bin.LittleEndian.AppendUint16(b, records)
		b = bin.LittleEndian.AppendUint32(b, size)
		b = bin.LittleEndian.AppendUint32(b, offset)
		return append(b, 0, 0)
	}
	garbage := func(n int) []byte { return bytes.Repeat([]byte("not a directory record "), n/23+1)[:n] }
	var stub bytes.Buffer
	stub.WriteString("#!/bin/sh\nexit 0\n")
	zw := zip.NewWriter(&stub)
	w, _ := zw.Create("a.csv")
	w.Write([]byte("x\n"))
	zw.Close()
	var lying bytes.Buffer
	zw = zip.NewWriter(&lying)
	for range 65539 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: "f", Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	zw.Close()
	// Its zip64 end record declares 3 entries on this disk and in all.
	lie := lying.Bytes()
	at := bytes.LastIndex(lie, []byte("PK\x06\x06"))
	bin.LittleEndian.PutUint64(lie[at+24:], 3)
	bin.LittleEndian.PutUint64(lie[at+32:], 3)
	for _, c := range []struct {
		name, want, msg string
		data            []byte
	}{
		{"declares too many entries", StatusBodyTooLarge, "the bundle lists 11 entries, over 10", append(garbage(500), end(11, 500, 0)...)},
		{"declares too long a directory", StatusBodyTooLarge, "the bundle's directory is 100000 bytes, over the 75776 bytes that 10 entries could need",
			append(garbage(100000), end(5, 100000, 0)...)},
		{"directory not where the end says", StatusPlatformError, "the bundle's directory is not where the end of the archive says it is", stub.Bytes()},
		{"no end record", StatusPlatformError, "the bundle is not a zip archive: it has no end of directory that can be read", garbage(1000)},
		{"holds more entries than it declares", StatusBodyTooLarge, "the bundle's directory is 3080333 bytes, over the 75776 bytes", lie},
	} {
		p := filepath.Join(t.TempDir(), "b.zip")
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := listBundle(p, 10, 1<<20)
		if st, msg, _ := asStatus(err); st != c.want || !strings.HasPrefix(msg, c.msg) {
			t.Errorf("%s: %v; want %s: %s", c.name, err, c.want, c.msg)
		}
	}
}
