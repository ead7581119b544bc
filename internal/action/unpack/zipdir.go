package unpack

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zip"

	"github.com/sluice-project/sluice/internal/zipend"
)

// zipPage is how many central-directory records a zip is read with at once (a variable for the
// tests).
var zipPage = 1000

// zipDir reads a zip's central directory a page of records at a time, so that an archive of
// 100,000 entries does not hold 100,000 directory records (23 MB) for the whole unpack, as
// zip.NewReader over the whole file does. Each page is read by zip.NewReader itself, over a
// view of the file that ends with the page's records and a made-up end-of-directory record
// naming only them: the checks and the entries (their offsets, sizes and readers) are the
// library's own.
type zipDir struct {
	f       *os.File
	start   int64  // where the directory's first record is
	records uint64 // the count the end of the directory declares
}

// openZipDir finds the directory of the zip in f. ok is false for an archive it does not page:
// one whose end record it cannot read plainly, or whose offsets are relative to data before the
// archive (a self-extracting stub); zip.NewReader reads those whole.
func openZipDir(f *os.File, size int64) (d *zipDir, ok bool) {
	end, ok := zipend.Read(f, size)
	if !ok {
		return nil, false
	}
	// As the library reads it (readDirectoryEnd): the distance between where the directory
	// ends and where it says it starts is data before the archive, unless a record is at the
	// offset as written.
	if end.Base() != 0 {
		return nil, false
	}
	if int64(end.Offset) >= size {
		return nil, false
	}
	return &zipDir{f: f, start: int64(end.Offset), records: end.Records}, true
}

// zipWholeDirMax bounds the central directory zip.NewReader may read whole (a variable for the
// tests). The library keeps every record it reads, about 3.7 times the directory's bytes for
// records of short names, and reads records for as long as they follow one another, whatever
// the end record declares (it compares the declared count only modulo 65,536). A real archive of
// 100,000 entries, max_entries' default, has a directory of about 20 MB (a 46-byte record, a
// 100-byte path and 36 bytes of zip64 and time fields each): 64 MiB leaves it three times that.
var zipWholeDirMax int64 = 64 << 20

// checkZipDirWhole refuses, in words, a directory that zip.NewReader would read whole if it has
// more than maxEntries records or more than zipWholeDirMax bytes of them. It counts the records
// without keeping them, from each place the library may start reading: where the end record
// says the directory ends less its size, and, when that leaves data before the archive, the
// offset as written (readDirectoryEnd); from the zip64 end record's values and from the plain
// one's, as the library uses the latter when the zip64 locator does not suit it.
func checkZipDirWhole(f *os.File, size int64, maxEntries int) error {
	var starts []int64
	add := func(e zipend.End) {
		if e.Size > uint64(e.At) {
			return
		}
		s := e.At - int64(e.Size)
		starts = append(starts, s)
		if e.Offset < uint64(s) {
			starts = append(starts, int64(e.Offset))
		}
	}
	if e, ok := zipend.Plain(f, size); ok {
		add(e)
	}
	if e, ok := zipend.Read(f, size); ok {
		add(e)
	}
	for _, s := range starts {
		n, bytes := zipCountRecords(f, s, maxEntries+1, zipWholeDirMax)
		if n > maxEntries {
			return fmt.Errorf("archive has more than %d entries", maxEntries)
		}
		if bytes > zipWholeDirMax {
			return fmt.Errorf("archive's central directory (its list of entries) is larger than %d bytes", zipWholeDirMax)
		}
	}
	return nil
}

// zipCountRecords counts the directory records that follow one another from start, as the
// library's loop reads them, stopping once there are maxN or more than maxBytes of them.
func zipCountRecords(f *os.File, start int64, maxN int, maxBytes int64) (n int, size int64) {
	br := bufio.NewReaderSize(io.NewSectionReader(f, start, 1<<62), 64*1024)
	var hdr [46]byte
	for n < maxN && size <= maxBytes {
		if _, err := io.ReadFull(br, hdr[:]); err != nil || !bytes.Equal(hdr[:4], []byte("PK\x01\x02")) {
			break
		}
		rest := int64(binary.LittleEndian.Uint16(hdr[28:])) + int64(binary.LittleEndian.Uint16(hdr[30:])) +
			int64(binary.LittleEndian.Uint16(hdr[32:]))
		if m, err := br.Discard(int(rest)); int64(m) != rest || err != nil {
			break
		}
		n++
		size += 46 + rest
	}
	return n, size
}

// each calls fn with the entries of the directory a page at a time, in directory order, and
// returns fn's error or, when the directory is not as its end record declares (a record the
// library cannot read before the declared count, or another count), the library's error.
func (d *zipDir) each(fn func(files []*zip.File) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(d.f, d.start, 1<<62), 64*1024)
	pos := d.start
	var n uint64
	var hdr [46]byte
	for {
		from, k := pos, 0
		for k < zipPage {
			// As the library's loop: a record cut short ends the directory, but the file ending
			// exactly where a record or its names would begin is an error (io.EOF).
			_, err := io.ReadFull(br, hdr[:])
			if err == io.EOF {
				return err
			}
			if err != nil || !bytes.Equal(hdr[:4], []byte("PK\x01\x02")) {
				break
			}
			rest := int64(binary.LittleEndian.Uint16(hdr[28:])) + int64(binary.LittleEndian.Uint16(hdr[30:])) +
				int64(binary.LittleEndian.Uint16(hdr[32:]))
			if m, err := br.Discard(int(rest)); int64(m) != rest || err != nil {
				if m == 0 && err == io.EOF {
					return err
				}
				break
			}
			pos += 46 + rest
			k++
		}
		if k == 0 {
			break
		}
		zr, err := zip.NewReader(&zipView{f: d.f, end: pos, trailer: zipTrailer(from, pos-from, k)}, pos+zipTrailerLen)
		if err != nil {
			return err
		}
		if len(zr.File) != k {
			return zip.ErrFormat
		}
		n += uint64(k)
		if err := fn(zr.File); err != nil {
			return err
		}
		if k < zipPage {
			break
		}
	}
	if uint16(n) != uint16(d.records) { // as zip.NewReader compares them
		return zip.ErrFormat
	}
	return nil
}

// zipTrailerLen is the length of a zip64 end record, its locator and the end record.
const zipTrailerLen = 56 + 20 + 22

// zipTrailer returns the end of a zip whose directory is the k records of size bytes at offset.
func zipTrailer(offset, size int64, k int) []byte {
	b := make([]byte, 0, zipTrailerLen)
	le := binary.LittleEndian
	b = append(b, "PK\x06\x06"...)
	b = le.AppendUint64(b, 44)             // the rest of the record
	b = le.AppendUint16(b, 45)             // made by
	b = le.AppendUint16(b, 45)             // needed
	b = le.AppendUint32(b, 0)              // this disk
	b = le.AppendUint32(b, 0)              // the directory's disk
	b = le.AppendUint64(b, uint64(k))      // records on this disk
	b = le.AppendUint64(b, uint64(k))      // records
	b = le.AppendUint64(b, uint64(size))   // directory size
	b = le.AppendUint64(b, uint64(offset)) // directory offset
	b = append(b, "PK\x06\x07"...)
	b = le.AppendUint32(b, 0)                   // the zip64 record's disk
	b = le.AppendUint64(b, uint64(offset+size)) // the zip64 record's offset
	b = le.AppendUint32(b, 1)                   // disks
	b = append(b, "PK\x05\x06"...)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0xffff)
	b = le.AppendUint16(b, 0xffff)
	b = le.AppendUint32(b, 0xffffffff)
	b = le.AppendUint32(b, 0xffffffff)
	b = le.AppendUint16(b, 0) // comment length
	return b
}

// zipView is the file up to end followed by trailer.
type zipView struct {
	f       *os.File
	end     int64
	trailer []byte
}

func (v *zipView) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < v.end {
		m := min(int64(len(p)), v.end-off)
		k, err := v.f.ReadAt(p[:m], off)
		n += k
		if err != nil {
			return n, err
		}
		p, off = p[m:], v.end
	}
	if len(p) == 0 {
		return n, nil
	}
	i := off - v.end
	if i >= int64(len(v.trailer)) {
		return n, io.EOF
	}
	k := copy(p, v.trailer[i:])
	n += k
	if k < len(p) {
		return n, io.EOF
	}
	return n, nil
}
