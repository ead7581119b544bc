package fileset

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// hashes are the digests a download is verified with.
type hashes struct{ md5, sha1, sha256 hash.Hash }

func newHashes() *hashes { return &hashes{md5.New(), sha1.New(), sha256.New()} }

func (h *hashes) Write(p []byte) (int, error) {
	h.md5.Write(p)
	h.sha1.Write(p)
	h.sha256.Write(p)
	return len(p), nil
}

// downloaded is a verified download in its partial file.
type downloaded struct {
	meta        FileMeta
	terminalURL string
	// head is the status line and headers of the response the bytes came from (see
	// [httpHead]); nil when they are not known (a partial file an older version left).
	head []byte
}

// maxTransferRetries is how often one attempt resumes a transfer the network cut short.
const maxTransferRetries = 3

// download fetches mf into the partial file at path — at most its declared size, or limit
// bytes when it declares none — resuming what an earlier attempt left there with an HTTP range
// when the server allows, each request polite by delay ([fetcher.getPolite]), and verifies it
// against the manifest. Its
// errors are a *statusError for a verdict on the file (mismatch-*, terminal-bad-status,
// error-platform-download, …) or another error, transient, for trouble of our own (a full disk,
// a canceled context): the partial file is kept for the next attempt.
func (s *Fileset) download(ctx context.Context, mf ManifestFile, limit int64, path string, delay time.Duration, beat func()) (*downloaded, error) {
	fresh := false // whether the bytes in the file all came from this call
	for try := 0; ; try++ {
		d, resumed, err := s.transfer(ctx, mf, limit, path, delay, beat)
		if err == nil {
			return d, nil
		}
		st, _, isStatus := asStatus(err)
		switch {
		case isStatus && strings.HasPrefix(st, "mismatch-") && resumed && !fresh:
			// Bytes an earlier attempt wrote may be what is wrong (a crash during a write): the
			// file gets one download from scratch before the verdict.
			if err := os.Truncate(path, 0); err != nil {
				return nil, err
			}
			fresh = true
			try--
			continue
		case isStatus || ctx.Err() != nil:
			return nil, err
		case try+1 >= maxTransferRetries:
			return nil, failWith(StatusErrorPlatformDownload, "%s: %v", mf.PlatformURL, err)
		}
		// The network cut the transfer: resume it from what has been written.
		fresh = false
	}
}

// transfer is one request of a download: it appends to the partial file (or restarts it when
// the server does not honour the range) and verifies the whole once the body ends.
func (s *Fileset) transfer(ctx context.Context, mf ManifestFile, limit int64, path string, delay time.Duration, beat func()) (*downloaded, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, false, err
	}
	if mf.Size != nil && have > *mf.Size {
		have = 0
	}
	if err := f.Truncate(have); err != nil {
		return nil, false, err
	}
	h := newHashes()
	if have > 0 {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, false, err
		}
		if _, err := io.CopyN(h, f, have); err != nil {
			return nil, false, fmt.Errorf("read partial %s: %w", path, err)
		}
	}
	hdr := http.Header{}
	if have > 0 {
		hdr.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, terminal, err := s.fetch.getPolite(ctx, mf.PlatformURL, hdr, delay)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	resumed := false
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0 && rangeStart(resp.Header.Get("Content-Range")) == have:
		resumed = true
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		// A range other than the one asked for: start again from the first byte.
		if err := f.Truncate(0); err != nil {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("GET %s: asked for bytes from %d, got %q", terminal, have, resp.Header.Get("Content-Range"))
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		// Nothing after what we have: the file may be complete. Verify it as it is.
		resumed = true
		resp.Body = http.NoBody
	case resp.StatusCode >= 200 && resp.StatusCode <= 299 && resp.StatusCode != http.StatusPartialContent:
		if have > 0 {
			h = newHashes()
			have = 0
			if err := f.Truncate(0); err != nil {
				return nil, false, err
			}
		}
		// The bytes are this response's from the first: its head is theirs.
		if err := writeHead(path, httpHead(resp)); err != nil {
			return nil, false, err
		}
	default:
		return nil, false, failWith(StatusTerminalBadStatus, "GET %s: status %d", terminal, resp.StatusCode)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return nil, false, err
	}
	// The manifest bounds the body: a byte past its size is a mismatch, however long the body.
	if mf.Size != nil {
		limit = *mf.Size
	}
	var sniff []byte
	w := &beatWriter{w: io.MultiWriter(f, h), beat: beat, total: &s.downloaded}
	n, err := io.Copy(w, io.LimitReader(io.TeeReader(resp.Body, &sniffer{buf: &sniff, want: 512, skip: have > 0}), limit-have+1))
	total := have + n
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			_ = f.Sync()
			return nil, resumed, ctx.Err()
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, resumed, err // our disk
		}
		if serr := f.Sync(); serr != nil {
			return nil, resumed, serr
		}
		return nil, resumed, fmt.Errorf("transfer cut at byte %d: %w", total, err)
	}
	if err := f.Sync(); err != nil {
		return nil, resumed, err
	}
	if total > limit {
		if mf.Size != nil {
			return nil, resumed, failWith(StatusMismatchSize, "%s: body longer than the manifest's %d bytes", mf.Path, *mf.Size)
		}
		return nil, resumed, failWith(StatusBodyTooLarge, "%s: body over %d bytes", mf.Path, limit)
	}
	meta := FileMeta{Size: total, MD5: hex.EncodeToString(h.md5.Sum(nil)), SHA1: hex.EncodeToString(h.sha1.Sum(nil)),
		SHA256: hex.EncodeToString(h.sha256.Sum(nil)), Mimetype: mf.Mimetype}
	switch {
	case mf.Size != nil && total != *mf.Size:
		return nil, resumed, failWith(StatusMismatchSize, "%s: %d bytes, the manifest says %d", mf.Path, total, *mf.Size)
	case mf.Size == nil && total == 0:
		return nil, resumed, failWith(StatusEmptyBlob, "%s: empty body", mf.Path)
	case mf.SHA256 != "" && !strings.EqualFold(mf.SHA256, meta.SHA256):
		return nil, resumed, failWith(StatusMismatchSHA256, "%s: sha256 %s, the manifest says %s", mf.Path, meta.SHA256, mf.SHA256)
	case mf.SHA1 != "" && !strings.EqualFold(mf.SHA1, meta.SHA1):
		return nil, resumed, failWith(StatusMismatchSHA1, "%s: sha1 %s, the manifest says %s", mf.Path, meta.SHA1, mf.SHA1)
	case mf.MD5 != "" && !strings.EqualFold(mf.MD5, meta.MD5):
		return nil, resumed, failWith(StatusMismatchMD5, "%s: md5 %s, the manifest says %s", mf.Path, meta.MD5, mf.MD5)
	}
	if meta.Mimetype == "" {
		meta.Mimetype = mimetypeOf(resp.Header.Get("Content-Type"), sniff)
	}
	d := &downloaded{meta: meta, terminalURL: terminal}
	if head, err := os.ReadFile(headPath(path)); err == nil {
		d.head = head
	}
	return d, resumed, nil
}

// writeHead keeps a response's head beside the partial file at path, whole or not at all.
func writeHead(path string, head []byte) error {
	tmp := headPath(path) + ".tmp"
	if err := os.WriteFile(tmp, head, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, headPath(path))
}

// rangeStart returns the first byte of a Content-Range ("bytes 100-199/200"), or -1.
func rangeStart(cr string) int64 {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return -1
	}
	first, _, ok := strings.Cut(rest, "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// mimetypeOf is the server's type unless it is the generic one, else the sniffed type.
func mimetypeOf(header string, sniff []byte) string {
	if mt, _, err := mime.ParseMediaType(header); err == nil && mt != "application/octet-stream" && mt != "" {
		return mt
	}
	if len(sniff) == 0 {
		return "application/octet-stream"
	}
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(sniff))
	return mt
}

// sniffer keeps the first bytes of a fresh body, for the MIME type.
type sniffer struct {
	buf  *[]byte
	want int
	skip bool
}

func (s *sniffer) Write(p []byte) (int, error) {
	if !s.skip && len(*s.buf) < s.want {
		*s.buf = append(*s.buf, p[:min(len(p), s.want-len(*s.buf))]...)
	}
	return len(p), nil
}

// beatWriter calls beat every 4 MiB, so a long download keeps its lease, and counts the bytes
// into total.
type beatWriter struct {
	w     io.Writer
	beat  func()
	n     int64
	total *atomic.Int64
}

func (b *beatWriter) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	b.n += int64(n)
	b.total.Add(int64(n))
	if b.n >= 4<<20 && b.beat != nil {
		b.n = 0
		b.beat()
	}
	return n, err
}
