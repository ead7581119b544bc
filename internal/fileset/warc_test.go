package fileset

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	iawarc "github.com/internetarchive/gowarc"
)

// TestWARCReadBack writes the WARC of a capture with Sluice's writer (nlnwa/gowarc) and reads it
// back with another maintained library (internetarchive/gowarc): the records are a warcinfo and
// a response whose target, payload and payload digest are the file's, whose HTTP head is the
// server's (a status line and headers of its own) or, when none is known, one of 200 with the
// file's type and length, and the CDX line's offset and compressed size are the response
// record's gzip member's.
func TestWARCReadBack(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1000, 3 << 20} { // empty, small, over the builder's memory buffer
		body := content("warc", n)
		s1, s5, s256 := sha1.Sum(body), md5.Sum(body), sha256.Sum256(body)
		meta := FileMeta{Size: int64(n), SHA1: hex.EncodeToString(s1[:]), MD5: hex.EncodeToString(s5[:]),
			SHA256: hex.EncodeToString(s256[:]), Mimetype: "text/csv"}
		var buf bytes.Buffer
		at := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
		target := "https://zenodo.org/api/records/7/files/a%20b.csv/content"
		// The server's head (a 203, a header of its own) for all but the empty body, which has none.
		var head []byte
		wantStatus, wantHeader := 200, "Content-Length"
		if n > 0 {
			head = []byte("HTTP/1.1 203 Non-Authoritative Information\r\nContent-Type: text/csv\r\nX-Served-By: fake 7\r\n\r\n")
			wantStatus, wantHeader = 203, "X-Served-By"
		}
		cdx, err := writeWARC(&buf, t.TempDir(), target, at, meta, head, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if cdx.StatusCode != wantStatus || cdx.SURT != "org,zenodo)/api/records/7/files/a%20b.csv/content" || cdx.Datetime != "20261129010203" || cdx.SHA1Hex != meta.SHA1 ||
			cdx.SHA1B32 != sha1B32(meta.SHA1) || len(cdx.SHA1B32) != 32 || cdx.WarcOffset <= 0 || cdx.WarcOffset+cdx.WarcCSize != int64(buf.Len()) {
			t.Fatalf("%d bytes: cdx %+v for a WARC of %d bytes", n, cdx, buf.Len())
		}
		path := filepath.Join(t.TempDir(), "capture.warc.gz")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := iawarc.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for {
			rec, err := r.ReadRecord()
			if err == io.EOF || rec == nil && err == nil {
				break
			}
			if err != nil {
				t.Fatalf("%d bytes: read record: %v", n, err)
			}
			typ := rec.Header.Get("WARC-Type")
			types = append(types, typ)
			if typ == "response" {
				if rec.Offset != cdx.WarcOffset || rec.Size != cdx.WarcCSize {
					t.Errorf("%d bytes: response record at %d (%d bytes), CDX says %d (%d)", n, rec.Offset, rec.Size, cdx.WarcOffset, cdx.WarcCSize)
				}
				if rec.Header.Get("WARC-Target-URI") != target || rec.Header.Get("WARC-Payload-Digest") != "sha1:"+cdx.SHA1B32 {
					t.Errorf("%d bytes: response headers %v", n, rec.Header)
				}
				block, _ := io.ReadAll(rec.Content)
				resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(block)), nil)
				if err != nil || resp.StatusCode != wantStatus || resp.Header.Get(wantHeader) == "" {
					t.Errorf("%d bytes: HTTP head read back: %v, %v; want status %d with %s", n, resp, err, wantStatus, wantHeader)
				}
				_, payload, ok := bytes.Cut(block, []byte("\r\n\r\n"))
				if ps := sha1.Sum(payload); !ok || !bytes.Equal(payload, body) || hex.EncodeToString(ps[:]) != meta.SHA1 {
					t.Errorf("%d bytes: payload of %d bytes read back, digest %x", n, len(payload), ps)
				}
			}
			rec.Content.Close()
		}
		f.Close()
		if len(types) != 2 || types[0] != "warcinfo" || types[1] != "response" {
			t.Errorf("%d bytes: records %v, want warcinfo and response", n, types)
		}
	}
}

// readCapture reads the response record at cdx's offset of a WARC blob with internetarchive's
// reader and returns its HTTP head's headers and its payload, checking its target, payload
// digest, compressed size and status against the CDX line.
func readCapture(t *testing.T, blobs interface {
	Open(ctx context.Context, sha256 string) (io.ReadCloser, error)
}, cdx CDX) (http.Header, []byte) {
	t.Helper()
	rc, err := blobs.Open(t.Context(), cdx.WarcPath)
	if err != nil {
		t.Fatalf("WARC blob %s: %v", cdx.WarcPath, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || int64(len(b)) < cdx.WarcOffset+cdx.WarcCSize {
		t.Fatalf("WARC blob %s of %d bytes (%v) for a record at %d of %d", cdx.WarcPath, len(b), err, cdx.WarcOffset, cdx.WarcCSize)
	}
	r, err := iawarc.NewReader(bytes.NewReader(b[cdx.WarcOffset:]))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.ReadRecord()
	if err != nil || rec == nil {
		t.Fatalf("WARC %s at %d: %v", cdx.WarcPath, cdx.WarcOffset, err)
	}
	defer rec.Content.Close()
	block, _ := io.ReadAll(rec.Content)
	_, payload, _ := bytes.Cut(block, []byte("\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(block)), nil)
	if err != nil || resp.StatusCode != cdx.StatusCode {
		t.Fatalf("WARC %s at %d: HTTP head %v, %v; the CDX line's status %d", cdx.WarcPath, cdx.WarcOffset, resp, err, cdx.StatusCode)
	}
	if rec.Header.Get("WARC-Type") != "response" || rec.Header.Get("WARC-Target-URI") != cdx.URL ||
		rec.Header.Get("WARC-Payload-Digest") != "sha1:"+cdx.SHA1B32 || rec.Size != cdx.WarcCSize {
		t.Errorf("WARC %s at %d: %v, %d bytes, want the CDX line's %+v", cdx.WarcPath, cdx.WarcOffset, rec.Header, rec.Size, cdx)
	}
	if sum := sha1.Sum(payload); hex.EncodeToString(sum[:]) != cdx.SHA1Hex {
		t.Errorf("WARC %s: payload sha1 %x, CDX says %s", cdx.WarcPath, sum, cdx.SHA1Hex)
	}
	return resp.Header, payload
}
