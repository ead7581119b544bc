package result_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/action/result"
)

func apply(t *testing.T, body, dir string) (*actiontest.Recorder, error) {
	t.Helper()
	rec := &actiontest.Recorder{}
	src := result.Source{What: "stdout", Declared: map[string]bool{"has-text": true}, Dir: dir}
	return rec, result.Apply(t.Context(), []byte(body), src, rec)
}

func TestApply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		body          string
		wantPermanent string // substring of the permanent error; empty for success
		wantEvents    []string
		wantMetadata  map[string]any
		wantText      string
	}{
		{name: "full", body: `{"events": ["has-text"], "metadata": {"pages": 3, "title": "T"}, "text": "hello"}`,
			wantEvents: []string{"has-text"}, wantMetadata: map[string]any{"pages": json.Number("3"), "title": "T"}, wantText: "hello"},
		// Numbers as written: a 20-digit id is not rounded through float64, 1.50 not shortened.
		{name: "numbers as written", body: `{"metadata": {"id": 12345678901234567890, "price": 1.50}}`,
			wantMetadata: map[string]any{"id": json.Number("12345678901234567890"), "price": json.Number("1.50")}},
		{name: "empty object", body: "{}\n"},
		{name: "invalid UTF-8 text is repaired", body: "{\"text\": \"a\xffb\"}", wantText: "a\uFFFDb"},
		{name: "error", body: `{"error": "password protected", "events": ["has-text"]}`, wantPermanent: "password protected"},
		{name: "undeclared event", body: `{"events": ["surprise"]}`, wantPermanent: `stdout names event "surprise"`},
		{name: "not json", body: "converted ok", wantPermanent: "stdout is not a JSON object: converted ok"},
		{name: "empty", body: " \n", wantPermanent: "stdout is empty"},
		{name: "array", body: "[]", wantPermanent: "not a JSON object"},
		{name: "unknown field", body: `{"event": "has-text"}`, wantPermanent: "unknown field"},
		{name: "trailing data", body: `{} {}`, wantPermanent: "after the object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, err := apply(t, tt.body, "")
			if tt.wantPermanent != "" {
				if !action.IsPermanent(err) || !strings.Contains(err.Error(), tt.wantPermanent) {
					t.Fatalf("Apply = %v; want a permanent error containing %q", err, tt.wantPermanent)
				}
				if len(rec.Events) > 0 || rec.Text != nil || len(rec.Metadata) > 0 {
					t.Errorf("a refused result recorded events %v, text %v, metadata %v", rec.Events, rec.Text, rec.Metadata)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Events, tt.wantEvents) {
				t.Errorf("events = %v; want %v", rec.Events, tt.wantEvents)
			}
			if len(rec.Metadata) != len(tt.wantMetadata) {
				t.Errorf("metadata = %v; want %v", rec.Metadata, tt.wantMetadata)
			}
			for k, v := range tt.wantMetadata {
				if rec.Metadata[k] != v {
					t.Errorf("metadata[%s] = %v; want %v", k, rec.Metadata[k], v)
				}
			}
			if got := ""; rec.Text != nil || tt.wantText != "" {
				if rec.Text != nil {
					got = *rec.Text
				}
				if got != tt.wantText {
					t.Errorf("text = %q; want %q", got, tt.wantText)
				}
			}
		})
	}
}

// TestChildren creates a child of each form — text, base64, a file in the task's directory, a
// blob reference — and one without content, in the order the result gives them.
func TestChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out", "page-1.txt"), []byte("from a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("stored"))
	sha := hex.EncodeToString(sum[:])
	body := `{"children": [
		{"name": "a.txt", "content_type": "text/plain", "content": "inline text", "metadata": {"page": 1}, "options": {"ocr": true, "id": 12345678901234567890}},
		{"name": "b.bin", "content_base64": "AAEC/w=="},
		{"name": "c.txt", "path": "out/page-1.txt"},
		{"name": "d", "sha256": "` + sha + `"},
		{"name": "e"}
	], "text": "parent"}`
	rec, err := apply(t, body, dir)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name, contentType, data, sha string
	}
	wants := []want{
		{name: "a.txt", contentType: "text/plain", data: "inline text"},
		{name: "b.bin", data: "\x00\x01\x02\xff"},
		{name: "c.txt", data: "from a file"},
		{name: "d", sha: sha},
		{name: "e"},
	}
	if len(rec.Children) != len(wants) {
		t.Fatalf("%d children; want %d", len(rec.Children), len(wants))
	}
	for i, w := range wants {
		c := rec.Children[i]
		if c.Name != w.name || c.ContentType != w.contentType || string(c.Data) != w.data || c.BlobSHA256 != w.sha {
			t.Errorf("child %d = {%q %q %q sha %q}; want %+v", i, c.Name, c.ContentType, c.Data, c.BlobSHA256, w)
		}
	}
	if c := rec.Children[0]; c.Metadata["page"] != json.Number("1") || c.Options["ocr"] != true || c.Options["id"] != json.Number("12345678901234567890") {
		t.Errorf("child a.txt: metadata %v, options %v; want page 1, ocr and id 12345678901234567890 as written", c.Metadata, c.Options)
	}
	if rec.Text == nil || *rec.Text != "parent" {
		t.Errorf("text = %v; want the parent's text set too", rec.Text)
	}
}

// TestChildRefused checks that a child whose content cannot be had fails the result permanently
// with an error naming the child, and that a path never leads out of the task's directory.
func TestChildRefused(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir := filepath.Join(parent, "task")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "secret"), []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(parent, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		child string
		dir   string
		want  string
	}{
		{"dot-dot", `{"name": "x", "path": "../secret"}`, dir, `children[0] "x": path "../secret": `},
		{"absolute", `{"name": "x", "path": "` + filepath.Join(parent, "secret") + `"}`, dir, `path "` + filepath.Join(parent, "secret") + `": `},
		{"symlink out", `{"name": "x", "path": "link"}`, dir, `path "link": `},
		{"fifo", `{"name": "x", "path": "fifo"}`, dir, "not a regular file"},
		{"directory", `{"name": "x", "path": "sub"}`, dir, "not a regular file"},
		{"missing", `{"name": "x", "path": "nope"}`, dir, "no such file"},
		{"no directory", `{"name": "x", "path": "a"}`, "", "the task has no directory"},
		{"two forms", `{"name": "x", "content": "a", "path": "a"}`, dir, "at most one of"},
		{"bad base64", `{"name": "x", "content_base64": "!!"}`, dir, "content_base64"},
		{"bad sha256", `{"name": "x", "sha256": "ABC"}`, dir, "not 64 lowercase hex digits"},
		{"no name", `{"content": "a"}`, dir, "name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, err := apply(t, `{"children": [`+tt.child+`]}`, tt.dir)
			if !action.IsPermanent(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Apply = %v; want a permanent error containing %q", err, tt.want)
			}
			if len(rec.Children) != 0 {
				t.Errorf("created %d children; want none", len(rec.Children))
			}
		})
	}
	// Escapes are refused by the root, not by a check of the name that a symlink would pass.
	_, err := apply(t, `{"children": [{"name": "x", "path": "link"}]}`, dir)
	if err == nil || strings.Contains(err.Error(), "not yours") {
		t.Fatalf("Apply through a symlink out = %v", err)
	}
}
