package zipend

import (
	"archive/zip"
	"bytes"
	"testing"
)

// TestRead reads the end of archives archive/zip wrote: a small one, one with a comment, one
// with a stub before it (Base is the stub's length), one of 65,535 entries (its zip64 record),
// and refuses what has no end record.
func TestRead(t *testing.T) {
	t.Parallel()
	archive := func(entries int, comment string) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for range entries {
			if _, err := zw.CreateHeader(&zip.FileHeader{Name: "a", Method: zip.Store}); err != nil {
				t.Fatal(err)
			}
		}
		if err := zw.SetComment(comment); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, c := range []struct {
		name    string
		data    []byte
		ok      bool
		records uint64
		base    int64
	}{
		{name: "small", data: archive(3, ""), ok: true, records: 3},
		{name: "with a comment", data: archive(3, "a comment"), ok: true, records: 3},
		{name: "behind a stub", data: append([]byte("#!/bin/sh\nexit 0\n"), archive(2, "")...), ok: true, records: 2, base: 17},
		{name: "zip64", data: archive(0xffff, ""), ok: true, records: 0xffff},
		{name: "empty", data: archive(0, ""), ok: true},
		{name: "not a zip", data: []byte("<html>not a zip, though long enough to hold an end record</html>")},
		{name: "shorter than an end record", data: []byte("PK\x05\x06")},
	} {
		e, ok := Read(bytes.NewReader(c.data), int64(len(c.data)))
		if ok != c.ok || e.Records != c.records || ok && e.Base() != c.base {
			t.Errorf("%s: %+v, %v (base %d); want %d records, base %d, ok %v", c.name, e, ok, e.Base(), c.records, c.base, c.ok)
		}
		// The directory's records are 47 bytes each ("a", no extra) in the archives above.
		if ok && e.Size != 47*c.records {
			t.Errorf("%s: a directory of %d bytes, want %d", c.name, e.Size, 47*c.records)
		}
	}
}
