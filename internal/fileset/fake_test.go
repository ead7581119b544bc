package fileset

import (
	"archive/zip"
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/egress"
)

// fakeFile is a file a fake serves, and how it lies.
type fakeFile struct {
	body []byte
	// lie: "" serves the body honestly (with ranges); "truncate" declares the length and sends
	// half; "infinite" never ends; "loop" redirects in a circle; "to-loopback" redirects to
	// 127.0.0.1, which the egress policy refuses; "slow" paces the body.
	lie string
}

// fakes are local stand-ins for the four platforms' APIs and landing pages and a web server of
// files, serving our own synthetic JSON. Every server is reached as localhost:PORT, the only
// name the tests' egress policy allows, so a redirect to 127.0.0.1 is refused.
type fakes struct {
	zenodo, figshare, figshareAPI, dataverse, ia, web *httptest.Server

	mu       sync.Mutex
	zenodoRs map[string]any // record id → JSON document, or an int status
	figArts  map[string]any // "id/version" → JSON document, or an int status
	dvSets   map[string]any // dataset persistentId → latestVersion document, or an int status
	iaItems  map[string]any // item → metadata document
	files    map[string]*fakeFile
	landing  map[string]int // landing path → status (default 200)
	gets     map[string]int // file key → GETs that served bytes
	served   int64
	slowRate int // bytes per 10 ms for "slow" files
	// Of "slow" files: bodies served to their end from byte 0, served to their end after a
	// range, and range requests.
	fromZero, completed, ranged map[string]int
	// spread, when set, serves the files registered from then on from many hosts.
	spread *fileHosts
}

func newFakes(t testing.TB) *fakes {
	f := &fakes{zenodoRs: map[string]any{}, figArts: map[string]any{}, dvSets: map[string]any{}, iaItems: map[string]any{},
		files: map[string]*fakeFile{}, landing: map[string]int{}, gets: map[string]int{}, slowRate: 4096,
		fromZero: map[string]int{}, completed: map[string]int{}, ranged: map[string]int{}}
	start := func(h http.HandlerFunc) *httptest.Server {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s
	}
	f.zenodo = start(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/api/records/"), "/files-archive"); ok {
			f.serveArchive(w, r, id)
			return
		}
		if id, ok := strings.CutPrefix(r.URL.Path, "/api/records/"); ok {
			f.api(w, f.zenodoRs, id)
			return
		}
		f.land(w, r)
	})
	f.figshare = start(f.land)
	f.figshareAPI = start(func(w http.ResponseWriter, r *http.Request) {
		rest, _ := strings.CutPrefix(r.URL.Path, "/v2/articles/")
		id, v, _ := strings.Cut(rest, "/versions/")
		f.api(w, f.figArts, id+"/"+v)
	})
	f.dataverse = start(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/datasets/:persistentId"):
			wrap := func(v any) any { return map[string]any{"status": "OK", "data": map[string]any{"latestVersion": v}} }
			if strings.Contains(r.URL.Path, "/versions/") {
				wrap = func(v any) any { return map[string]any{"status": "OK", "data": v} }
			}
			f.api(w, f.dvSets, r.URL.Query().Get("persistentId"), wrap)
		case strings.HasPrefix(r.URL.Path, "/api/access/datafile/"):
			f.serveFile(w, r, "dv/"+r.URL.Query().Get("persistentId"))
		default:
			f.land(w, r)
		}
	})
	f.ia = start(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/metadata/"):
			f.mu.Lock()
			v, ok := f.iaItems[strings.TrimPrefix(r.URL.Path, "/metadata/")]
			f.mu.Unlock()
			if !ok {
				v = map[string]any{}
			}
			writeJSON(w, v)
		case strings.HasPrefix(r.URL.Path, "/download/") && strings.Count(r.URL.Path, "/") > 2:
			f.serveFile(w, r, "ia/"+strings.TrimPrefix(r.URL.Path, "/download/"))
		default:
			f.land(w, r)
		}
	})
	f.web = start(func(w http.ResponseWriter, r *http.Request) {
		if key, ok := strings.CutPrefix(r.URL.Path, "/f/"); ok {
			f.serveFile(w, r, key)
			return
		}
		f.land(w, r)
	})
	return f
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// api answers with the document docs holds for key (wrapped when wrap is given), the status it
// holds instead, or 404.
func (f *fakes) api(w http.ResponseWriter, docs map[string]any, key string, wrap ...func(any) any) {
	f.mu.Lock()
	v, ok := docs[key]
	f.mu.Unlock()
	if code, isCode := v.(int); !ok || isCode {
		if !ok {
			code = 404
		}
		msg := `{"message":"no such record"}`
		if code == http.StatusServiceUnavailable {
			msg = strings.Repeat("overloaded ", 500) // longer than an error may be
		}
		http.Error(w, msg, code)
		return
	}
	for _, fn := range wrap {
		v = fn(v)
	}
	writeJSON(w, v)
}

func (f *fakes) land(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	code, ok := f.landing[r.URL.Path]
	f.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/chain/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/chain/"))
		http.Redirect(w, r, fmt.Sprintf("/chain/%d", n+1), http.StatusFound)
	case r.URL.Path == "/loop-a":
		http.Redirect(w, r, "/loop-b", http.StatusFound)
	case r.URL.Path == "/loop-b":
		http.Redirect(w, r, "/loop-a", http.StatusFound)
	case ok:
		http.Error(w, "landing", code)
	default:
		w.Header().Set("Content-Type", "text/html")
		// Citation metadata as a repository's landing page has it (html_biblio).
		fmt.Fprintf(w, `<html><head><title>%s</title><meta name="citation_title" content="Dataset at %s">`+
			`<meta name="DC.creator" content="Ada Lovelace"><meta name="DC.creator" content="Grace Hopper">`+
			`<meta name="citation_publication_date" content="2021/3/4"><meta name="dc.identifier" content="doi:10.5072/%s">`+
			`</head><body><meta name="citation_title" content="not in the head"></body></html>`, r.URL.Path, r.URL.Path, strings.Trim(r.URL.Path, "/"))
	}
}

func (f *fakes) serveFile(w http.ResponseWriter, r *http.Request, key string) {
	f.mu.Lock()
	ff, ok := f.files[key]
	if ok && ff.lie != "loop" && ff.lie != "to-loopback" {
		f.gets[key]++
	}
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	// A header of the server's own, which a capture's WARC records as received.
	w.Header().Set("X-Fake-Server", "fileset-fake "+key)
	switch ff.lie {
	case "truncate":
		w.Header().Set("Content-Length", strconv.Itoa(len(ff.body)))
		w.Write(ff.body[:len(ff.body)/2])
		return
	case "infinite":
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	case "loop":
		if r.URL.Query().Get("n") == "1" {
			http.Redirect(w, r, r.URL.Path, http.StatusFound)
		} else {
			http.Redirect(w, r, r.URL.Path+"?n=1", http.StatusFound)
		}
		return
	case "to-loopback":
		u := *r.URL
		u.Scheme, u.Host = "http", "127.0.0.1:"+r.Host[strings.LastIndex(r.Host, ":")+1:]
		http.Redirect(w, r, u.String(), http.StatusFound)
		return
	case "slow":
		f.serveSlow(w, r, key, ff.body)
		return
	}
	f.mu.Lock()
	f.served += int64(len(ff.body))
	f.mu.Unlock()
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(ff.body))
}

// serveArchive serves a Zenodo record's files as one zip (its files-archive), each file under
// its key, from the web server's files; the key "lie/KEY" of f.files, when present, is served
// in KEY's place.
func (f *fakes) serveArchive(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	rec, ok := f.zenodoRs[id].(map[string]any)
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files, _ := rec["files"].([]map[string]any)
	for _, fl := range files {
		key, _ := fl["key"].(string)
		f.mu.Lock()
		ff, ok := f.files[key]
		if lie, lying := f.files["lie/"+key]; lying {
			ff, ok = lie, true
		}
		f.mu.Unlock()
		if !ok {
			continue
		}
		e, _ := zw.Create(key)
		e.Write(ff.body)
	}
	zw.Close()
	f.mu.Lock()
	f.gets["archive/"+id]++
	f.mu.Unlock()
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(buf.Bytes()))
}

// serveSlow serves a body (honouring a range) at slowRate bytes per 10 ms, so a test can kill
// the downloading process while bytes are in flight.
func (f *fakes) serveSlow(w http.ResponseWriter, r *http.Request, key string, body []byte) {
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if err != nil || n > len(body) {
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		if n == len(body) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(body)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		f.mu.Lock()
		f.ranged[key]++
		f.mu.Unlock()
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(body)-1, len(body)))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)-n))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := start; i < len(body); {
		j := min(len(body), i+f.slowRate)
		if _, err := w.Write(body[i:j]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		f.mu.Lock()
		f.served += int64(j - i)
		f.mu.Unlock()
		i = j
		if i == len(body) {
			f.mu.Lock()
			f.completed[key]++
			if start == 0 {
				f.fromZero[key]++
			}
			f.mu.Unlock()
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		}
	}
}

func hostOf(s *httptest.Server) string { return "localhost:" + s.URL[strings.LastIndex(s.URL, ":")+1:] }
func baseOf(s *httptest.Server) string { return "http://" + hostOf(s) }

// config returns the fileset configuration that points every platform at the fakes.
func (f *fakes) config(t testing.TB) Config {
	p, err := egress.New([]string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Egress: p, PartialDir: t.TempDir(), HostDelay: -1, Platforms: Platforms{
		"dataverse":  {Hosts: []string{hostOf(f.dataverse)}},
		"figshare":   {Hosts: []string{hostOf(f.figshare)}, API: baseOf(f.figshareAPI) + "/v2"},
		"zenodo":     {Hosts: []string{hostOf(f.zenodo)}, API: baseOf(f.zenodo) + "/api"},
		"archiveorg": {Hosts: []string{hostOf(f.ia)}, API: baseOf(f.ia)},
	}}
}

// file registers a file on the web server and returns its manifest entry (honest unless lie
// or the caller edits it).
func (f *fakes) file(key string, body []byte, lie string) map[string]any {
	f.mu.Lock()
	f.files[key] = &fakeFile{body: body, lie: lie}
	base := baseOf(f.web)
	if f.spread != nil {
		base = "http://" + f.spread.hostFor(key)
	}
	f.mu.Unlock()
	sum := md5.Sum(body)
	return map[string]any{"key": key, "size": len(body), "checksum": "md5:" + hex.EncodeToString(sum[:]),
		"links": map[string]any{"self": base + "/f/" + key}}
}

// zenodoRecord registers a Zenodo record of files and returns its landing URL.
func (f *fakes) zenodoRecord(id int, access string, files ...map[string]any) string {
	f.mu.Lock()
	f.zenodoRs[strconv.Itoa(id)] = map[string]any{"id": id, "conceptrecid": id + 1,
		"metadata": map[string]any{"access_right": access, "title": "dataset " + strconv.Itoa(id)}, "files": files}
	f.mu.Unlock()
	return baseOf(f.zenodo) + "/record/" + strconv.Itoa(id)
}

func (f *fakes) set(m map[string]any, k string, v any) {
	f.mu.Lock()
	m[k] = v
	f.mu.Unlock()
}

// content makes a deterministic body of n bytes.
func content(seed string, n int) []byte {
	b := make([]byte, 0, n+32)
	for i := 0; len(b) < n; i++ {
		b = append(b, fmt.Sprintf("%s line %d\n", seed, i)...)
	}
	return b[:n]
}

func (f *fakes) getCount(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets[key]
}

func queryEscape(s string) string { return url.QueryEscape(s) }

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func sha1hex(b []byte) string {
	s := sha1.Sum(b)
	return hex.EncodeToString(s[:])
}
