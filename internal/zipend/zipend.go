// Package zipend reads what the end of a zip archive's central directory declares — where the
// directory is, its length and its count of entries — without reading the directory, so that a
// caller can refuse a directory too large to read before archive/zip loads all of it (it holds
// every record, about 3.7 times the directory's bytes, and reads records past the declared
// count and length).
package zipend

import (
	"bytes"
	"encoding/binary"
	"io"
)

// End is what a zip archive's end-of-central-directory record, or its zip64 form, declares.
type End struct {
	// At is where the end record (or its zip64 form) starts.
	At int64
	// Records is the count of entries the directory declares.
	Records uint64
	// Size is the directory's length in bytes.
	Size uint64
	// Offset is where the directory starts, relative to the archive's first byte.
	Offset uint64
}

// Base returns how many bytes precede the archive proper by e's account: 0 for an archive whose
// directory ends where its end record starts and starts at Offset; other values for one behind a
// self-extracting stub, or whose end record does not describe its directory.
func (e End) Base() int64 { return e.At - int64(e.Size) - int64(e.Offset) }

// Read reads the end record of the zip archive in r, of size bytes, as zip.NewReader finds it:
// the last one in the final 65 KiB whose comment fits, and its zip64 form when a field of it is
// saturated. ok is false when there is none, or a saturated record without a readable zip64
// one.
func Read(r io.ReaderAt, size int64) (e End, ok bool) {
	e, loc, ok := plain(r, size)
	if !ok {
		return End{}, false
	}
	if e.Records != 0xffff && e.Size != 0xffff && e.Offset != 0xffffffff {
		return e, true
	}
	// zip64: the locator sits just before the record and points at the zip64 record.
	if !bytes.Equal(loc[:4], []byte("PK\x06\x07")) {
		return End{}, false
	}
	off := int64(binary.LittleEndian.Uint64(loc[8:]))
	var rec [56]byte
	if off < 0 || off > size-56 {
		return End{}, false
	}
	if _, err := r.ReadAt(rec[:], off); err != nil || !bytes.Equal(rec[:4], []byte("PK\x06\x06")) {
		return End{}, false
	}
	e.At = off
	e.Records = binary.LittleEndian.Uint64(rec[32:])
	e.Size = binary.LittleEndian.Uint64(rec[40:])
	e.Offset = binary.LittleEndian.Uint64(rec[48:])
	if e.Size > 1<<62 || e.Offset > 1<<62 {
		return End{}, false
	}
	return e, true
}

// Plain reads the end-of-central-directory record's own fields, saturated or not, without its
// zip64 form: what zip.NewReader falls back to when the zip64 locator does not suit it.
func Plain(r io.ReaderAt, size int64) (End, bool) {
	e, _, ok := plain(r, size)
	return e, ok
}

// plain is [Plain], with the 20 bytes before the record (where a zip64 locator would be; zeros
// if the archive has none).
func plain(r io.ReaderAt, size int64) (e End, loc [20]byte, ok bool) {
	const eocdLen = 22
	n := min(size, 65*1024)
	if n < eocdLen {
		return e, loc, false
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-n); err != nil && err != io.EOF {
		return e, loc, false
	}
	i := -1
	for j := len(buf) - eocdLen; j >= 0; j-- {
		if bytes.Equal(buf[j:j+4], []byte("PK\x05\x06")) {
			if int(binary.LittleEndian.Uint16(buf[j+20:]))+eocdLen+j <= len(buf) {
				i = j
			}
			break
		}
	}
	if i < 0 {
		return e, loc, false
	}
	e = End{At: size - n + int64(i), Records: uint64(binary.LittleEndian.Uint16(buf[i+10:])),
		Size: uint64(binary.LittleEndian.Uint32(buf[i+12:])), Offset: uint64(binary.LittleEndian.Uint32(buf[i+16:]))}
	if i >= 20 {
		copy(loc[:], buf[i-20:i])
	}
	return e, loc, true
}
