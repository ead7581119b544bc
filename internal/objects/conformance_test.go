package objects_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store"
)

// conformanceTables are the domain's tables, each with its columns as text (the history's id,
// a sequence, left out: its entries are keyed by object, action and outcome).
var conformanceTables = map[string][]string{
	"objects_sheets":         {"job_id", "name", "status", "file_state", "rows_state", "overall_state", "errors", "row_count", "updated_at"},
	"objects_sheet_rows":     {"job_id", "row_num", "state", "fields", "errors"},
	"objects_works":          {"accession", "job_id", "item_id", "work_type", "state", "updated_at"},
	"objects_file_sets":      {"accession", "file_set_id", "job_id", "item_id", "work_accession", "row_num", "role", "label", "location", "mime_type", "core", "state", "updated_at"},
	"objects_derivatives":    {"file_set_id", "kind", "value"},
	"objects_action_states":  {"object_id", "object_type", "action", "job_id", "outcome", "notes", "inserted_at", "updated_at"},
	"objects_action_history": {"object_id", "action", "outcome", "notes", "at"},
	"objects_blobs":          {"sha256", "file_set_id", "kind"},
}

// conformanceWrites are the writes of every operation the domain applies, for the item name:
// a sheet (the same for every item of the job), its row, a work, a file set with its core
// metadata, a derivative, an action state and a referenced blob.
func conformanceWrites(name string) []action.DomainWrite {
	const at = 1764201600000000000
	row := int(name[0])
	work, acc := "w-"+name, "f-"+name
	id := objects.FileSetID(acc)
	sum := fmt.Sprintf("%064x", row)
	w := func(key string, payload map[string]any) action.DomainWrite {
		payload["at"] = at
		return action.DomainWrite{Domain: objects.Name, Key: key, Payload: payload}
	}
	return []action.DomainWrite{
		w("sheet", map[string]any{"op": "sheet", "name": "conformance.csv", "status": objects.StatusValid,
			"checks": objects.Checks{File: objects.CheckPass, Rows: objects.CheckPass, Overall: objects.CheckPass}, "row_count": 2}),
		w("rows.0", map[string]any{"op": "rows", "rows": []objects.Row{{Row: row, State: objects.CheckPass,
			Fields: map[string]string{"filename": name + ".tif"}, Errors: []objects.FieldError{}}}}),
		w("work", map[string]any{"op": "work", "accession": work, "work_type": "IMAGE", "item_id": row}),
		w("file_set."+acc, map[string]any{"op": "file_set", "file_set": objects.FileSet{ID: id, Accession: acc, WorkAccession: work,
			Row: row, Role: "A", Label: name, Location: "/files/" + name + ".tif", MimeType: "image/tiff"}}),
		w("core.mime_type", map[string]any{"op": "core", "file_set_id": id, "core": map[string]any{"mime_type": "image/tiff"}}),
		w("core.digests", map[string]any{"op": "core", "file_set_id": id, "state": objects.StateComplete,
			"core": map[string]any{"digests": map[string]any{"sha256": sum}}}),
		w("derivative.copy", map[string]any{"op": "derivative", "file_set_id": id, "kind": "copy", "value": map[string]any{"sha256": sum}}),
		w("state.GenerateFileSetDigests", map[string]any{"op": "state", "action_state": objects.ActionState{ObjectID: id,
			ObjectType: "FileSet", Action: "GenerateFileSetDigests", Outcome: objects.OutcomeOK, Notes: "sha256:" + sum}}),
		w("state.FileSetComplete", map[string]any{"op": "state", "action_state": objects.ActionState{ObjectID: id,
			ObjectType: "FileSet", Action: "FileSetComplete", Outcome: objects.OutcomeWaiting}}),
		w("work_state", map[string]any{"op": "work_state", "accession": work, "state": objects.StateComplete}),
		w("blob.copy", map[string]any{"op": "blob", "file_set_id": id, "kind": "copy", "value": sum}),
	}
}

// conformanceRows reads every row of the domain's tables, each column as text.
func conformanceRows(ctx context.Context, x store.DomainSQL) ([]string, error) {
	var out []string
	for table, cols := range conformanceTables {
		exprs := make([]string, len(cols))
		for i, c := range cols {
			exprs[i] = "CAST(" + c + " AS TEXT)"
		}
		rows, err := x.Query(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM "+table)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			vals := make([]string, len(cols))
			dest := make([]any, len(cols))
			for i := range vals {
				dest[i] = &vals[i]
			}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, table+": "+strings.Join(vals, " | "))
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestConformance runs the domain conformance kit on the objects domain, on every driver: its
// migrations, and every operation's writes committed with their task, none for a failed
// attempt, and none changed by a replay.
func TestConformance(t *testing.T) {
	t.Parallel()
	domaintest.Run(t, domaintest.Domain{Name: objects.Name, Domain: objects.Domain{}, Writes: conformanceWrites, Rows: conformanceRows})
}
