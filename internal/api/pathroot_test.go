package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPathRootEscapes creates jobs from server-side paths that try to leave the path root — a
// symlink to a file outside, a symlink to a directory outside, "..", a FIFO — and checks that each
// is refused with an error naming the path, without hanging, while a good file beside them (and a
// symlink to it inside the root) is ingested.
func TestPathRootEscapes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	inbox := filepath.Join(b.dir, "inbox")
	if err := os.MkdirAll(filepath.Join(inbox, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(inbox, "good.txt"), []byte("good"), 0o600))
	must(os.WriteFile(filepath.Join(b.dir, "secret.txt"), []byte("secret"), 0o600))
	must(os.Symlink(filepath.Join(b.dir, "tokens.json"), filepath.Join(inbox, "tokens.json")))
	must(os.Symlink("/etc/passwd", filepath.Join(inbox, "passwd")))
	must(os.Symlink(b.dir, filepath.Join(inbox, "outside")))
	must(os.Symlink("../good.txt", filepath.Join(inbox, "sub", "inside.txt")))
	must(syscall.Mkfifo(filepath.Join(inbox, "fifo"), 0o600))

	for _, tt := range []struct {
		name, path string
		want       int
		msg        string
	}{
		{"symlink to a file outside", filepath.Join(inbox, "tokens.json"), 403, "path escapes from parent"},
		{"symlink to /etc/passwd", filepath.Join(inbox, "passwd"), 403, "path escapes from parent"},
		{"symlinked directory", filepath.Join(inbox, "outside", "secret.txt"), 403, "path escapes from parent"},
		{"dot-dot", inbox + "/../secret.txt", 403, `".." is not allowed`},
		{"dot-dot staying inside", inbox + "/sub/../good.txt", 403, `".." is not allowed`},
		{"fifo", filepath.Join(inbox, "fifo"), 400, "named pipe (FIFO), not a regular file"},
		{"directory", filepath.Join(inbox, "sub"), 400, "a directory, not a regular file"},
		{"missing", filepath.Join(inbox, "nope.txt"), 400, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"workflow": "docs", "paths": []string{tt.path}})
			// A request that hangs (a FIFO opened for reading waits for a writer) fails here.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", b.srv.URL+"/v1/jobs", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+b.admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct{ Code, Message string }
			json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tt.want || !strings.Contains(e.Message, tt.msg) || !strings.Contains(e.Message, fmt.Sprintf("%q", tt.path)) {
				t.Errorf("POST /v1/jobs %s = %d %+v, want %d with %q naming the path", tt.path, resp.StatusCode, e, tt.want, tt.msg)
			}
		})
	}
	var jobs struct{ Jobs []any }
	b.json(t, "GET", "/v1/jobs", nil, 200, &jobs)
	if len(jobs.Jobs) != 0 {
		t.Fatalf("refused paths created jobs: %+v", jobs)
	}

	// The good file, directly and through a symlink inside the root, is ingested.
	var job struct{ ID int64 }
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "docs", "paths": []string{
		filepath.Join(inbox, "good.txt"), filepath.Join(inbox, "sub", "inside.txt")}}, 201, &job)
	var items struct {
		Items []struct {
			ID   int64
			Name string
		}
	}
	b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/items", job.ID), nil, 200, &items)
	if len(items.Items) != 2 || items.Items[0].Name != "good.txt" || items.Items[1].Name != "inside.txt" {
		t.Fatalf("items %+v", items)
	}
	for _, it := range items.Items {
		if code, data := b.do(t, "GET", fmt.Sprintf("/v1/items/%d/original", it.ID), b.reader, "", nil); code != 200 || string(data) != "good" {
			t.Errorf("original of %s: %d %q", it.Name, code, data)
		}
	}
}
