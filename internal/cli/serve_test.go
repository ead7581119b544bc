package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestServePathRootOverlapsDataDir checks that serve refuses a path root holding the data dir, or
// inside it, before opening anything: jobs could otherwise ingest tokens.json and the database.
func TestServePathRootOverlapsDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	for _, root := range []string{dir, data, filepath.Join(data, "blobs")} {
		var out, errb bytes.Buffer
		code := Main(t.Context(), []string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--path-root", root}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "overlaps the data dir") {
			t.Errorf("serve --path-root %s = %d, %q; want 2 and an overlap error", root, code, errb.String())
		}
	}
	if roots, err := pathRootList(filepath.Join(dir, "inbox")+", "+filepath.Join(dir, "data2"), data); err != nil || len(roots) != 2 {
		t.Errorf("roots beside the data dir: %v, %v", roots, err)
	}
}
