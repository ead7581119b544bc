package fileset

import (
	"bytes"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc"
)

// CDX is a capture's line of the CDX index, as Sandcrawler's results carry it (its cdx dict):
// where the capture's WARC response record is — the WARC blob (WarcPath, its sha256), the
// record's gzip member's offset in it and compressed size.
type CDX struct {
	SURT       string `json:"surt"`
	Datetime   string `json:"datetime"` // YYYYMMDDhhmmss, UTC
	URL        string `json:"url"`
	Mimetype   string `json:"mimetype"`
	StatusCode int    `json:"status_code"`
	SHA1B32    string `json:"sha1b32"`
	SHA1Hex    string `json:"sha1hex"`
	WarcCSize  int64  `json:"warc_csize"`
	WarcOffset int64  `json:"warc_offset"`
	WarcPath   string `json:"warc_path"`
}

// Line is the capture's CDX line in the 11-field format (CDX N b a m s k r M S V g): SURT,
// timestamp, URL, MIME type, status, payload sha1 in base32, redirect, meta tags, compressed
// size, offset, WARC file.
func (c CDX) Line() string {
	return strings.Join([]string{c.SURT, c.Datetime, c.URL, c.Mimetype, strconv.Itoa(c.StatusCode), c.SHA1B32, "-", "-",
		strconv.FormatInt(c.WarcCSize, 10), strconv.FormatInt(c.WarcOffset, 10), c.WarcPath}, " ")
}

// SURT returns the Sort-friendly URI Reordering Transform of a URL as CDX indexes key it:
// scheme and a leading "www." dropped, host labels reversed and joined by commas, the port
// kept, ")", then the path and query, all lower-cased (http://www.Example.com:8080/A?b=1 is
// com,example:8080)/a?b=1).
func SURT(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return strings.ToLower(raw)
	}
	host := strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	s := strings.Join(labels, ",")
	if p := u.Port(); p != "" {
		s += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	s += ")" + path
	if u.RawQuery != "" {
		s += "?" + u.RawQuery
	}
	return strings.ToLower(s)
}

// sha1B32 is a hex sha1 in base32, as WARC payload digests and CDX lines write it.
func sha1B32(sha1hex string) string {
	b, err := hex.DecodeString(sha1hex)
	if err != nil {
		return ""
	}
	return base32.StdEncoding.EncodeToString(b)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeWARC writes the WARC file of one capture to w: a warcinfo record, then a response record
// of the file — head, the HTTP status line and headers the server sent (see [httpHead]), or,
// when there is none, a status line of 200 with the file's Content-Type and Content-Length; then
// body as its payload — each record a gzip member of its own (a .warc.gz). It returns the
// response's CDX line, its WarcPath left for the caller (the blob's sha256, known once stored).
// tmpDir holds the record's block while it is built, when it is larger than 1 MiB.
func writeWARC(w io.Writer, tmpDir, targetURL string, at time.Time, meta FileMeta, head []byte, body io.Reader) (CDX, error) {
	cw := &countingWriter{w: w}
	opts := []gowarc.WarcRecordOption{gowarc.WithBufferTmpDir(tmpDir), gowarc.WithBufferMaxMemBytes(1 << 20)}
	date := at.UTC().Format(time.RFC3339)
	member := func(rec gowarc.WarcRecord) error {
		defer rec.Close()
		gz := gzip.NewWriter(cw)
		if _, _, err := gowarc.NewMarshaler().Marshal(gz, rec, 0); err != nil {
			return err
		}
		return gz.Close()
	}

	info := gowarc.NewRecordBuilder(gowarc.Warcinfo, opts...)
	if _, err := info.WriteString("software: sluice fileset\r\nformat: WARC File Format 1.1\r\n"); err != nil {
		return CDX{}, err
	}
	info.AddWarcHeader(gowarc.WarcDate, date)
	info.AddWarcHeader(gowarc.ContentType, "application/warc-fields")
	rec, _, err := info.Build()
	if err != nil {
		return CDX{}, fmt.Errorf("warcinfo record: %w", err)
	}
	if err := member(rec); err != nil {
		return CDX{}, fmt.Errorf("write warcinfo record: %w", err)
	}

	offset := cw.n
	mimetype := meta.Mimetype
	if mimetype == "" {
		mimetype = "application/octet-stream"
	}
	status := 200
	if head == nil {
		head = []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", mimetype, meta.Size))
	} else if code, ok := headStatus(head); ok {
		status = code
	}
	resp := gowarc.NewRecordBuilder(gowarc.Response, opts...)
	if _, err := resp.Write(head); err != nil {
		resp.Close()
		return CDX{}, err
	}
	if _, err := io.Copy(resp, body); err != nil {
		resp.Close()
		return CDX{}, fmt.Errorf("response record: %w", err)
	}
	resp.AddWarcHeader(gowarc.WarcTargetURI, targetURL)
	resp.AddWarcHeader(gowarc.WarcDate, date)
	resp.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=response")
	resp.AddWarcHeader(gowarc.WarcPayloadDigest, "sha1:"+sha1B32(meta.SHA1))
	rec, _, err = resp.Build()
	if err != nil {
		resp.Close()
		return CDX{}, fmt.Errorf("response record: %w", err)
	}
	if err := member(rec); err != nil {
		return CDX{}, fmt.Errorf("write response record: %w", err)
	}
	return CDX{SURT: SURT(targetURL), Datetime: at.UTC().Format("20060102150405"), URL: targetURL, Mimetype: mimetype,
		StatusCode: status, SHA1B32: sha1B32(meta.SHA1), SHA1Hex: meta.SHA1, WarcCSize: cw.n - offset, WarcOffset: offset}, nil
}

// maxHeadBytes bounds the HTTP head a capture records: the headers past it are left out.
const maxHeadBytes = 64 << 10

// httpHead is a response's head as a WARC response record holds it: its status line and its
// headers, each line CRLF-terminated, then an empty line. The headers are as the server sent
// them, in name order (Go's client keeps their values, not their order), less those that
// described a transfer no longer in the payload: Go's client removed Transfer-Encoding (the
// payload is de-chunked) and, when it decompressed a body it asked gzip for, Content-Encoding
// and Content-Length. At most maxHeadBytes.
func httpHead(resp *http.Response) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\r\n", resp.Proto, resp.Status)
	if resp.Proto == "" {
		b.Reset()
		fmt.Fprintf(&b, "HTTP/1.1 %s\r\n", resp.Status)
	}
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			if b.Len()+len(k)+len(v)+6 > maxHeadBytes {
				break
			}
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// headStatus is the status code of a head's status line.
func headStatus(head []byte) (int, bool) {
	line, _, _ := bytes.Cut(head, []byte("\r\n"))
	f := strings.Fields(string(line))
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return 0, false
	}
	code, err := strconv.Atoi(f[1])
	return code, err == nil && code >= 100 && code <= 999
}
