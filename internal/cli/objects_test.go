package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/objects"
)

// TestObjectsCommands drives an ingest sheet through the CLI on an embedded data dir:
// validate (a bad sheet: exit 1 and its row, field and message), upload (awaiting approval),
// approve (followed here to completed), show a file set's action states, and delete refused
// once approved.
func TestObjectsCommands(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	data, files := filepath.Join(dir, "data"), filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(files, f), []byte("supplement "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head := strings.Join(objects.Headers, ",") + "\n"
	sheet := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := sheet("bad.csv", "IMAGE,w1,f1,a.txt,a description,S,a label,,\nIMAGE,w1,f2,nope.txt,a description,S,a label,,\n")
	code, out, _ := run(t, "objects", "sheet", "validate", bad, "--files", files, "--data", data)
	if code != ExitFailed || !strings.Contains(out, "row_fail") || !strings.Contains(out, "2    filename: File not Found: nope.txt") {
		t.Errorf("validate a bad sheet: exit %d\n%s", code, out)
	}

	good := sheet("good.csv", "IMAGE,w1,f1,a.txt,a description,S,a label,,\nIMAGE,w1,f2,b.txt,a description,S,a label,,\n")
	code, out, errs := run(t, "objects", "sheet", "upload", good, "--files", files, "--data", data)
	if code != ExitOK || !strings.Contains(out, "sheet 1 good.csv: awaiting_approval (file pass, rows pass, overall pass), 2 rows") {
		t.Fatalf("upload: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = run(t, "objects", "sheet", "approve", "1", "--data", data)
	if code != ExitOK || !strings.Contains(out, "completed") || !strings.Contains(out, "file sets 2/2 complete") {
		t.Fatalf("approve: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "objects", "show", "f2", "--data", data, "--json")
	var shown struct {
		FileSet objects.FileSet `json:"file_set"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &shown) != nil || shown.FileSet.State != objects.StateComplete || len(shown.FileSet.ActionStates) != 6 {
		t.Errorf("show f2: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "objects", "show", "w1", "--data", data)
	if code != ExitOK || !strings.Contains(out, "work w1 (IMAGE, sheet 1): complete") || !strings.Contains(out, "CopyFileToPreservation  ok") {
		t.Errorf("show w1: exit %d\n%s", code, out)
	}
	if code, _, errs = run(t, "objects", "sheet", "delete", "1", "--data", data); code != ExitFailed || !strings.Contains(errs, "was approved") {
		t.Errorf("delete an approved sheet: exit %d, %s", code, errs)
	}
}
