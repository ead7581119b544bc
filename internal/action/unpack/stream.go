package unpack

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"

	"github.com/mholt/archives"
	"github.com/nwaples/rardecode/v2"
)

// unpackStream unpacks the formats of github.com/mholt/archives other than zip: tar, 7z, rar,
// compressed tars and single compressed files.
func (r *run) unpackStream(f *os.File, contentType string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if !archiveLibraryPanicked() {
				panic(v) // Sluice's own bug: action.Safe records it with its stack
			}
			r.fatal = errors.New("corrupt archive: its headers contradict themselves (the archive reader gave up)")
			err = nil
		}
	}()
	switch sevenZipState(f) {
	case sevenZipEmpty:
		r.reportProgress(r.size)
		return nil
	case sevenZipEncryptedHeaders:
		r.fatal = errors.New("password-protected")
		return nil
	case sevenZipPlain:
		if err := checkSevenZipHeader(f, r.size, r.lim.MaxEntries); err != nil {
			r.fatal = err
			return nil
		}
	}
	cf := &countingFile{f: f}
	// Identify by content only: matching by name is order-dependent in the library (it walks a
	// map) and a misleading name such as "x.zip.gz" would pick the wrong inner format.
	format, _, err := archives.Identify(r.ctx, "", cf)
	if errors.Is(err, archives.NoMatch) {
		if contentType == "" {
			contentType = "unknown"
		}
		r.fatal = fmt.Errorf("unsupported archive format: %s", contentType)
		return nil
	}
	if err != nil {
		r.fatal = fmt.Errorf("corrupt archive: %s", cleanError(err))
		return nil
	}
	if _, err := cf.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind archive: %w", err)
	}
	cf.n.Store(0)
	// Solid 7z and rar blocks and tar streams do not say what each entry cost compressed, so
	// the ratio is the archive's: expanded bytes so far over archive bytes read so far. When it
	// trips, the archive is a bomb and unpacking stops.
	ratio := func(int64) error {
		used := r.budget.used
		if used <= r.lim.RatioFloor {
			return nil
		}
		if q := float64(used) / float64(max(cf.n.Load(), 1)); q > r.lim.MaxRatio {
			e := ratioError(q, r.lim.MaxRatio)
			e.fatal = true
			return e
		}
		return nil
	}
	switch fm := format.(type) {
	case archives.Extractor:
		err = fm.Extract(r.ctx, cf, func(ctx context.Context, fi archives.FileInfo) error {
			return r.streamEntry(fi, cf, ratio)
		})
	case archives.Decompressor:
		rc, oerr := fm.OpenReader(cf)
		if oerr != nil {
			r.fatal = fmt.Errorf("corrupt archive: %s", cleanError(oerr))
			return nil
		}
		defer rc.Close()
		if !r.countEntry() {
			return nil
		}
		r.reportProgress(0)
		name := decompressedName(path.Base(r.parent))
		if r.emit(name, rc, ratio) {
			r.reportProgress(r.size)
		}
		// A corrupt stream fails the only child: say the archive is corrupt rather than
		// "1 entry skipped".
		if r.fatal == nil && len(r.skipped) == 1 {
			r.fatal = fmt.Errorf("corrupt archive: %s", r.skipped[0])
			r.skipped = nil
		}
		return nil
	default:
		r.fatal = fmt.Errorf("unsupported archive format: %s", format.MediaType())
		return nil
	}
	switch {
	case r.outErr != nil || r.fatal != nil:
		// Stopped on purpose; the walk's own error (if any) is a consequence.
	case err != nil && r.ctx.Err() != nil:
		r.outErr = r.ctx.Err()
	case err != nil && isPasswordError(err.Error()):
		r.fatal = errors.New("password-protected")
	case err != nil:
		r.fatal = fmt.Errorf("corrupt archive: %s", cleanError(unwrapHandling(err)))
	default:
		r.reportProgress(r.size)
	}
	return nil
}

// archiveLibraries are the packages that parse an archive's structure. They trust what its
// headers declare: bodgit/sevenzip dereferences the streams of files a header lists without
// any, and indexes sizes by counts it never compared.
var archiveLibraries = []string{"github.com/bodgit/", "github.com/mholt/archives", "github.com/nwaples/rardecode"}

// archiveLibraryPanicked reports whether the panic being recovered (it must be called from the
// deferred function that recovers) was raised in one of archiveLibraries: the archive's fault,
// refused like any other corrupt archive. The frames below the deferred call are still those of
// the panic; the first outside the runtime is where it was raised.
func archiveLibraryPanicked() bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(1, pc)])
	panicking := false
	for {
		fr, more := frames.Next()
		switch {
		case fr.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(fr.Function, "runtime."):
			for _, p := range archiveLibraries {
				if strings.HasPrefix(fr.Function, p) {
					return true
				}
			}
			return false
		}
		if !more {
			return false
		}
	}
}

type sevenZip int

const (
	notSevenZip sevenZip = iota
	sevenZipPlain
	sevenZipEmpty            // a signature header and nothing after it
	sevenZipEncryptedHeaders // its names are encrypted too: nothing can be listed
)

// sevenZipState reads a 7z archive's start header and the header it points to, to tell an empty
// archive (the library reports EOF) and one whose header is AES-encrypted (the library reports
// "unexpected id") from a corrupt one. An encoded header names its coders in the clear.
func sevenZipState(f *os.File) sevenZip {
	var sh [32]byte
	if n, _ := f.ReadAt(sh[:], 0); n < 32 || !bytes.HasPrefix(sh[:], []byte("7z\xbc\xaf\x27\x1c")) {
		return notSevenZip
	}
	off, size := binary.LittleEndian.Uint64(sh[12:]), binary.LittleEndian.Uint64(sh[20:])
	if size == 0 {
		return sevenZipEmpty
	}
	if size > 1<<20 || off > 1<<62 {
		return sevenZipPlain
	}
	h := make([]byte, size)
	if n, _ := f.ReadAt(h, int64(32+off)); n < len(h) {
		return sevenZipPlain
	}
	// kEncodedHeader (0x17) whose folder uses the AES-256 + SHA-256 coder (06 F1 07 01).
	if h[0] == 0x17 && bytes.Contains(h, []byte{0x06, 0xf1, 0x07, 0x01}) {
		return sevenZipEncryptedHeaders
	}
	return sevenZipPlain
}

// errStop ends a walk early; the reason is recorded in the run.
var errStop = fs.SkipAll

// streamEntry handles one entry of a walk.
func (r *run) streamEntry(fi archives.FileInfo, cf *countingFile, ratio func(int64) error) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	if !r.countEntry() {
		return errStop
	}
	name := entryName(decodeName(fi.NameInArchive))
	if h, ok := fi.Header.(*tar.Header); ok && (h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink) {
		// Recorded, so the user sees it; never followed or unpacked.
		kind := "symbolic"
		if h.Typeflag == tar.TypeLink {
			kind = "hard"
		}
		r.skip(name, fmt.Sprintf("a %s link to %q, not followed", kind, truncate(strings.ToValidUTF8(h.Linkname, "\uFFFD"), 256)))
		return nil
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		r.skip(name, "a symbolic link, not followed")
		return nil
	}
	if fi.IsDir() || fi.Mode()&special != 0 || !fi.Mode().IsRegular() {
		return nil
	}
	switch h := fi.Header.(type) {
	case *tar.Header:
		// Only real file types are unpacked.
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeGNUSparse {
			return nil
		}
	case *rardecode.FileHeader:
		if h.Encrypted {
			r.skip(name, "password-protected")
			return nil
		}
	}
	r.reportProgress(cf.n.Load())
	rc, err := fi.Open()
	if err != nil {
		r.skip(name, cleanError(err))
		return nil
	}
	ok := r.emit(name, rc, ratio)
	rc.Close()
	if !ok {
		return errStop
	}
	return nil
}

// unwrapHandling strips the archive library's "handling file: <name>: " wrapping.
func unwrapHandling(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
