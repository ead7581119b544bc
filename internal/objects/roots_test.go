package objects_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// startRooted starts the objects workflow with a service whose files directories must lie under
// the path root root.
func startRooted(t *testing.T, root string) *enginetest.Kit {
	t.Helper()
	rs := pathroot.New([]string{root})
	svc := &objects.Service{Roots: &rs}
	kit := enginetest.StartWith(t, drivertest.OpenSQLite, enginetest.Config{Domains: map[string]engine.Domain{objects.Name: objects.Domain{}}},
		append(svc.Actions(), basic.NewPass())...)
	if err := builtin.Apply(t.Context(), kit.Engine, objects.Name); err != nil {
		t.Fatal(err)
	}
	return kit
}

// rootsLayout makes a path root holding batch/files/a.txt and, outside it, files/a.txt of other
// bytes (the secret).
func rootsLayout(t *testing.T) (root, outside string) {
	t.Helper()
	dir := t.TempDir()
	root, outside = filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	for _, err := range []error{
		os.MkdirAll(filepath.Join(root, "batch", "files"), 0o755),
		os.MkdirAll(filepath.Join(outside, "files"), 0o755),
		os.WriteFile(filepath.Join(root, "batch", "files", "a.txt"), []byte("the batch's file"), 0o644),
		os.WriteFile(filepath.Join(outside, "files", "a.txt"), []byte("a secret elsewhere"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

// TestFilesDirOutsideRoots makes a sheet job as an admin's metadata could, with a files_dir
// outside the service's path roots: validation refuses it at once (one attempt), naming the
// location and why, whatever made the job.
func TestFilesDirOutsideRoots(t *testing.T) {
	t.Parallel()
	root, outside := rootsLayout(t)
	kit := startRooted(t, root)
	dir := filepath.Join(outside, "files")
	id := upload(t, kit, "outside.csv", strings.Join(objects.Headers, ",")+"\nIMAGE,w-1,f-1,a.txt,a description,S,a label,,\n", dir)
	kit.WaitJob(t, id, time.Minute)
	items, err := kit.Store.ItemList(t.Context(), store.ItemListParams{JobID: id, Limit: 1})
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v, %v", items, err)
	}
	if want := `files_dir "` + dir + `": it is not under a configured path root (--path-root)`; !strings.Contains(items[0].Error, want) {
		t.Errorf("the sheet's item failed with %q, want %q", items[0].Error, want)
	}
	for _, tk := range kit.Tasks(t, id) {
		if tk.Step == "validate-sheet" && tk.Attempt != 1 {
			t.Errorf("validation ran %d times, want once (the refusal is permanent)", tk.Attempt)
		}
	}
}

// TestFilesDirAncestorSwap validates a sheet whose files_dir lies under the path root, then, before
// the file sets' tasks run, swaps a folder above files_dir for a link to a directory outside the
// root laid out the same way: the chain opens files_dir through the path root when it runs, so
// the file set fails ("leads out of its root") and nothing from outside is copied in.
func TestFilesDirAncestorSwap(t *testing.T) {
	t.Parallel()
	root, outside := rootsLayout(t)
	kit := startRooted(t, root)
	id := upload(t, kit, "swap.csv", strings.Join(objects.Headers, ",")+"\nIMAGE,w-1,f-1,a.txt,a description,S,a label,,\n", filepath.Join(root, "batch", "files"))
	waitSheet(t, kit, id, objects.StatusAwaitingApproval)
	if err := os.RemoveAll(filepath.Join(root, "batch")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "batch")); err != nil {
		t.Fatal(err)
	}
	if err := objects.Approve(t.Context(), kit.Engine, id); err != nil {
		t.Fatal(err)
	}
	if s := waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError); s.Status != objects.StatusCompletedError {
		t.Fatalf("sheet %s, want %s", s.Status, objects.StatusCompletedError)
	}
	fs, err := objects.NewStore(kit.Store.DomainSQL()).GetFileSet(t.Context(), objects.FileSetID("f-1"))
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, a := range fs.ActionStates {
		if a.Outcome == objects.OutcomeError && strings.Contains(a.Notes, "leads out of its root") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("no action of the file set failed as leading out of its root: %+v", fs.ActionStates)
	}
	sum := sha256.Sum256([]byte("a secret elsewhere"))
	if _, err := kit.Blobs.Stat(t.Context(), hex.EncodeToString(sum[:])); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("the file outside the root is in the blob store: %v", err)
	}
}
