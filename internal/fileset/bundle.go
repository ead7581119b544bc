package fileset

import (
	"archive/zip"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"strings"

	"github.com/sluice-project/sluice/internal/zipend"
)

// listBundle reads a dataset's bundle, the zip at zipPath, and returns its interior files with
// their sizes and digests: at most maxEntries files (directories aside), maxBytes decompressed in
// all (a zip bomb ends there), each path safe ([SafePath]). Its errors are a status error:
// platform-error for an archive that is not a zip, whose directory is not where its end says,
// or that names an unsafe path; body-too-large past the bounds.
//
// The directory's end is read first, and a directory that declares more entries, or more bytes
// than maxEntries could take, is refused before archive/zip reads it: that reads every record
// into memory (3.7 times the directory's bytes), and past the count and length the end declares,
// from where it says the directory starts up to the first bytes that are not a record.
func listBundle(zipPath string, maxEntries int, maxBytes int64) ([]ManifestFile, error) {
	f, err := os.Open(zipPath)
	if err != nil {
		return nil, failWith(StatusPlatformError, "open the bundle: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, failWith(StatusPlatformError, "open the bundle: %v", err)
	}
	end, ok := zipend.Read(f, fi.Size())
	switch maxDir := uint64(maxEntries)*bundleHeaderBytes + 64<<10; {
	case !ok:
		return nil, failWith(StatusPlatformError, "the bundle is not a zip archive: it has no end of directory that can be read")
	case end.Records > uint64(maxEntries):
		return nil, failWith(StatusBodyTooLarge, "the bundle lists %d entries, over %d", end.Records, maxEntries)
	case end.Base() != 0:
		return nil, failWith(StatusPlatformError, "the bundle's directory is not where the end of the archive says it is")
	case end.Size > maxDir:
		return nil, failWith(StatusBodyTooLarge, "the bundle's directory is %d bytes, over the %d bytes that %d entries could need", end.Size, maxDir, maxEntries)
	}
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return nil, failWith(StatusPlatformError, "the bundle is not a zip archive: %v", err)
	}
	if len(zr.File) > maxEntries {
		return nil, failWith(StatusBodyTooLarge, "the bundle lists %d entries, over %d", len(zr.File), maxEntries)
	}
	left := maxBytes
	var out []ManifestFile
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		if !SafePath(f.Name) {
			return nil, failWith(StatusPlatformError, "the bundle has an unsafe path %q", f.Name)
		}
		r, err := f.Open()
		if err != nil {
			return nil, failWith(StatusPlatformError, "bundle entry %q: %v", f.Name, err)
		}
		m5, s1, s256 := md5.New(), sha1.New(), sha256.New()
		var sniff []byte
		n, err := io.Copy(io.MultiWriter(m5, s1, s256, &sniffer{buf: &sniff, want: 512}), io.LimitReader(r, left+1))
		r.Close()
		if err != nil {
			return nil, failWith(StatusPlatformError, "bundle entry %q: %v", f.Name, err)
		}
		if n > left {
			return nil, failWith(StatusBodyTooLarge, "the bundle's files decompress to over %d bytes", maxBytes)
		}
		left -= n
		out = append(out, ManifestFile{Path: f.Name, Size: int64p(n), MD5: hex.EncodeToString(m5.Sum(nil)),
			SHA1: hex.EncodeToString(s1.Sum(nil)), SHA256: hex.EncodeToString(s256.Sum(nil)),
			Mimetype: mimetypeOf(mime.TypeByExtension(path.Ext(f.Name)), sniff)})
	}
	return out, nil
}

// verifyBundled checks each manifest file against the bundle's interior file of its path (or,
// failing that, the only one of its base name): its size and declared digests. It fills in the
// digests of those that match and returns each file's status, in manifest order.
func verifyBundled(manifest []ManifestFile, interior []ManifestFile) []string {
	byPath, byBase := map[string]*ManifestFile{}, map[string][]*ManifestFile{}
	for i := range interior {
		f := &interior[i]
		byPath[f.Path] = f
		base := f.Path[strings.LastIndex(f.Path, "/")+1:]
		byBase[base] = append(byBase[base], f)
	}
	out := make([]string, len(manifest))
	for i := range manifest {
		m := &manifest[i]
		in := byPath[m.Path]
		if in == nil {
			if c := byBase[m.Path[strings.LastIndex(m.Path, "/")+1:]]; len(c) == 1 {
				in = c[0]
			}
		}
		switch {
		case in == nil:
			out[i] = StatusErrorPlatformDownload
		case m.Size != nil && *m.Size != *in.Size:
			out[i] = StatusMismatchSize
		case m.SHA256 != "" && !strings.EqualFold(m.SHA256, in.SHA256):
			out[i] = StatusMismatchSHA256
		case m.SHA1 != "" && !strings.EqualFold(m.SHA1, in.SHA1):
			out[i] = StatusMismatchSHA1
		case m.MD5 != "" && !strings.EqualFold(m.MD5, in.MD5):
			out[i] = StatusMismatchMD5
		default:
			out[i] = StatusSuccess
			m.Size, m.MD5, m.SHA1, m.SHA256 = in.Size, in.MD5, in.SHA1, in.SHA256
			if m.Mimetype == "" {
				m.Mimetype = in.Mimetype
			}
		}
	}
	return out
}

// bundleError is the error message of a manifest file's status after verifyBundled.
func bundleError(m ManifestFile, status string) string {
	if status == StatusErrorPlatformDownload {
		return fmt.Sprintf("%s is not in the bundle", m.Path)
	}
	return fmt.Sprintf("%s: %s against the bundle's file", m.Path, status)
}
