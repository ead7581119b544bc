package api_test

import (
	"bytes"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
)

const (
	htmlDoc = `<html><script>fetch("/v1/jobs?token="+localStorage.token)</script></html>`
	svgDoc  = `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>`
)

// TestDownloadHeaders uploads an HTML page, an SVG image, a PDF, a file with a bogus content type
// and one with a name outside ASCII, and checks the headers of every download route: never
// sniffed, sandboxed, originals (and HTML or SVG of any kind) as attachments with the filename,
// PDFs, text and PNG thumbnails inline.
func TestDownloadHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	files := []struct{ name, contentType, body string }{
		{"page.html", "text/html; charset=utf-8", htmlDoc},
		{"dir/image.svg", "image/svg+xml", svgDoc},
		{"report.pdf", "application/pdf", "%PDF-1.4 fake"},
		{"odd.bin", "not a type", "odd"},
		{"résumé \"final\".txt", "text/plain", "cv"},
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	jp, _ := mw.CreateFormField("job")
	jp.Write([]byte(`{"workflow":"docs"}`))
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": f.name}))
		h.Set("Content-Type", f.contentType)
		p, _ := mw.CreatePart(h)
		p.Write([]byte(f.body))
	}
	mw.Close()
	code, data := b.do(t, "POST", "/v1/jobs", b.admin, mw.FormDataContentType(), &buf)
	if code != 201 {
		t.Fatalf("create: %d %s", code, data)
	}
	var items struct {
		Items []struct {
			ID      int64  `json:"id"`
			Name    string `json:"name"`
			Error   string `json:"error"`
			State   string `json:"state"`
			HasText bool   `json:"has_text"`
		} `json:"items"`
	}
	poll.Until(t, 20*time.Second, "every item has its text", func() (bool, string) {
		b.json(t, "GET", "/v1/jobs/1/items", nil, 200, &items)
		n := 0
		for _, it := range items.Items {
			if it.HasText {
				n++
			}
		}
		return n == len(files), fmt.Sprintf("%+v", items)
	})
	id := func(i int) int64 { return items.Items[i].ID }
	for _, tt := range []struct {
		path                          string
		contentType, disposition, csp string
	}{
		{fmt.Sprintf("/v1/items/%d/original", id(0)), "text/html; charset=utf-8", `attachment; filename=page.html`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/text", id(0)), "text/plain; charset=utf-8", `inline; filename=page.html.txt`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/original", id(1)), "image/svg+xml", `attachment; filename=image.svg`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/thumbnail", id(1)), "image/svg+xml", `attachment; filename=image.svg.thumbnail.svg`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/original", id(2)), "application/pdf", `attachment; filename=report.pdf`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/pdf", id(2)), "application/pdf", `inline; filename=report.pdf`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/thumbnail", id(2)), "image/png", `inline; filename=report.pdf.thumbnail.png`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/original", id(3)), "application/octet-stream", `attachment; filename=odd.bin`, "sandbox; default-src 'none'"},
		{fmt.Sprintf("/v1/items/%d/original", id(4)), "text/plain",
			`attachment; filename="r_sum_ \"final\".txt"; filename*=utf-8''r%C3%A9sum%C3%A9%20%22final%22.txt`, "sandbox; default-src 'none'"},
		{"/v1/workflows/docs/graph", "image/svg+xml", "", "sandbox; default-src 'none'; style-src 'unsafe-inline'"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", b.srv.URL+tt.path, nil)
		req.Header.Set("Authorization", "Bearer "+b.reader)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("Content-Type") != tt.contentType || h.Get("Content-Disposition") != tt.disposition ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != tt.csp {
			t.Errorf("GET %s = %d\n Content-Type %q\n Content-Disposition %q\n X-Content-Type-Options %q\n Content-Security-Policy %q\nwant %q, %q, nosniff, %q",
				tt.path, resp.StatusCode, h.Get("Content-Type"), h.Get("Content-Disposition"), h.Get("X-Content-Type-Options"),
				h.Get("Content-Security-Policy"), tt.contentType, tt.disposition, tt.csp)
		}
		if tt.disposition != "" {
			if _, params, err := mime.ParseMediaType(tt.disposition); err != nil || params["filename"] == "" {
				t.Errorf("%s: Content-Disposition does not parse: %v %v", tt.path, params, err)
			}
		}
	}
	// Every API response, JSON included, is nosniff.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", b.srv.URL+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+b.reader)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET /v1/jobs without nosniff: %v", resp.Header)
	}
}
