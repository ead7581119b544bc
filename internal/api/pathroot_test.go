package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
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
		{"symlink to a file outside", filepath.Join(inbox, "tokens.json"), 400, "leads out of its root"},
		{"symlink to /etc/passwd", filepath.Join(inbox, "passwd"), 400, "leads out of its root"},
		{"symlinked directory", filepath.Join(inbox, "outside", "secret.txt"), 400, "leads out of its root"},
		{"dot-dot", inbox + "/../secret.txt", 400, `".." is not allowed`},
		{"dot-dot staying inside", inbox + "/sub/../good.txt", 400, `".." is not allowed`},
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

// TestPathRootEveryRoute feeds every route that takes a location — a job's path, a sheet's
// files_dir (upload and validate), a graph's source, a fileset request's base_url — the same
// escape attempts, and checks that each route refuses each one the same way: 400 bad_request
// with a message naming the location and the reason, and nothing created or read. The reason is
// the one path-root check's (package pathroot); fileset requests, which read only http(s):// URLs,
// refuse every local location for that reason instead.
func TestPathRootEveryRoute(t *testing.T) {
	t.Parallel()
	b := setupFull(t, drivertest.OpenSQLite, nil, &objects.Service{})
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	inbox, secrets := filepath.Join(b.dir, "inbox"), filepath.Join(b.dir, "secrets")
	for _, err := range []error{
		os.MkdirAll(filepath.Join(inbox, "sub"), 0o700),
		os.MkdirAll(secrets, 0o700),
		os.WriteFile(filepath.Join(inbox, "good.txt"), []byte("good"), 0o600),
		os.WriteFile(filepath.Join(secrets, "secret.txt"), []byte("secret"), 0o600),
		os.Symlink("../secrets/secret.txt", filepath.Join(inbox, "out.txt")),
		os.Symlink("/etc/passwd", filepath.Join(inbox, "passwd")),
		os.Symlink("../secrets", filepath.Join(inbox, "outdir")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	const (
		dotDot   = `".." is not allowed`
		notUnder = "it is not under a configured path root"
		leadsOut = "it leads out of its root"
	)
	escapes := []struct {
		name, loc, reason string
		// classified: refused by the classification itself, before the kind of location is
		// looked at (fileset requests give this reason too).
		classified bool
	}{
		{"dot-dot", inbox + "/../secrets/secret.txt", dotDot, false},
		{"dot-dot to a directory", inbox + "/../secrets", dotDot, false},
		{"dot-dot staying inside", inbox + "/sub/../good.txt", dotDot, false},
		{"absolute path outside", secrets, notUnder, false},
		{"/etc", "/etc", notUnder, false},
		{"sibling sharing the root's prefix", inbox + "x", notUnder, false},
		{"relative path", "secrets", notUnder, false},
		{"symlink to a file outside", inbox + "/out.txt", leadsOut, false},
		{"absolute symlink", inbox + "/passwd", leadsOut, false},
		{"symlink to a directory outside", inbox + "/outdir", leadsOut, false},
		{"file through a symlinked directory", inbox + "/outdir/secret.txt", leadsOut, false},
		{"symlinked directory with a trailing slash", inbox + "/outdir/", leadsOut, false},
		{"file with a trailing slash", inbox + "/good.txt/", "a file is named as a directory", false},
		{"percent-encoded dots in a path (literal)", inbox + "/%2e%2e/secrets", "no such file or directory", false},
		{"one-letter scheme", "a:/../../" + secrets, `the scheme "a" is not one this server reads`, true},
		{"file URL outside", "file://" + secrets, notUnder, false},
		{"file URL with percent-encoded dots", "file://" + inbox + "/%2e%2e/secrets", dotDot, false},
		{"file URL on another host", "file://evil.example" + inbox, "a file: URL must name an absolute path on this server", true},
		{"opaque file URL", "file:secrets", "a file: URL must name an absolute path on this server", true},
		{"NUL", inbox + "/good.txt\x00/../../secrets", "it contains a control character", true},
		{"percent-encoded NUL in a file URL", "file://" + inbox + "/sub%00", "it contains a control character", true},
	}
	type answer struct {
		status  int
		code    string
		message string
	}
	post := func(t *testing.T, token, path, contentType string, body []byte) answer {
		t.Helper()
		code, data := b.do(t, "POST", path, token, contentType, strings.NewReader(string(body)))
		var e struct{ Code, Message string }
		json.Unmarshal(data, &e)
		return answer{code, e.Code, e.Message}
	}
	mustJSON := func(v any) []byte { data, _ := json.Marshal(v); return data }
	sheet := []byte(strings.Join(objects.Headers, ",") + "\nIMAGE,w1,f1,secret.txt,a description,S,a label,,\n")
	routes := []struct {
		name, field string
		send        func(t *testing.T, loc string) answer
	}{
		{"POST /v1/jobs", "path", func(t *testing.T, loc string) answer {
			return post(t, b.admin, "/v1/jobs", "application/json", mustJSON(map[string]any{"workflow": "docs", "paths": []string{loc}}))
		}},
		{"POST /v1/jobs metadata.files_dir", "metadata.files_dir", func(t *testing.T, loc string) answer {
			return post(t, b.admin, "/v1/jobs", "application/json", mustJSON(map[string]any{"workflow": objects.Name, "metadata": map[string]any{"files_dir": loc}}))
		}},
		{"POST /v1/jobs metadata.location", "metadata.location", func(t *testing.T, loc string) answer {
			return post(t, b.admin, "/v1/jobs", "application/json", mustJSON(map[string]any{"workflow": objects.Name, "metadata": map[string]any{"location": loc}}))
		}},
		{"POST /v1/jobs metadata.request.source", "metadata.request.source", func(t *testing.T, loc string) answer {
			return post(t, b.admin, "/v1/jobs", "application/json", mustJSON(map[string]any{"workflow": "graph",
				"metadata": map[string]any{"request": map[string]any{"source": loc, "roots": []string{"a@v1"}}}}))
		}},
		{"POST /v1/sheets", "files_dir", func(t *testing.T, loc string) answer {
			return post(t, b.admin, "/v1/sheets?files_dir="+url.QueryEscape(loc), "text/csv", sheet)
		}},
		{"POST /v1/sheets/validate", "files_dir", func(t *testing.T, loc string) answer {
			return post(t, b.reader, "/v1/sheets/validate?files_dir="+url.QueryEscape(loc), "text/csv", sheet)
		}},
		{"POST /v1/graphs", "source", func(t *testing.T, loc string) answer {
			return post(t, b.admin, "/v1/graphs", "application/json", mustJSON(map[string]any{"source": loc, "roots": []string{"a@v1"}}))
		}},
		{"POST /v1/filesets", "requests[0]: base_url", func(t *testing.T, loc string) answer {
			return post(t, b.admin, "/v1/filesets", "application/json", mustJSON(map[string]any{"requests": []any{map[string]any{"base_url": loc}}}))
		}},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			for _, tt := range escapes {
				reason := tt.reason
				if rt.field == "requests[0]: base_url" && !tt.classified {
					reason = "a dataset's landing page is an http(s):// URL"
				}
				got := rt.send(t, tt.loc)
				want := fmt.Sprintf("%s %q: %s", rt.field, tt.loc, reason)
				if got.status != 400 || got.code != "bad_request" || !strings.HasPrefix(got.message, want) {
					t.Errorf("%s: %d %s %q, want 400 bad_request %q", tt.name, got.status, got.code, got.message, want)
				}
			}
		})
	}

	// Nothing was created, nor read into the blob store.
	var jobs struct{ Jobs []any }
	b.json(t, "GET", "/v1/jobs", nil, 200, &jobs)
	if len(jobs.Jobs) != 0 {
		t.Errorf("refused locations created jobs: %+v", jobs.Jobs)
	}
	noBlob(t, b, "secret")
}

// noBlob fails t if any blob stored under the bundle's data dir holds content.
func noBlob(t *testing.T, b *bundle, content string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(b.dir, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if data, err := os.ReadFile(p); err == nil && string(data) == content {
			t.Errorf("blob %s holds %q", p, content)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSheetFilesStayInFilesDir checks that a sheet's files are read inside its files_dir: a file
// that is a symbolic link leading out of it is "File not Found" to validation (so a reader cannot
// probe for files elsewhere), and a file swapped for such a link after validation is not read
// when the sheet is approved — its file set fails, and nothing from outside reaches the blob
// store (the preservation copy among others).
func TestSheetFilesStayInFilesDir(t *testing.T) {
	t.Parallel()
	b := setupFull(t, drivertest.OpenSQLite, nil, &objects.Service{})
	files := filepath.Join(b.dir, "inbox", "batch")
	for _, err := range []error{
		os.MkdirAll(files, 0o700),
		os.WriteFile(filepath.Join(b.dir, "secret.txt"), []byte("secret"), 0o600),
		os.WriteFile(filepath.Join(files, "notes.txt"), []byte("notes"), 0o600),
		os.Symlink("../../secret.txt", filepath.Join(files, "probe.txt")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	head := strings.Join(objects.Headers, ",") + "\n"

	code, data := b.do(t, "POST", "/v1/sheets/validate?files_dir="+url.QueryEscape(files), b.reader, "text/csv",
		strings.NewReader(head+"IMAGE,w1,f1,probe.txt,a description,S,a label,,\n"))
	if code != 200 || !strings.Contains(string(data), "File not Found: probe.txt") {
		t.Fatalf("validate a sheet naming a link out of files_dir: %d %s, want File not Found", code, data)
	}

	code, data = b.do(t, "POST", "/v1/sheets?files_dir="+url.QueryEscape(files), b.admin, "text/csv",
		strings.NewReader(head+"IMAGE,w1,f1,notes.txt,a description,S,a label,,\n"))
	if code != 201 {
		t.Fatalf("upload: %d %s", code, data)
	}
	var s objects.Sheet
	json.Unmarshal(data, &s)
	poll.Until(t, 20*time.Second, "the sheet to await approval", func() (bool, string) {
		b.json(t, "GET", fmt.Sprintf("/v1/sheets/%d", s.JobID), nil, 200, &s)
		return s.Status == objects.StatusAwaitingApproval, s.Status
	})
	// Valid as it was; now its file is a link to a file outside.
	if err := os.Remove(filepath.Join(files, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../secret.txt", filepath.Join(files, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	b.json(t, "POST", fmt.Sprintf("/v1/sheets/%d/approve", s.JobID), nil, http.StatusAccepted, nil)
	var obj struct {
		FileSet objects.FileSet `json:"file_set"`
	}
	poll.Until(t, 20*time.Second, "file set f1 to fail", func() (bool, string) {
		code, data := b.do(t, "GET", "/v1/objects/f1", b.reader, "", nil)
		if code != 200 {
			return false, fmt.Sprint(code)
		}
		json.Unmarshal(data, &obj)
		for _, a := range obj.FileSet.ActionStates {
			if a.Outcome == objects.OutcomeError {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", obj.FileSet.ActionStates)
	})
	var notes []string
	for _, a := range obj.FileSet.ActionStates {
		if a.Action == "CopyFileToPreservation" && a.Outcome == objects.OutcomeOK {
			t.Errorf("the file outside was copied to preservation: %+v", a)
		}
		notes = append(notes, a.Notes)
	}
	if !strings.Contains(strings.Join(notes, " "), "leads out of its root") {
		t.Errorf("file set f1's action states %+v do not say the file leads out of files_dir", obj.FileSet.ActionStates)
	}
	noBlob(t, b, "secret")
}
