package e2e

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/workerproto"
)

var hostileTools = []string{"chromium", "soffice", "pdftotext", "pdfimages", "pdftoppm", "bwrap"}

// TestHostileDocuments ingests documents that try to read a canary file or reach a canary
// server on loopback, the way a user's `sluice ingest` meets them: an HTML file, an email whose
// HTML body and HTML attachment do it, a zip holding such pages, and Word and OpenDocument files
// whose images are linked. No exported PDF or text may hold the canary, and the server must get
// no request; every document is still ingested.
func TestHostileDocuments(t *testing.T) {
	t.Parallel()
	skipWithoutTools(t, hostileTools)
	c := convertertest.NewCanary(t)
	dir := t.TempDir()
	pages := c.HostileHTML()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("page.html", []byte(pages["iframe.html"]))
	write("mail.eml", hostileEmail(pages["object.html"], pages["refresh.html"]))
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, name := range []string{"fetch.html", "redirect.html"} {
		w, _ := zw.Create("inner/" + name)
		w.Write([]byte(pages[name]))
	}
	zw.Close()
	write("pages.zip", zb.Bytes())
	write("http.docx", convertertest.LinkedDOCX(t, c.URL+"/linked.png"))
	write("file.odt", convertertest.LinkedODT(t, "file://"+c.Image))

	data := filepath.Join(t.TempDir(), "data")
	if out, err := runSluice(t.Context(), "ingest", "--data", data, dir).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v\n%s", err, tail(out))
	}
	out := filepath.Join(t.TempDir(), "export")
	if b, err := runSluice(t.Context(), "documents", "export", "--data", data, "--out", out, "--parts", "pdf,text").CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, b)
	}
	pdfs := checkExport(t, c, out)
	// page.html, the email's body and attachment, the zip's two pages, the two office files.
	if pdfs < 6 {
		t.Errorf("%d PDFs exported, want at least 6", pdfs)
	}
	if b, err := os.ReadFile(filepath.Join(out, "errors.jsonl")); err != nil || len(bytes.TrimSpace(b)) > 0 {
		t.Errorf("errors: %s %v", b, err)
	}
}

// checkExport checks every exported PDF and text for the canary and returns the PDFs' count.
func checkExport(t *testing.T, c *convertertest.Canary, out string) int {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(out, "documents"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pdfs := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".pdf") {
			pdfs++
			c.CheckNoLeak(t, filepath.Base(f), b)
		} else {
			c.CheckNoLeak(t, filepath.Base(f), nil, string(b))
		}
	}
	return pdfs
}

func hostileEmail(body, attachment string) []byte {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fmt.Fprintf(&b, "From: a@example.com\r\nTo: b@example.com\r\nSubject: hostile\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=%s\r\n\r\n", mw.Boundary())
	w, _ := mw.CreatePart(map[string][]string{"Content-Type": {"text/html; charset=utf-8"}})
	w.Write([]byte(body))
	w, _ = mw.CreatePart(map[string][]string{"Content-Type": {"text/html"},
		"Content-Disposition": {`attachment; filename="attached.html"`}})
	w.Write([]byte(attachment))
	mw.Close()
	return b.Bytes()
}

// TestHostileRemoteChild: a remote worker (here the test, speaking the worker protocol) returns
// an HTML child that tries the same; the server renders it in its own sandbox.
func TestHostileRemoteChild(t *testing.T) {
	t.Parallel()
	skipWithoutTools(t, hostileTools)
	c := convertertest.NewCanary(t)
	data := filepath.Join(t.TempDir(), "data")
	token := func(role string) string {
		out, err := runSluice(t.Context(), "token", "create", "--role", role, "--data", data).Output()
		if err != nil {
			t.Fatalf("token create: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	admin, worker := token("admin"), token("worker")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := runSluice(t.Context(), "serve", "--data", data, "--listen", addr, "--remote", "Unpack")
	var srvOut poll.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	base := "http://" + addr
	waitFor(t, 30*time.Second, "the server to listen", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})

	// A zip root: detect routes it to unpack, which the remote worker serves.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("placeholder.txt")
	w.Write([]byte("unused"))
	zw.Close()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	jw, _ := mw.CreateFormField("job")
	jw.Write([]byte(`{"workflow":"documents"}`))
	fw, _ := mw.CreateFormFile("file", "bundle.zip")
	fw.Write(zb.Bytes())
	mw.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/v1/jobs", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		ID int64 `json:"id"`
	}
	json.NewDecoder(resp.Body).Decode(&job)
	resp.Body.Close()
	if resp.StatusCode != 201 || job.ID == 0 {
		t.Fatalf("create job: %s", resp.Status)
	}

	cl := &workerproto.Client{Server: base + "/v1/workers", Token: worker}
	var task *workerproto.TaskHandle
	waitFor(t, 60*time.Second, "an unpack task", func() bool {
		task, err = cl.Poll(t.Context(), "Unpack")
		if err != nil {
			t.Fatalf("poll: %v\n%s", err, srvOut.String())
		}
		return task != nil
	})
	for _, f := range [][2]string{
		{"0.json", `{"filename":"bundle.zip/evil.html","contentType":"text/html","languageCode":"en","metadata":{},"wantOcr":false,"wantSplitByPage":false}`},
		{"0.blob", c.HostileHTML()["iframe.html"]},
		{"1.json", `{"filename":"bundle.zip/fetch.html","contentType":"text/html","languageCode":"en","metadata":{},"wantOcr":false,"wantSplitByPage":false}`},
		{"1.blob", c.HostileHTML()["fetch.html"]},
		{"done", ""},
	} {
		if err := task.Post(t.Context(), f[0], strings.NewReader(f[1])); err != nil {
			t.Fatalf("post %s: %v", f[0], err)
		}
	}

	get := func(path string, v any) int {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, ok := v.(*[]byte); ok {
			*b, _ = io.ReadAll(resp.Body)
		} else if v != nil {
			json.NewDecoder(resp.Body).Decode(v)
		}
		return resp.StatusCode
	}
	waitFor(t, 120*time.Second, "the job to end", func() bool {
		var j struct {
			State string `json:"state"`
		}
		get(fmt.Sprintf("/v1/jobs/%d", job.ID), &j)
		return j.State == "complete" || j.State == "failed"
	})
	var docs struct {
		Documents []struct {
			ItemID int64           `json:"item_id"`
			Title  json.RawMessage `json:"value"`
		} `json:"outputs"`
	}
	raw := []byte{}
	get(fmt.Sprintf("/v1/jobs/%d/documents", job.ID), &raw)
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatalf("documents: %v: %s", err, raw)
	}
	if len(docs.Documents) != 2 {
		var errs []byte
		get(fmt.Sprintf("/v1/jobs/%d/errors", job.ID), &errs)
		t.Fatalf("%d documents, want 2: %s; errors: %s", len(docs.Documents), raw, errs)
	}
	for _, d := range docs.Documents {
		var pdf, text []byte
		name := string(d.Title)
		if st := get(fmt.Sprintf("/v1/items/%d/pdf", d.ItemID), &pdf); st != 200 {
			t.Fatalf("pdf of %s: %d", name, st)
		}
		get(fmt.Sprintf("/v1/items/%d/text", d.ItemID), &text)
		if !strings.Contains(string(text), " page") {
			t.Errorf("%s: text %q lacks the page's own words", name, text)
		}
		c.CheckNoLeak(t, name, pdf, string(text))
	}
}
