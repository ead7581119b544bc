package execaction_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/execaction"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestChildrenReplay runs an exec step whose JSON result makes a child of each form through the
// worker, on every driver. Its first attempt records its children and is then lost (a transient
// error after Run: as if the process died before the task's completion committed); the second
// attempt runs the command again and makes the same children, which the output recognises: the
// item ends with each child once, at its ordinal, with the content its form names.
func TestChildrenReplay(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		var runs atomic.Int32
		exec := execaction.New()
		flaky := enginetest.Func("exec", func(ctx context.Context, tk *action.Task, out action.Output) error {
			runs.Add(1)
			if err := exec.Run(ctx, tk, out); err != nil {
				return err
			}
			if tk.Attempt == 1 {
				return errors.New("lost after recording its children")
			}
			return nil
		}).WithSpec(func(s *action.Spec) { *s = exec.Spec() })
		k := enginetest.Start(t, open, flaky)
		stored, _, err := k.Blobs.Put(t.Context(), strings.NewReader("stored before"))
		if err != nil {
			t.Fatal(err)
		}
		script := `printf 'from a file' > page.txt && printf '%s' "$1"`
		result := fmt.Sprintf(`{"children": [
			{"name": "inline.txt", "content": "inline", "content_type": "text/plain"},
			{"name": "bytes.bin", "content_base64": "AAEC"},
			{"name": "page.txt", "path": "page.txt", "metadata": {"page": 1}},
			{"name": "stored", "sha256": %q}]}`, stored)
		wf := fmt.Sprintf("name: kids\nsteps:\n  make: {action: exec, needs: [start], when: root, with: {stdout: json, command: [sh, -c, %q, sh, %q]}}\n",
			script, result)
		job := k.StartJob(t, wf, engine.Root{Name: "root"})
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job = %s (%s); want complete", j.State, j.Error)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("the step ran %d times; want 2 (a lost attempt and its replay)", n)
		}
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID})
		if err != nil {
			t.Fatal(err)
		}
		var root *record.Item
		for _, it := range items {
			if it.ParentID == 0 {
				root = it
			}
		}
		kids, err := k.Store.ItemListChildren(t.Context(), root.ID, "make")
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ name, sha string }{
			{"inline.txt", hexSHA("inline")},
			{"bytes.bin", hexSHA("\x00\x01\x02")},
			{"page.txt", hexSHA("from a file")},
			{"stored", stored},
		}
		if len(items) != 1+len(want) || len(kids) != len(want) {
			t.Fatalf("%d items, %d children of the root; want %d children and no duplicate", len(items), len(kids), len(want))
		}
		for i, w := range want {
			if kids[i].Ordinal != i || kids[i].Name != w.name || kids[i].BlobSHA256 != w.sha {
				t.Errorf("child %d = %d %q sha %.12s; want %q sha %.12s", i, kids[i].Ordinal, kids[i].Name, kids[i].BlobSHA256, w.name, w.sha)
			}
		}
		if kids[3].Size != int64(len("stored before")) {
			t.Errorf("the blob reference's size = %d; want the blob's, %d", kids[3].Size, len("stored before"))
		}
	})
}

// TestChildMissingBlob checks that a child naming a blob the store does not hold fails the item
// for good, naming the blob, and makes no child.
func TestChildMissingBlob(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		k := enginetest.Start(t, open, execaction.New())
		missing := hexSHA("never stored")
		wf := fmt.Sprintf("name: kids\nsteps:\n  make: {action: exec, needs: [start], with: {stdout: json, command: [printf, %q]}}\n",
			`{"children": [{"name": "x", "sha256": "`+missing+`"}]}`)
		job := k.StartJob(t, wf, engine.Root{Name: "root"})
		k.WaitJob(t, job.ID, 30*time.Second)
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 1 || !strings.Contains(items[0].Error, "blob "+missing+" is not in the blob store") {
			t.Fatalf("%d items, root error %q; want only the root, failed naming the blob", len(items), items[0].Error)
		}
		for _, tk := range k.Tasks(t, job.ID) {
			if tk.Attempt != 1 {
				t.Errorf("task %s made %d attempts; want 1 (a missing blob is permanent)", tk.Step, tk.Attempt)
			}
		}
	})
}
