package objects_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store"
)

// TestStore is the conformance suite of the domain's typed store, on every driver: each
// statement in each dialect reads back what the domain's writes made, with the same results.
func TestStore(t *testing.T) {
	t.Parallel()
	domaintest.ForEachStore(t, objects.Name, objects.Domain{}, func(t *testing.T, db store.Store) {
		ctx := t.Context()
		apply := func(jobID int64, ws []action.DomainWrite) error {
			return domaintest.Apply(t, db, objects.Domain{}, jobID, ws)
		}
		for _, name := range []string{"a", "b"} {
			if err := apply(1, conformanceWrites(name)); err != nil {
				t.Fatalf("apply the writes of %s: %v", name, err)
			}
		}
		s := objects.NewStore(db.DomainSQL())
		idA, idB := objects.FileSetID("f-a"), objects.FileSetID("f-b")
		sum := fmt.Sprintf("%064x", int('a'))

		t.Run("Sheet", func(t *testing.T) {
			sh, err := s.GetSheet(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if sh.Name != "conformance.csv" || sh.Status != objects.StatusValid || sh.RowCount != 2 || sh.Checks.Overall != objects.CheckPass {
				t.Errorf("sheet = %+v", sh)
			}
			_, err = s.GetSheet(ctx, 99)
			var nf *store.NotFoundError
			if !errors.Is(err, objects.ErrNotFound) || !errors.As(err, &nf) || nf.Error() != "sheet 99 does not exist" {
				t.Errorf("a missing sheet: %v", err)
			}
			rows, err := s.ListRows(ctx, 1, false)
			if err != nil || len(rows) != 2 || rows[0].Row != 'a' || rows[1].Fields["filename"] != "b.tif" {
				t.Errorf("rows = %+v, %v", rows, err)
			}
			if failed, err := s.ListRows(ctx, 1, true); err != nil || len(failed) != 0 {
				t.Errorf("failed rows = %+v, %v", failed, err)
			}
		})
		t.Run("SheetStatusOnlyFrom", func(t *testing.T) {
			set := func(status string, from ...string) {
				t.Helper()
				err := apply(2, []action.DomainWrite{{Domain: objects.Name, Key: "sheet",
					Payload: map[string]any{"op": "sheet", "name": "two.csv", "status": status, "status_ifs": from, "at": 1}}})
				if err != nil {
					t.Fatal(err)
				}
			}
			set(objects.StatusValid)
			set(objects.StatusAwaitingApproval, objects.StatusValid)
			set(objects.StatusDeleted, objects.StatusValid, objects.StatusUploaded)
			if sh, err := s.GetSheet(ctx, 2); err != nil || sh.Status != objects.StatusAwaitingApproval {
				t.Errorf("sheet 2 = %+v, %v; want awaiting approval, left alone by a status it was not in", sh, err)
			}
		})
		t.Run("WorksAndFileSets", func(t *testing.T) {
			works, err := s.ListWorks(ctx, 1)
			if err != nil || len(works) != 2 || works[0].Accession != "w-a" || works[1].State != objects.StateComplete {
				t.Fatalf("works = %+v, %v", works, err)
			}
			w, err := s.GetWork(ctx, "w-a")
			if err != nil || len(w.FileSets) != 1 || w.FileSets[0].ID != idA {
				t.Fatalf("work w-a = %+v, %v", w, err)
			}
			// Both patches of the core metadata merged (json_patch on SQLite, jsonb || on Postgres).
			f := w.FileSets[0]
			if f.Core["mime_type"] != "image/tiff" || f.Core["digests"].(map[string]any)["sha256"] != sum || f.State != objects.StateComplete {
				t.Errorf("file set = %+v", f)
			}
			if _, err := s.GetWork(ctx, "w-none"); !errors.Is(err, objects.ErrNotFound) {
				t.Errorf("a missing work: %v", err)
			}
			all, err := s.ListFileSets(ctx, 1)
			if err != nil || len(all) != 2 || all[0].Accession != "f-a" || all[1].Accession != "f-b" {
				t.Errorf("file sets = %+v, %v", all, err)
			}
			if byWork, err := s.WorkFileSets(ctx, "w-b"); err != nil || len(byWork) != 1 || byWork[0].ID != idB {
				t.Errorf("file sets of w-b = %+v, %v", byWork, err)
			}
			if row, err := s.FileSet(ctx, idB); err != nil || row.Accession != "f-b" || row.ActionStates != nil {
				t.Errorf("file set row = %+v, %v", row, err)
			}
			if _, err := s.FileSet(ctx, "none"); !errors.Is(err, objects.ErrNotFound) {
				t.Errorf("a missing file set: %v", err)
			}
			for _, key := range []string{"f-a", idA} {
				full, err := s.GetFileSet(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if string(full.Derivatives["copy"]) != fmt.Sprintf(`{"sha256":%q}`, sum) {
					t.Errorf("derivatives = %s", full.Derivatives)
				}
				var got []string
				for _, st := range full.ActionStates {
					got = append(got, st.Action+"="+st.Outcome)
				}
				// In the chain's order, whatever the order of their rows.
				if want := []string{"GenerateFileSetDigests=ok", "FileSetComplete=waiting"}; !slices.Equal(got, want) {
					t.Errorf("action states of %s = %v, want %v", key, got, want)
				}
			}
			if ok, err := s.HasDerivative(ctx, idA, "copy"); err != nil || !ok {
				t.Errorf("has copy = %v, %v", ok, err)
			}
			if ok, err := s.HasDerivative(ctx, idA, "playlist"); err != nil || ok {
				t.Errorf("has playlist = %v, %v", ok, err)
			}
		})
		t.Run("AccessionTaken", func(t *testing.T) {
			err := apply(3, []action.DomainWrite{{Domain: objects.Name, Key: "work",
				Payload: map[string]any{"op": "work", "accession": "w-a", "work_type": "IMAGE", "item_id": 9, "at": 1}}})
			if _, ok := errors.AsType[*objects.AccessionTakenError](err); !ok {
				t.Errorf("a work of another sheet's accession: %v", err)
			}
		})
		t.Run("States", func(t *testing.T) {
			if o, err := s.ActionOutcome(ctx, idA, "GenerateFileSetDigests"); err != nil || o != objects.OutcomeOK {
				t.Errorf("outcome = %q, %v", o, err)
			}
			if o, err := s.ActionOutcome(ctx, idA, "ExtractExifMetadata"); err != nil || o != "" {
				t.Errorf("outcome of an action it has not = %q, %v", o, err)
			}
			// waiting replaces no state; another outcome does. Each outcome joins the history once.
			put := func(action, outcome string) {
				t.Helper()
				st := objects.ActionState{ObjectID: idB, ObjectType: "FileSet", Action: action, Outcome: outcome}
				if err := s.PutState(ctx, 1, st, 2); err != nil {
					t.Fatal(err)
				}
			}
			put("GenerateFileSetDigests", objects.OutcomeWaiting)
			if o, _ := s.ActionOutcome(ctx, idB, "GenerateFileSetDigests"); o != objects.OutcomeOK {
				t.Errorf("waiting replaced ok: %q", o)
			}
			put("FileSetComplete", objects.OutcomeStarted)
			put("FileSetComplete", objects.OutcomeStarted)
			if o, _ := s.ActionOutcome(ctx, idB, "FileSetComplete"); o != objects.OutcomeStarted {
				t.Errorf("outcome = %q, want started", o)
			}
			h, err := s.History(ctx, idB)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range h {
				got = append(got, e.Action+"="+e.Outcome)
			}
			want := []string{"GenerateFileSetDigests=ok", "FileSetComplete=waiting", "GenerateFileSetDigests=waiting", "FileSetComplete=started"}
			if !slices.Equal(got, want) {
				t.Errorf("history = %v, want %v", got, want)
			}
		})
		t.Run("Progress", func(t *testing.T) {
			p, err := s.SheetProgress(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if p.TotalActions != 4 || p.FileSets != 2 || p.FileSetsComplete != 2 || p.Status != objects.StatusValid {
				t.Errorf("progress = %+v", p)
			}
			if _, err := s.SheetProgress(ctx, 99); !errors.Is(err, objects.ErrNotFound) {
				t.Errorf("progress of a missing sheet: %v", err)
			}
		})
		t.Run("Existing", func(t *testing.T) {
			many := []string{"f-b"}
			for i := range 1200 { // more than one IN list
				many = append(many, fmt.Sprintf("f-x%d", i))
			}
			w, f, err := s.Existing(ctx, []string{"w-x", "w-a"}, many)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(w)); !slices.Equal(got, []string{"w-a"}) {
				t.Errorf("existing works = %v", got)
			}
			if got := slices.Sorted(maps.Keys(f)); !slices.Equal(got, []string{"f-b"}) {
				t.Errorf("existing file sets = %v", got)
			}
		})
		t.Run("Blobs", func(t *testing.T) {
			for _, c := range []struct {
				name, kind string
				want       bool
			}{{"any", "", true}, {"copy", "copy", true}, {"preservation", "preservation", false}} {
				var ok bool
				var err error
				if c.kind == "" {
					ok, err = s.BlobReferenced(ctx, sum)
				} else {
					ok, err = s.BlobReferencedAs(ctx, sum, c.kind)
				}
				if err != nil || ok != c.want {
					t.Errorf("%s: referenced = %v, %v; want %v", c.name, ok, err, c.want)
				}
			}
			if ok, err := s.BlobReferenced(ctx, "0000"); err != nil || ok {
				t.Errorf("an unreferenced blob: %v, %v", ok, err)
			}
		})
	})
}
