package unpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/zip"
	// The archive library registers bzip2, zstd and xz decompressors for zip entries with
	// klauspost/compress/zip; importing it here makes sure they are registered.
	_ "github.com/mholt/archives"

	"github.com/sluice-project/sluice/internal/action"
)

func isZip(head []byte) bool {
	return bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")) ||
		bytes.HasPrefix(head, []byte("PK\x07\x08"))
}

const special = fs.ModeSymlink | fs.ModeDevice | fs.ModeCharDevice | fs.ModeNamedPipe | fs.ModeSocket | fs.ModeIrregular

// unpackZip unpacks a zip file in central-directory order.
func (r *run) unpackZip(f *os.File) error {
	if n, ok := zipEntryCount(f, r.size); ok && n > uint64(r.lim.MaxEntries) {
		// Refused before zip.NewReader, which would hold every directory record in memory.
		r.fatal = fmt.Errorf("archive has %d entries, more than %d", n, r.lim.MaxEntries)
		return nil
	}
	zr, err := zip.NewReader(f, r.size)
	if err != nil {
		r.fatal = fmt.Errorf("corrupt archive: %s", cleanError(err))
		return nil
	}
	var legacy []string
	for _, zf := range zr.File {
		if zf.Flags&0x800 == 0 && !utf8.ValidString(zf.Name) {
			legacy = append(legacy, zf.Name)
		}
	}
	cm := legacyNames(legacy)
	// Entries whose children an earlier attempt recorded are passed over unread: emit call i
	// makes child i, and the checks before emit depend only on the directory.
	resume := action.Resume(r.out)
	var selfCRC *uint32
	for _, zf := range zr.File {
		if !r.countEntry() {
			return nil
		}
		raw := zf.Name
		if zf.Flags&0x800 == 0 && !utf8.ValidString(raw) {
			raw = decodeLegacy(raw, cm)
		}
		name := entryName(raw)
		mode := zf.Mode()
		if mode&fs.ModeSymlink != 0 {
			// Recorded, so the user sees it; never followed or unpacked.
			r.skip(name, fmt.Sprintf("a symbolic link to %q, not followed", zipLinkTarget(zf)))
			continue
		}
		if mode.IsDir() || (len(zf.Name) > 0 && zf.Name[len(zf.Name)-1] == '/') || mode&special != 0 {
			continue
		}
		if zf.Flags&0x1 != 0 {
			r.skip(name, "password-protected")
			continue
		}
		usize, csize := zf.UncompressedSize64, zf.CompressedSize64
		if int64(usize) == r.size && usize > 0 {
			// Maybe the archive itself (droste.zip): compare checksums, computed once.
			if selfCRC == nil {
				c, err := fileCRC(f)
				if err != nil {
					return fmt.Errorf("checksum archive: %w", err)
				}
				selfCRC = &c
			}
			if *selfCRC == zf.CRC32 {
				r.skip(name, "archive contains itself")
				continue
			}
		}
		if usize > uint64(r.lim.RatioFloor) {
			if ratio := float64(usize) / float64(max(csize, 1)); ratio > r.lim.MaxRatio {
				r.skip(name, ratioError(ratio, r.lim.MaxRatio).msg)
				continue
			}
		}
		if left := r.budget.max - r.budget.used; usize > uint64(max(left, 0)) {
			r.skip(name, fmt.Sprintf("expands to %d bytes, more than the %d bytes left of the archive's limit (%g× its size)",
				usize, max(left, 0), r.lim.ExpansionFactor))
			continue
		}
		if r.emitted < resume {
			r.emitted++
			r.budget.used += int64(usize)
			continue
		}
		off, err := zf.DataOffset()
		if err != nil {
			r.skip(name, cleanError(err))
			continue
		}
		r.reportProgress(off)
		rc, err := zf.Open()
		if err != nil {
			if errors.Is(err, zip.ErrAlgorithm) {
				r.skip(name, fmt.Sprintf("unsupported compression method %d", zf.Method))
			} else {
				r.skip(name, cleanError(err))
			}
			continue
		}
		// The declared sizes may lie; the reader is bounded by the stored size and zip's own
		// check that no more than the declared size comes out, and the ratio is measured too.
		limit := r.lim.MaxRatio * float64(max(csize, 1))
		ratio := func(n int64) error {
			if n > r.lim.RatioFloor && float64(n) > limit {
				return ratioError(float64(n)/float64(max(csize, 1)), r.lim.MaxRatio)
			}
			return nil
		}
		ok := r.emit(name, rc, ratio)
		rc.Close()
		if !ok {
			return nil
		}
	}
	r.reportProgress(r.size)
	return nil
}

// zipLinkTarget returns a symlink entry's target (its content), at most 256 bytes of it.
func zipLinkTarget(zf *zip.File) string {
	rc, err := zf.Open()
	if err != nil {
		return "?"
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 256))
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// zipEntryCount reads the entry count from the end-of-central-directory record (or its zip64
// form) without reading the directory.
func zipEntryCount(f *os.File, size int64) (uint64, bool) {
	const eocdLen = 22
	n := min(size, 65535+eocdLen)
	if n < eocdLen {
		return 0, false
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-n); err != nil && err != io.EOF {
		return 0, false
	}
	i := bytes.LastIndex(buf, []byte("PK\x05\x06"))
	if i < 0 || len(buf)-i < eocdLen {
		return 0, false
	}
	count := uint64(binary.LittleEndian.Uint16(buf[i+10:]))
	if count != 0xffff {
		return count, true
	}
	// zip64: the locator sits just before the record and points at the zip64 record.
	if i < 20 || !bytes.Equal(buf[i-20:i-16], []byte("PK\x06\x07")) {
		return 0, false
	}
	off := int64(binary.LittleEndian.Uint64(buf[i-20+8:]))
	var rec [56]byte
	if off < 0 || off > size-56 {
		return 0, false
	}
	if _, err := f.ReadAt(rec[:], off); err != nil || !bytes.Equal(rec[:4], []byte("PK\x06\x06")) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(rec[32:]), true
}

func fileCRC(f *os.File) (uint32, error) {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}
