package objects_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/worker"
)

// countingStore counts the blobs put through it.
type countingStore struct {
	blob.Store
	puts atomic.Int64
}

func (s *countingStore) Put(ctx context.Context, r io.Reader) (string, int64, error) {
	s.puts.Add(1)
	return s.Store.Put(ctx, r)
}

// TestFilesAlreadyPresent ingests a file, then, in a second sheet, another file of the same
// bytes and one of other bytes, on each driver: the second file set of the same digest is not
// copied to preservation again (no blob put; "already present" in its notes) and references
// the first's copy; the file of other bytes is copied.
func TestFilesAlreadyPresent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"a.txt": "the same bytes", "b.txt": "the same bytes", "c.txt": "other bytes"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		svc := &objects.Service{}
		// The actions' blob store is their worker's (through their tasks' read port): it counts.
		counted := &countingStore{}
		kit := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{objects.Name: objects.Domain{}},
			Worker: func(c *worker.Config) { counted.Store, c.Blobs = c.Blobs, counted }},
			append(svc.Actions(), basic.NewPass())...)
		if err := builtin.Apply(t.Context(), kit.Engine, objects.Name); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		x := kit.Store.DomainSQL()
		head := strings.Join(objects.Headers, ",") + "\n"
		ingest := func(name, rows string) {
			t.Helper()
			id := upload(t, kit, name, head+rows, dir)
			waitSheet(t, kit, id, objects.StatusAwaitingApproval)
			if err := objects.Approve(ctx, kit.Engine, id); err != nil {
				t.Fatal(err)
			}
			if s := waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError); s.Status != objects.StatusCompleted {
				t.Fatalf("%s: %s", name, s.Status)
			}
		}
		copyState := func(acc string) (*objects.FileSet, objects.ActionState) {
			t.Helper()
			f, err := objects.NewStore(x).GetFileSet(ctx, objects.FileSetID(acc))
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range f.ActionStates {
				if a.Action == "CopyFileToPreservation" {
					return f, a
				}
			}
			t.Fatalf("%s has no CopyFileToPreservation state: %+v", acc, f.ActionStates)
			return nil, objects.ActionState{}
		}

		ingest("first.csv", "IMAGE,w-a,f-a,a.txt,a description,S,a label,,\n")
		first, st := copyState("f-a")
		sum, _ := first.Core["preservation_sha256"].(string)
		if n := counted.puts.Load(); n != 1 || st.Notes != "sha256:"+sum {
			t.Fatalf("first file: %d blobs put, notes %q", n, st.Notes)
		}

		ingest("second.csv", "IMAGE,w-b,f-b,b.txt,a description,S,a label,,\nIMAGE,w-b,f-c,c.txt,a description,S,a label,,\n")
		if n := counted.puts.Load(); n != 2 {
			t.Errorf("%d blobs put in all, want 2: the file of the same bytes was copied again", n)
		}
		same, st := copyState("f-b")
		if st.Outcome != objects.OutcomeOK || st.Notes != "already present: sha256:"+sum || same.Core["preservation_sha256"] != sum ||
			same.Core["preservation_location"] != first.Core["preservation_location"] {
			t.Errorf("file of the same bytes: state %+v, core %v", st, same.Core)
		}
		other, st := copyState("f-c")
		if o, _ := other.Core["preservation_sha256"].(string); o == sum || o == "" || st.Notes != "sha256:"+o {
			t.Errorf("file of other bytes: state %+v, core %v", st, other.Core)
		}
		if _, err := kit.Blobs.Stat(ctx, sum); err != nil {
			t.Errorf("the shared preservation copy: %v", err)
		}
	})
}
