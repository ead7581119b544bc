package fileset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
)

// captureFile writes the capture of the file at src — its bytes as the payload of a response
// record with head (see [writeWARC]) — into the WARC file tmp, and returns its CDX line, whose
// WarcPath is the WARC's sha256 (its name once stored as a blob).
func captureFile(src, tmp, tmpDir, targetURL string, at time.Time, meta FileMeta, head []byte) (CDX, error) {
	in, err := os.Open(src)
	if err != nil {
		return CDX{}, err
	}
	defer in.Close()
	w, err := os.Create(tmp)
	if err != nil {
		return CDX{}, err
	}
	h := sha256.New()
	cdx, err := writeWARC(io.MultiWriter(w, h), tmpDir, targetURL, at, meta, head, in)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return CDX{}, fmt.Errorf("capture %s: %w", targetURL, err)
	}
	cdx.WarcPath = hex.EncodeToString(h.Sum(nil))
	return cdx, nil
}

// MaxLandingBody bounds a landing page's body, as Sandcrawler's MAX_BODY_SIZE_BYTES does: a
// longer one ends the request with body-too-large.
const MaxLandingBody = 128 << 20

// landingCapture is what the landing step records of a page it captured: the body's
// file_meta and its capture's CDX line, the result's top-level file_meta and cdx.
type landingCapture struct {
	FileMeta FileMeta `json:"file_meta"`
	CDX      CDX      `json:"cdx"`
}

// captureLanding reads the landing page's body (at most MaxLandingBody bytes) into a file of
// the partial directory, hashes it, captures it as a WARC blob — response record with the
// server's head — written to the blob store through the task's read port, and writes its CDX
// line with the task. It returns the capture and the body's file, for the caller to read (its
// citation tags) and remove; a body over the limit is a *statusError.
func (s *Fileset) captureLanding(ctx context.Context, t *action.Task, out action.Output, resp *http.Response, terminal string, at time.Time) (*landingCapture, string, error) {
	reads, err := engine.ReadsOf(ctx)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(s.cfg.PartialDir, 0o755); err != nil {
		return nil, "", err
	}
	body := s.partialPath(t.JobID, t.Item.ID) + ".landing"
	f, err := os.Create(body)
	if err != nil {
		return nil, "", err
	}
	h := newHashes()
	var sniff []byte
	n, err := io.Copy(io.MultiWriter(f, h, &sniffer{buf: &sniff, want: 512}), io.LimitReader(resp.Body, MaxLandingBody+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(body)
		var pe *os.PathError
		if ctx.Err() != nil || errors.As(err, &pe) {
			return nil, "", err // canceled, or our disk
		}
		return nil, "", failWith(StatusNoCapture, "read the landing page %s: %v", terminal, err)
	}
	if n > MaxLandingBody {
		os.Remove(body)
		return nil, "", failWith(StatusBodyTooLarge, "landing page %s: body over %d bytes", terminal, MaxLandingBody)
	}
	meta := FileMeta{Size: n, MD5: hex.EncodeToString(h.md5.Sum(nil)), SHA1: hex.EncodeToString(h.sha1.Sum(nil)),
		SHA256: hex.EncodeToString(h.sha256.Sum(nil)), Mimetype: mimetypeOf(resp.Header.Get("Content-Type"), sniff)}
	tmp := body + ".warc.gz"
	defer os.Remove(tmp)
	cdx, err := captureFile(body, tmp, s.cfg.PartialDir, terminal, at, meta, httpHead(resp))
	if err == nil {
		err = putBlob(ctx, reads, tmp, cdx.WarcPath)
	}
	if err == nil {
		// The CDX line names the WARC blob, and keeps it for the blob collector.
		err = out.Write(action.DomainWrite{Domain: DomainName, Key: "cdx " + cdx.URL + " " + cdx.Datetime,
			Payload: resultWrite{CDX: &cdx}})
	}
	if err != nil {
		os.Remove(body)
		return nil, "", err
	}
	return &landingCapture{FileMeta: meta, CDX: cdx}, body, nil
}

// putBlob stores the file at path in the blob store, which must name it sha256.
func putBlob(ctx context.Context, reads engine.Reads, path, sha256 string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	got, _, err := reads.Blobs().Put(ctx, f)
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	if got != sha256 {
		return fmt.Errorf("store %s: stored as %s, written as %s", path, got, sha256)
	}
	return nil
}

// htmlish reports whether a MIME type is a page whose citation tags are read.
func htmlish(mimetype string) bool {
	mimetype = strings.ToLower(mimetype)
	return strings.Contains(mimetype, "html") || strings.Contains(mimetype, "xml")
}
