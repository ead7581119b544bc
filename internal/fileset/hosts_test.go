package fileset

import (
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fileHosts serve the fakes' files from many loopback addresses (the whole of 127.0.0.0/8 is
// loopback on Linux), so that a politeness delay per host still lets many downloads run at
// once: each address is a host of its own to the download step's limit.
type fileHosts struct {
	hosts []string // "127.0.x.y:port"

	mu     sync.Mutex
	starts map[string][]fileGet // host → each file GET it served, in order
}

// fileGet is the start of a GET of a file.
type fileGet struct {
	at  time.Time
	key string
}

// spreadFiles starts n servers of the fakes' files, on 127.0.1.1, 127.0.1.2, …, and makes
// the files registered from now on link to one of them (a dataset's files to one host).
func (f *fakes) spreadFiles(t testing.TB, n int) *fileHosts {
	t.Helper()
	fh := &fileHosts{starts: map[string][]fileGet{}}
	for i := range n {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.%d.%d:0", 1+i/250, 1+i%250))
		if err != nil {
			t.Fatalf("listen on a loopback address: %v", err)
		}
		host := ln.Addr().String()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/f/") {
				fh.mu.Lock()
				fh.starts[host] = append(fh.starts[host], fileGet{time.Now(), strings.TrimPrefix(r.URL.Path, "/f/")})
				fh.mu.Unlock()
			}
			f.web.Config.Handler.ServeHTTP(w, r)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		fh.hosts = append(fh.hosts, host)
	}
	f.mu.Lock()
	f.spread = fh
	f.mu.Unlock()
	return fh
}

// hostFor returns the host of the file key: by its dataset, the key's first element.
func (fh *fileHosts) hostFor(key string) string {
	h := fnv.New32a()
	dataset, _, _ := strings.Cut(key, "/")
	h.Write([]byte(dataset))
	return fh.hosts[int(h.Sum32())%len(fh.hosts)]
}

// reset forgets the GETs served so far.
func (fh *fileHosts) reset() {
	fh.mu.Lock()
	clear(fh.starts)
	fh.mu.Unlock()
}

// minGap returns the least time between the starts of two GETs of different files on one
// host (a download's second GET of its own file, a resume, is part of that download), the
// number of GETs and the number of hosts that served any.
func (fh *fileHosts) minGap() (gap time.Duration, gets, hosts int) {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	gap = -1
	for _, ts := range fh.starts {
		hosts++
		gets += len(ts)
		for i := 1; i < len(ts); i++ {
			if d := ts[i].at.Sub(ts[i-1].at); ts[i].key != ts[i-1].key && (gap < 0 || d < gap) {
				gap = d
			}
		}
	}
	return gap, gets, hosts
}

// TestSpreadFiles: files registered after spreadFiles are served from the loopback address
// their dataset maps to, and the fake records each GET's start by host.
func TestSpreadFiles(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	fh := f.spreadFiles(t, 3)
	doc := f.file("ds1/a.csv", []byte("a,b\n"), "")
	link := doc["links"].(map[string]any)["self"].(string)
	if want := "http://" + fh.hostFor("ds1/a.csv") + "/f/ds1/a.csv"; link != want || !strings.HasPrefix(link, "http://127.0.1.") {
		t.Fatalf("link %q, want %q", link, want)
	}
	for range 2 {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", link, resp.Status)
		}
	}
	if gap, gets, hosts := fh.minGap(); gets != 2 || hosts != 1 || gap != -1 {
		t.Errorf("gap %s, %d GETs on %d hosts; want 2 of one file (no gap between two files) on 1", gap, gets, hosts)
	}
}
