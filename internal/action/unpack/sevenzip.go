package unpack

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/klauspost/compress/flate"
	"github.com/ulikunitz/xz/lzma"
)

// The 7z library (github.com/bodgit/sevenzip) trusts the counts in an archive's header: it makes
// a slice of each count's length before reading what the count describes, so a 45-byte archive
// declaring 10^9 files asks for hundreds of gigabytes and the runtime aborts the whole process
// ("out of memory" is a fatal error, not a panic). checkSevenZipHeader walks the header first, in
// the library's own grammar (7-Zip's DOC/7zFormat.txt as types.go reads it), and refuses every
// count the library would allocate for that the archive cannot hold. It keeps nothing but a few
// numbers: the header is read as a stream.

// sevenZipHeaderMax bounds the unpacked size of an encoded (compressed) header. 7-Zip compresses
// the header of every archive it writes, and a header holds each entry's name in UTF-16, three
// times, attributes, size and checksum: about 130 bytes for an entry with a 40-character path and
// 560 for one with 260. 100,000 entries (max_entries' default) of long paths fit in 64 MiB. The
// header is unpacked as a stream (twice: its bytes are counted first, and bound the counts), so
// the bound limits the time spent, not memory.
const sevenZipHeaderMax = 64 << 20

// sevenZipMaxCoderStreams is 7-Zip's own limit on the coders of a folder and on their streams
// (k_Scan_NumCoders_MAX and k_Scan_NumCodersStreams_in_Folder_MAX in 7zIn.cpp).
const sevenZipMaxCoderStreams = 64

// 7z property IDs (7zFormat.txt).
const (
	szEnd              = 0x00
	szHeader           = 0x01
	szMainStreamsInfo  = 0x04
	szFilesInfo        = 0x05
	szPackInfo         = 0x06
	szUnpackInfo       = 0x07
	szSubStreamsInfo   = 0x08
	szSize             = 0x09
	szCRC              = 0x0a
	szFolder           = 0x0b
	szCodersUnpackSize = 0x0c
	szNumUnpackStream  = 0x0d
	szEncodedHeader    = 0x17
)

// errSevenZipSyntax is a header the walk cannot follow. The library cannot follow it either (the
// walk reads what it reads, in the same order), so it stops there too, with its own message.
var errSevenZipSyntax = errors.New("7z header syntax")

// checkSevenZipHeader returns an error in plain words when the header of the 7z archive f declares
// more than maxEntries entries, or a count no header of its size can hold, or (encoded) unpacks
// to more than sevenZipHeaderMax. It returns nil for a header it cannot read: the library's own
// error then says why.
func checkSevenZipHeader(f *os.File, size int64, maxEntries int) error {
	base, ok := sevenZipStart(f)
	if !ok {
		return nil // the library finds no archive
	}
	var sh [32]byte
	if _, err := f.ReadAt(sh[:], base); err != nil {
		return nil
	}
	size -= base // from here on, offsets are the archive's own, as the library's are
	off, n := binary.LittleEndian.Uint64(sh[12:]), binary.LittleEndian.Uint64(sh[20:])
	if off >= uint64(size) || 32+off >= uint64(size) {
		return nil // the library reads no header
	}
	// The library reads a header cut short by the end of the file as far as it goes, allocating
	// as it reads: only what is there holds anything.
	n = min(n, uint64(size)-32-off)
	w := &szWalk{maxEntries: uint64(maxEntries), base: base}
	r := newSzReader(io.NewSectionReader(f, base+int64(32+off), int64(n)), int64(n))
	id, err := r.byte()
	if err != nil {
		return nil
	}
	switch id {
	case szHeader:
		err = w.header(r)
	case szEncodedHeader:
		err = w.encodedHeader(f, r)
	}
	if errors.Is(err, errSevenZipSyntax) {
		return nil
	}
	return err
}

// sevenZipStart returns where the library finds the 7z archive in f, as bodgit/sevenzip's
// NewReader does: the signature at the start, or else the first of those in the first 1 MiB (a
// self-extracting stub before it) whose start header's checksum is right. (A fuzzer found the
// archive behind 8 bytes of stub that the walk, reading only at 0, let through to a fatal
// allocation.)
func sevenZipStart(f *os.File) (int64, bool) {
	sig := []byte{'7', 'z', 0xbc, 0xaf, 0x27, 0x1c}
	const chunk, limit = 4096, 1 << 20
	buf := make([]byte, chunk+len(sig))
	for at := int64(0); at < limit; at += chunk {
		n, err := f.ReadAt(buf, at)
		for i := 0; ; {
			k := bytes.Index(buf[i:n], sig)
			if k < 0 {
				break
			}
			if off := at + int64(i+k); off == 0 || sevenZipStartValid(f, off) {
				return off, true
			}
			i += k + 1
		}
		if err != nil {
			break
		}
	}
	return 0, false
}

// sevenZipStartValid reports whether the start header at off has the checksum it declares.
func sevenZipStartValid(f *os.File, off int64) bool {
	var sh [32]byte
	if _, err := f.ReadAt(sh[:], off); err != nil {
		return false
	}
	return crc32.ChecksumIEEE(sh[12:32]) == binary.LittleEndian.Uint32(sh[8:])
}

// szWalk is one walk of a header.
type szWalk struct {
	maxEntries uint64
	base       int64 // where the archive starts in its file
	// Of the last streams info walked, what decoding an encoded header needs.
	folders  uint64
	packPos  uint64
	packSize uint64 // the first pack stream's
	coders   uint64 // the first folder's
	method   []byte // the first folder's first coder's
	props    []byte
	unpack   uint64 // the first folder's first output's size
}

// szReader reads a header, counting the bytes left of it.
type szReader struct {
	br   *bufio.Reader
	size int64 // the header's size, for messages
	left int64
}

func newSzReader(r io.Reader, size int64) *szReader {
	return &szReader{br: bufio.NewReader(io.LimitReader(r, size)), size: size, left: size}
}

func (r *szReader) byte() (byte, error) {
	b, err := r.br.ReadByte()
	if err != nil {
		return 0, errSevenZipSyntax
	}
	r.left--
	return b, nil
}

// number reads a 7z NUMBER: the first byte's leading one bits count the bytes that follow.
func (r *szReader) number() (uint64, error) {
	b, err := r.byte()
	if err != nil {
		return 0, err
	}
	var v uint64
	mask := byte(0x80)
	for i := 0; i < 8; i++ {
		if b&mask == 0 {
			return v | uint64(b&(mask-1))<<(8*i), nil
		}
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c) << (8 * i)
		mask >>= 1
	}
	return v, nil
}

// count reads a count of things each of which takes at least one more byte of the header, and
// refuses one the rest of the header cannot hold.
func (r *szReader) count(what string) (uint64, error) {
	n, err := r.number()
	if err != nil {
		return 0, err
	}
	if n > uint64(max(r.left, 0)) {
		return 0, fmt.Errorf("corrupt archive: its 7z header declares %d %s in %d bytes", n, what, r.size)
	}
	return n, nil
}

// tooManyEntries is the error of a count that implies more than max entries.
func tooManyEntries(max, n uint64, what string) error {
	return fmt.Errorf("archive has more than %d entries (its 7z header declares %d %s)", max, n, what)
}

func (r *szReader) skip(n uint64) error {
	if n > uint64(max(r.left, 0)) {
		return errSevenZipSyntax
	}
	if _, err := r.br.Discard(int(n)); err != nil {
		return errSevenZipSyntax
	}
	r.left -= int64(n)
	return nil
}

func (r *szReader) expect(id byte) error {
	b, err := r.byte()
	if err != nil || b != id {
		return errSevenZipSyntax
	}
	return nil
}

// header walks a plain header up to its files' count, which is the last count the library
// allocates for: the file properties after it are read per file.
func (w *szWalk) header(r *szReader) error {
	id, err := r.byte()
	if err != nil {
		return err
	}
	if id == szMainStreamsInfo {
		if err := w.streamsInfo(r); err != nil {
			return err
		}
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	if id != szFilesInfo {
		return nil // no files, or properties the library refuses
	}
	files, err := r.number()
	if err != nil {
		return err
	}
	if files > w.maxEntries {
		return fmt.Errorf("archive has %d entries, more than %d", files, w.maxEntries)
	}
	// A file either has data, whose size takes at least a byte of the header (the last in a
	// folder takes its folder's), or is marked empty by one bit of kEmptyStream: 7-Zip refuses
	// a header with more files than that, and so does this.
	if files > 9*uint64(r.size) {
		return fmt.Errorf("corrupt archive: its 7z header declares %d entries in %d bytes", files, r.size)
	}
	return nil
}

// encodedHeader walks the streams info of an encoded header, then the header it unpacks to.
func (w *szWalk) encodedHeader(f *os.File, r *szReader) error {
	if err := w.streamsInfo(r); err != nil {
		return err
	}
	if w.folders != 1 || w.coders == 0 {
		return nil // the library refuses it
	}
	if w.unpack > sevenZipHeaderMax {
		return fmt.Errorf("corrupt archive: its 7z header unpacks to %d bytes, more than %d", w.unpack, sevenZipHeaderMax)
	}
	if w.coders != 1 {
		return errors.New("unsupported archive: its 7z header is compressed with a chain of methods Sluice does not read")
	}
	open := func() (io.Reader, error) {
		return w.decoder(io.NewSectionReader(f, w.base+int64(min(32+w.packPos, 1<<62)), int64(min(w.packSize, 1<<62))))
	}
	dec, err := open()
	if err != nil {
		return err
	}
	// The library reads the unpacked header up to its declared size, allocating for each count
	// as it meets it: the bytes that are really there (fewer, when the stream ends or fails
	// first) are counted first, and bound the counts.
	n, _ := io.Copy(io.Discard, io.LimitReader(dec, int64(w.unpack)))
	if dec, err = open(); err != nil {
		return err
	}
	inner := newSzReader(dec, n)
	if err := inner.expect(szHeader); err != nil {
		return err
	}
	return w.header(inner)
}

// decoder returns the unpacked stream of the encoded header's one coder, decoded as the library
// decodes it (the same packages). Its dictionary is the declared one up to sevenZipHeaderMax,
// which is as large as a header may be: the declared one may be 4 GiB.
func (w *szWalk) decoder(packed io.Reader) (io.Reader, error) {
	dict := uint32(sevenZipHeaderMax)
	switch {
	case bytes.Equal(w.method, []byte{0x00}): // copy
		return packed, nil
	case bytes.Equal(w.method, []byte{0x03, 0x01, 0x01}) && len(w.props) == 5: // LZMA
		// The properties byte, the dictionary size and the unpacked size: the .lzma header.
		var h [13]byte
		h[0] = w.props[0]
		binary.LittleEndian.PutUint32(h[1:], min(binary.LittleEndian.Uint32(w.props[1:]), dict))
		binary.LittleEndian.PutUint64(h[5:], w.unpack)
		d, err := lzma.NewReader(io.MultiReader(bytes.NewReader(h[:]), packed))
		if err != nil {
			return nil, errSevenZipSyntax
		}
		return d, nil
	case bytes.Equal(w.method, []byte{0x21}) && len(w.props) == 1 && w.props[0] <= 40: // LZMA2
		if p := w.props[0]; p < 40 {
			dict = min(dict, (2|uint32(p)&1)<<(p/2+11))
		}
		d, err := lzma.Reader2Config{DictCap: int(dict)}.NewReader2(packed)
		if err != nil {
			return nil, errSevenZipSyntax
		}
		return d, nil
	case bytes.Equal(w.method, []byte{0x04, 0x01, 0x08}): // deflate
		return flate.NewReader(packed), nil
	case bytes.Equal(w.method, []byte{0x04, 0x02, 0x02}): // bzip2
		return bzip2.NewReader(packed), nil
	}
	return nil, errors.New("unsupported archive: its 7z header is compressed with a method Sluice does not read")
}

// streamsInfo walks a StreamsInfo block, as the library's readStreamsInfo.
func (w *szWalk) streamsInfo(r *szReader) error {
	id, err := r.byte()
	if err != nil {
		return err
	}
	if id == szPackInfo {
		if err := w.packInfo(r); err != nil {
			return err
		}
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	w.folders = 0
	if id == szUnpackInfo {
		if err := w.unpackInfo(r); err != nil {
			return err
		}
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	if id == szSubStreamsInfo {
		if err := w.subStreamsInfo(r); err != nil {
			return err
		}
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	if id != szEnd {
		return errSevenZipSyntax
	}
	return nil
}

func (w *szWalk) packInfo(r *szReader) error {
	var err error
	if w.packPos, err = r.number(); err != nil {
		return err
	}
	streams, err := r.count("pack streams")
	if err != nil {
		return err
	}
	// A folder has at most sevenZipMaxCoderStreams pack streams, and there are no more folders
	// than entries (see unpackInfo).
	if streams > sevenZipMaxCoderStreams*w.maxEntries {
		return tooManyEntries(w.maxEntries, streams, "pack streams")
	}
	id, err := r.byte()
	if err != nil {
		return err
	}
	if id == szSize {
		for i := range streams {
			s, err := r.number()
			if err != nil {
				return err
			}
			if i == 0 {
				w.packSize = s
			}
		}
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	return w.digestsThenEnd(r, id, streams)
}

// unpackInfo walks the folders and their unpacked sizes.
func (w *szWalk) unpackInfo(r *szReader) error {
	if err := r.expect(szFolder); err != nil {
		return err
	}
	folders, err := r.count("folders")
	if err != nil {
		return err
	}
	// Each folder holds at least one entry's data: 7-Zip writes no empty folder.
	if folders > w.maxEntries {
		return tooManyEntries(w.maxEntries, folders, "folders")
	}
	if err := r.expect(0); err != nil { // "external": the library reads only inline folders
		return err
	}
	var outs uint64 // output streams of all folders: each has its size below
	for i := range folders {
		o, err := w.folder(r, i == 0)
		if err != nil {
			return err
		}
		outs += o
	}
	if err := r.expect(szCodersUnpackSize); err != nil {
		return err
	}
	if outs > uint64(max(r.left, 0)) {
		return fmt.Errorf("corrupt archive: its 7z header declares %d unpacked sizes in %d bytes", outs, r.size)
	}
	for i := range outs {
		s, err := r.number()
		if err != nil {
			return err
		}
		if i == 0 {
			w.unpack = s
		}
	}
	w.folders = folders
	id, err := r.byte()
	if err != nil {
		return err
	}
	return w.digestsThenEnd(r, id, folders)
}

// folder walks one folder's coders and returns its count of output streams. The library makes
// slices of the coders, of the outputs less one (the bind pairs) and of the inputs less the bind
// pairs (the packed streams): each is bounded by 7-Zip's limit.
func (w *szWalk) folder(r *szReader, first bool) (uint64, error) {
	coders, err := r.count("coders in a folder")
	if err != nil {
		return 0, err
	}
	if coders > sevenZipMaxCoderStreams {
		return 0, fmt.Errorf("corrupt archive: its 7z header declares a folder of %d coders", coders)
	}
	var in, out uint64
	for i := range coders {
		flags, err := r.byte()
		if err != nil {
			return 0, err
		}
		id := make([]byte, flags&0x0f)
		if _, err := io.ReadFull(r.br, id); err != nil {
			return 0, errSevenZipSyntax
		}
		r.left -= int64(len(id))
		ci, co := uint64(1), uint64(1)
		if flags&0x10 != 0 {
			if ci, err = r.number(); err != nil {
				return 0, err
			}
			if co, err = r.number(); err != nil {
				return 0, err
			}
			ci, co = min(ci, 1<<32), min(co, 1<<32) // summed below, then bounded
		}
		in, out = in+ci, out+co
		var props []byte
		if flags&0x20 != 0 {
			n, err := r.count("bytes of coder properties")
			if err != nil {
				return 0, err
			}
			if first && i == 0 && n <= 64 {
				props = make([]byte, n)
				if _, err := io.ReadFull(r.br, props); err != nil {
					return 0, errSevenZipSyntax
				}
				r.left -= int64(n)
			} else if err := r.skip(n); err != nil {
				return 0, err
			}
		}
		if first && i == 0 {
			w.method, w.props = id, props
		}
	}
	if first {
		w.coders = coders
	}
	if in > sevenZipMaxCoderStreams || out > sevenZipMaxCoderStreams || out == 0 || in < out-1 {
		return 0, fmt.Errorf("corrupt archive: its 7z header declares a folder of %d inputs and %d outputs", in, out)
	}
	for range 2 * (out - 1) { // bind pairs: an input and an output index each
		if _, err := r.number(); err != nil {
			return 0, err
		}
	}
	if packed := in - (out - 1); packed > 1 {
		for range packed {
			if _, err := r.number(); err != nil {
				return 0, err
			}
		}
	}
	return out, nil
}

// subStreamsInfo walks the counts of entries in each folder, their sizes and checksums.
func (w *szWalk) subStreamsInfo(r *szReader) error {
	id, err := r.byte()
	if err != nil {
		return err
	}
	streams := w.folders // one per folder unless the counts follow
	if id == szNumUnpackStream {
		streams = 0
		for range w.folders {
			n, err := r.number()
			if err != nil {
				return err
			}
			if n > w.maxEntries-min(streams, w.maxEntries) {
				return tooManyEntries(w.maxEntries, n, "entries with data in one folder")
			}
			streams += n
		}
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	// Each stream is an entry with data.
	if streams > w.maxEntries {
		return tooManyEntries(w.maxEntries, streams, "entries with data")
	}
	if id == szSize {
		// Every stream but each folder's last has its size here.
		if streams > uint64(max(r.left, 0))+w.folders {
			return fmt.Errorf("corrupt archive: its 7z header declares %d entries with data in %d bytes", streams, r.size)
		}
		for range streams - min(streams, w.folders) {
			if _, err := r.number(); err != nil {
				return err
			}
		}
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	return w.digestsThenEnd(r, id, streams)
}

// digestsThenEnd ends a section whose property id was just read: n checksums when id announces
// them, then the section's end.
func (w *szWalk) digestsThenEnd(r *szReader, id byte, n uint64) error {
	if id == szCRC {
		if err := w.digests(r, n); err != nil {
			return err
		}
		var err error
		if id, err = r.byte(); err != nil {
			return err
		}
	}
	if id != szEnd {
		return errSevenZipSyntax
	}
	return nil
}

// digests walks n checksums: which are defined (all, or a bit each), then four bytes each.
func (w *szWalk) digests(r *szReader, n uint64) error {
	all, err := r.byte()
	if err != nil {
		return err
	}
	defined := n
	if all == 0 {
		defined = 0
		var b byte
		for i := range n {
			if i%8 == 0 {
				if b, err = r.byte(); err != nil {
					return err
				}
			}
			if b&(0x80>>(i%8)) != 0 {
				defined++
			}
		}
	}
	return r.skip(4 * defined)
}
