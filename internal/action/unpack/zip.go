package unpack

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/zip"
	"golang.org/x/text/encoding"
	// The archive library registers bzip2, zstd and xz decompressors for zip entries with
	// klauspost/compress/zip; importing it here makes sure they are registered.
	_ "github.com/mholt/archives"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/zipend"
)

func isZip(head []byte) bool {
	return bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")) ||
		bytes.HasPrefix(head, []byte("PK\x07\x08"))
}

const special = fs.ModeSymlink | fs.ModeDevice | fs.ModeCharDevice | fs.ModeNamedPipe | fs.ModeSocket | fs.ModeIrregular

// unpackZip unpacks a zip file in central-directory order, reading the directory a page at a
// time where it can (see zipDir).
func (r *run) unpackZip(f *os.File) error {
	if n, ok := zipEntryCount(f, r.size); ok && n > uint64(r.lim.MaxEntries) {
		// Refused before the directory is read.
		r.fatal = fmt.Errorf("archive has %d entries, more than %d", n, r.lim.MaxEntries)
		return nil
	}
	// A first pass reads the whole directory, so that a corrupt one is refused before any
	// entry is unpacked, and finds the code page of names that are not UTF-8 from all of them.
	var legacy []string
	held := 0
	var total float64 // the entries' share of the archive's bytes (zipShare), for progress
	collect := func(files []*zip.File) error {
		for _, zf := range files {
			total += zipShare(zf)
			if zf.Flags&0x800 == 0 && !utf8.ValidString(zf.Name) && held < maxLegacyNames {
				legacy = append(legacy, zf.Name)
				held += len(zf.Name)
			}
		}
		return nil
	}
	var each func(fn func(files []*zip.File) error) error
	if d, ok := openZipDir(f, r.size); ok {
		if d.each(collect) == nil {
			each = d.each
		} else {
			// A directory the pages refuse is read whole, so that whether it is corrupt, and
			// what it holds, is the library's verdict (FuzzZipDirPages).
			legacy, held, total = nil, 0, 0
		}
	}
	if each == nil {
		if err := checkZipDirWhole(f, r.size, r.lim.MaxEntries); err != nil {
			r.fatal = err
			return nil
		}
		zr, err := zip.NewReader(f, r.size)
		if err != nil {
			r.fatal = fmt.Errorf("corrupt archive: %s", cleanError(err))
			return nil
		}
		each = func(fn func(files []*zip.File) error) error { return fn(zr.File) }
		if err := each(collect); err != nil {
			return err
		}
	}
	cm := legacyNames(legacy)
	legacy = nil
	// Entries whose children an earlier attempt recorded are passed over unread: emit call i
	// makes child i, and the checks before emit depend only on the directory.
	z := &zipRun{run: r, f: f, cm: cm, resume: action.Resume(r.out), total: total}
	err := each(func(files []*zip.File) error {
		for _, zf := range files {
			if stop, err := z.entry(zf); stop || err != nil {
				return cmp.Or(err, errStop)
			}
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the archive's directory: %w", err)
	}
	r.reportProgress(r.size)
	return nil
}

// maxLegacyNames bounds the bytes of names that are not UTF-8 read to find their code page.
const maxLegacyNames = 1 << 20

// zipRun is the state of a zip's unpack across the pages of its directory.
type zipRun struct {
	*run
	f       *os.File
	cm      encoding.Encoding
	resume  int
	selfCRC *uint32
	// total is the sum of the entries' zipShare and done that of the entries passed so far:
	// progress is done/total, so each child's slice of the archive's progress is its own
	// entry's share, and the children together get all of it. Offsets in the file would leave
	// the central directory (a third of an archive of small files) and the last entry to no
	// child: the job's progress would lag its documents by that much until the end.
	total, done float64
}

// zipShare is the archive bytes an entry accounts for: its compressed data and its two
// headers (local and central, each with its name).
func zipShare(zf *zip.File) float64 {
	return float64(zf.CompressedSize64) + 30 + 46 + 2*float64(len(zf.Name)) + float64(len(zf.Extra))
}

// entry unpacks one entry; stop means the archive must stop.
func (z *zipRun) entry(zf *zip.File) (stop bool, err error) {
	r := z.run
	z.done += zipShare(zf)
	if !r.countEntry() {
		return true, nil
	}
	raw := zf.Name
	if zf.Flags&0x800 == 0 && !utf8.ValidString(raw) {
		raw = decodeLegacy(raw, z.cm)
	}
	name := entryName(raw)
	mode := zf.Mode()
	if mode&fs.ModeSymlink != 0 {
		// Recorded, so the user sees it; never followed or unpacked.
		r.skip(name, fmt.Sprintf("a symbolic link to %q, not followed", zipLinkTarget(zf)))
		return false, nil
	}
	if mode.IsDir() || (len(zf.Name) > 0 && zf.Name[len(zf.Name)-1] == '/') || mode&special != 0 {
		return false, nil
	}
	if zf.Flags&0x1 != 0 {
		r.skip(name, "password-protected")
		return false, nil
	}
	usize, csize := zf.UncompressedSize64, zf.CompressedSize64
	if int64(usize) == r.size && usize > 0 {
		// Maybe the archive itself (droste.zip): compare checksums, computed once.
		if z.selfCRC == nil {
			c, err := fileCRC(z.f)
			if err != nil {
				return true, fmt.Errorf("checksum archive: %w", err)
			}
			z.selfCRC = &c
		}
		if *z.selfCRC == zf.CRC32 {
			r.skip(name, "archive contains itself")
			return false, nil
		}
	}
	if usize > uint64(r.lim.RatioFloor) {
		if ratio := float64(usize) / float64(max(csize, 1)); ratio > r.lim.MaxRatio {
			r.skip(name, ratioError(ratio, r.lim.MaxRatio).msg)
			return false, nil
		}
	}
	if left := r.budget.max - r.budget.used; usize > uint64(max(left, 0)) {
		r.skip(name, fmt.Sprintf("expands to %d bytes, more than the %d bytes left of the archive's limit (%g× its size)",
			usize, max(left, 0), r.lim.ExpansionFactor))
		return false, nil
	}
	if r.emitted < z.resume {
		r.emitted++
		r.budget.used += int64(usize)
		return false, nil
	}
	if _, err := zf.DataOffset(); err != nil {
		r.skip(name, cleanError(err))
		return false, nil
	}
	// Up to the end of this entry: the child it makes gets the slice since the last child.
	r.reportFraction(z.done / z.total)
	rc, err := zf.Open()
	if err != nil {
		if errors.Is(err, zip.ErrAlgorithm) {
			r.skip(name, fmt.Sprintf("unsupported compression method %d", zf.Method))
		} else {
			r.skip(name, cleanError(err))
		}
		return false, nil
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
	return !ok, nil
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
	e, ok := zipend.Read(f, size)
	return e.Records, ok
}

func fileCRC(f *os.File) (uint32, error) {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}
