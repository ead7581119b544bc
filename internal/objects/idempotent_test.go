package objects_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
)

// writes is an action.Output that keeps the domain writes an action makes.
type writes struct{ ws []action.DomainWrite }

func (w *writes) CreateChild(context.Context, action.Child) error          { return nil }
func (w *writes) SetText(context.Context, string) error                    { return nil }
func (w *writes) SetThumbnail(context.Context, io.Reader, string) error    { return nil }
func (w *writes) SetContentType(string)                                    {}
func (w *writes) SetMetadata(map[string]any)                               {}
func (w *writes) SetOutput(context.Context, string, json.RawMessage) error { return nil }
func (w *writes) Emit(...string)                                           {}
func (w *writes) Progress(float64)                                         {}
func (w *writes) Heartbeat()                                               {}
func (w *writes) Write(d action.DomainWrite) error                         { w.ws = append(w.ws, d); return nil }

// TestForceAndOverwrite runs the digests action by hand on a file set, applying its writes as
// the engine would: a done action is left alone (no write) unless forced, and with overwrite
// false a result that exists marks the action ok without work ("already complete").
func TestForceAndOverwrite(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjects(t, open)
		ctx := t.Context()
		x := kit.Store.DomainSQL()
		path := filepath.Join(t.TempDir(), "f.txt")
		if err := os.WriteFile(path, []byte("content"), 0o644); err != nil {
			t.Fatal(err)
		}
		id := objects.FileSetID("force-1")
		apply := func(ws []action.DomainWrite) {
			t.Helper()
			var dws []engine.DomainWrite
			for _, w := range ws {
				dw, err := kit.Engine.EncodeWrite(w)
				if err != nil {
					t.Fatal(err)
				}
				dw.JobID = 1
				dws = append(dws, dw)
			}
			if err := (objects.Domain{}).Apply(ctx, x, dws); err != nil {
				t.Fatal(err)
			}
		}
		fs := map[string]any{"op": "file_set", "at": 1, "file_set": map[string]any{"id": id, "accession_number": "force-1",
			"work_accession_number": "force-w", "role": "S", "location": path, "mime_type": "text/plain"}}
		apply([]action.DomainWrite{{Domain: objects.Name, Key: "fs", Payload: fs}})
		// A service of its own runs the action outside any task, with a read port of the kit's
		// engine for job 1.
		var digests action.Action
		svc := &objects.Service{}
		for _, a := range svc.Actions() {
			if a.Spec().Name == "objects.digests" {
				digests = a
			}
		}
		runDigests := func(with map[string]any) []action.DomainWrite {
			t.Helper()
			out := &writes{}
			task := &action.Task{JobID: 1, Item: action.Item{Metadata: map[string]any{"file_set_id": id, "location": path}}, With: with}
			if err := digests.Run(engine.WithReads(ctx, kit.Engine.TaskReads(1, kit.Blobs)), task, out); err != nil {
				t.Fatal(err)
			}
			apply(out.ws)
			return out.ws
		}
		state := func() objects.ActionState {
			st, err := objects.NewStore(x).ActionStates(ctx, id)
			if err != nil || len(st) != 1 {
				t.Fatalf("states %+v, %v", st, err)
			}
			return st[0]
		}
		if ws := runDigests(nil); len(ws) != 2 || state().Outcome != objects.OutcomeOK {
			t.Fatalf("first run: %d writes, state %+v", len(ws), state())
		}
		if ws := runDigests(nil); len(ws) != 0 {
			t.Errorf("a done action ran again unforced: %d writes", len(ws))
		}
		if ws := runDigests(map[string]any{"force": true}); len(ws) != 2 {
			t.Errorf("forced: %d writes, want the digests and the state", len(ws))
		}
		ws := runDigests(map[string]any{"force": true, "overwrite": false})
		if len(ws) != 1 || state().Notes != "already complete" || state().Outcome != objects.OutcomeOK {
			t.Errorf("overwrite false with digests present: %d writes, state %+v", len(ws), state())
		}
		f, err := objects.NewStore(x).GetFileSet(ctx, id)
		if err != nil || f.Core["digests"].(map[string]any)["sha256"] != "ed7002b439e9ac845f22357d822bac1444730fbdb6016d3ec9432297b9ec9f73" {
			t.Errorf("file set %+v, %v", f, err)
		}
	})
}
