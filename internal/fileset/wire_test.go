package fileset_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
)

// TestSandcrawlerWire runs a fresh installation whose request source feeds the fileset workflow
// (no fileset job ever applied it) and whose sink named sandcrawler receives the results: a bare
// Sandcrawler request and a wrapped one ({"request": …}) are both ingested, their results are
// published bare — the result JSON itself as each message's body, on ingest-fileset-results, and
// a single-file success's dataset-file result on ingest-file-results — echoing each request.
func TestSandcrawlerWire(t *testing.T) {
	t.Parallel()
	body := []byte(strings.Repeat("a dataset's only file\n", 100))
	var zenodo *httptest.Server
	zenodo = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/records/7":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":7,"conceptrecid":6,"metadata":{"access_right":"open"},"files":[{"key":"a.txt","size":%d,"links":{"self":"%s/files/a.txt"}}]}`,
				len(body), "http://localhost"+zenodo.URL[strings.LastIndex(zenodo.URL, ":"):])
		case r.URL.Path == "/files/a.txt":
			w.Write(body)
		case r.URL.Path == "/record/7":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><meta name="citation_title" content="Seven"></head></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(zenodo.Close)
	base := "http://localhost" + zenodo.URL[strings.LastIndex(zenodo.URL, ":"):]
	allow, err := egress.New([]string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	published := filepath.Join(t.TempDir(), "sandcrawler.jsonl")
	ctx := t.Context()
	n, err := node.Open(ctx, node.Config{DataDir: t.TempDir(), Engine: true, Egress: allow,
		Fileset: fileset.Config{HostDelay: -1, Platforms: fileset.Platforms{"zenodo": {Hosts: []string{"localhost"}, API: base + "/api"}}},
		Topics: node.Topics{Sources: map[string]string{"requests": "webhook:?workflow=fileset"},
			Sinks: map[string]string{fileset.SandcrawlerSinkName: "file:" + published}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	n.Start(ctx)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/sources/{name}", n.Sources())
	for _, msg := range []string{
		`{"ingest_type":"dataset","base_url":"` + base + `/record/7","link_source":"doi","link_source_id":"bare","ext_ids":{"doi":"10.5281/zenodo.7"}}`,
		`{"request":{"ingest_type":"dataset","base_url":"` + base + `/record/7","link_source":"doi","link_source_id":"wrapped"}}`,
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/sources/requests", strings.NewReader(msg)))
		if rec.Code >= 300 {
			t.Fatalf("POST %s: %d %s", msg, rec.Code, rec.Body)
		}
	}
	type line struct {
		Subject string
		Body    json.RawMessage
	}
	var lines []line
	poll.Until(t, time.Minute, "the results to be published", func() (bool, string) {
		b, _ := os.ReadFile(published)
		lines = nil
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("published line %s: %v", sc.Bytes(), err)
			}
			lines = append(lines, l)
		}
		return len(lines) >= 4, fmt.Sprintf("%d lines: %s", len(lines), b)
	})
	seen := map[string]bool{}
	for _, l := range lines {
		var r struct {
			Hit      bool            `json:"hit"`
			Status   string          `json:"status"`
			Request  fileset.Request `json:"request"`
			Outputs  any             `json:"outputs"`
			Manifest []fileset.ManifestFile
			FileMeta *fileset.FileMeta `json:"file_meta"`
		}
		if err := json.Unmarshal(l.Body, &r); err != nil || r.Outputs != nil {
			t.Fatalf("%s body %s: not a bare result (%v)", l.Subject, l.Body, err)
		}
		switch l.Subject {
		case "ingest-fileset-results":
			if r.Status != fileset.StatusSuccessFile || len(r.Manifest) != 1 || r.Request.IngestType != "dataset" || r.Request.LinkSource != "doi" {
				t.Errorf("fileset result %s", l.Body)
			}
		case "ingest-file-results":
			if r.Status != fileset.StatusSuccess || r.FileMeta == nil || r.FileMeta.Size != int64(len(body)) || r.Request.IngestType != "dataset-file" {
				t.Errorf("file result %s", l.Body)
			}
		default:
			t.Errorf("subject %q", l.Subject)
		}
		seen[l.Subject+" "+r.Request.LinkSourceID] = true
		if r.Request.LinkSourceID == "bare" && r.Request.ExtIDs["doi"] != "10.5281/zenodo.7" {
			t.Errorf("the bare request's ext_ids were not echoed: %s", l.Body)
		}
	}
	for _, id := range []string{"bare", "wrapped"} {
		for _, subject := range []string{"ingest-fileset-results", "ingest-file-results"} {
			if !seen[subject+" "+id] {
				t.Errorf("no %s for the %s request", subject, id)
			}
		}
	}
	jobs, err := n.Store.JobList(ctx, store.JobListParams{Limit: 10})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
}
