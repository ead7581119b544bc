// Package objects is the domain of Meadow's digital-object ingest (the built-in `objects`
// workflow): ingest sheets and their rows with their validation errors, works and file sets
// (accession numbers unique across the installation), their derivatives, and Meadow's action
// states — one row per (object, action), outcome `waiting`, `started`, `pending`, `ok`, `error`
// or `n/a`, with notes and times — with the history of every outcome an object's action had.
//
// Its rows are written by the workflow's actions ([Service.Actions]) as domain writes
// ([engine.Domain]), in the transaction that completes their task, on both store drivers; the
// `started` outcome alone is written as the action begins, outside any task's transaction
// (an idempotent upsert: a retried attempt writes it again to no effect). Which actions run
// for a file set is the workflow's data — `when:` conditions in internal/builtin/objects.yaml
// following Meadow's (role × MIME type) table — never a Go if.
package objects

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// Name is the name the domain registers under, and the name of the built-in workflow.
const Name = "objects"

//go:embed migrations
var migrations embed.FS

// Domain is the objects domain. The zero value is ready to register.
type Domain struct{}

// Register registers the domain with the engine and applies its migrations.
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, Name, Domain{})
}

// Migrations implements [engine.Domain].
func (Domain) Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

// The operations of a write ([write.Op]).
const (
	opSheet      = "sheet"      // the sheet's status and checks
	opRows       = "rows"       // the sheet's rows with their errors
	opWork       = "work"       // a work created
	opWorkState  = "work_state" // a work's state
	opFileSet    = "file_set"   // a file set created
	opCore       = "core"       // keys merged into a file set's core metadata (and its state)
	opDerivative = "derivative" // a file set's derivative
	opState      = "state"      // an action state
	opBlob       = "blob"       // a blob a file set references
)

// write is the payload of every write of the domain: Op says which fields matter.
type write struct {
	Op string `json:"op"`
	At int64  `json:"at"` // unix nanoseconds, from the action's clock

	// opSheet
	Name      string       `json:"name,omitempty"`
	Status    string       `json:"status,omitempty"`
	Checks    *Checks      `json:"checks,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
	RowCount  int          `json:"row_count,omitempty"`
	StatusIfs []string     `json:"status_ifs,omitempty"` // change the status only from one of these
	// opRows
	Rows []Row `json:"rows,omitempty"`
	// opWork, opWorkState, opFileSet
	Accession string   `json:"accession,omitempty"`
	WorkType  string   `json:"work_type,omitempty"`
	ItemID    int64    `json:"item_id,omitempty"`
	State     string   `json:"state,omitempty"`
	FileSet   *FileSet `json:"file_set,omitempty"`
	// opCore, opDerivative
	FileSetID string         `json:"file_set_id,omitempty"`
	Core      map[string]any `json:"core,omitempty"`
	Kind      string         `json:"kind,omitempty"`
	Value     any            `json:"value,omitempty"`
	// opState
	Action ActionState `json:"action_state,omitzero"`
}

// AccessionTakenError is the error of a write creating a work or file set whose accession number
// another sheet created first.
type AccessionTakenError struct{ Kind, Accession string }

func (e *AccessionTakenError) Error() string {
	return fmt.Sprintf("%s accession number %s already exists in system", e.Kind, e.Accession)
}

// Apply implements [engine.Domain]. Every write is an upsert or an insert that ignores a row it
// made before, so a replayed result changes nothing.
func (Domain) Apply(ctx context.Context, x store.DomainSQL, ws []engine.DomainWrite) error {
	for _, dw := range ws {
		var w write
		if err := json.Unmarshal(dw.Payload, &w); err != nil {
			return fmt.Errorf("write %q: %w", dw.Key, err)
		}
		if err := apply(ctx, x, dw, &w); err != nil {
			return fmt.Errorf("write %q (%s): %w", dw.Key, w.Op, err)
		}
	}
	return nil
}

func apply(ctx context.Context, x store.DomainSQL, dw engine.DomainWrite, w *write) error {
	q := func(query string, args ...any) error {
		_, err := x.Exec(ctx, rebind(x.Dialect(), query), args...)
		return err
	}
	switch w.Op {
	case opSheet:
		return setSheet(ctx, x, dw.JobID, w)
	case opRows:
		for _, r := range w.Rows {
			fields, _ := json.Marshal(r.Fields)
			errs, _ := json.Marshal(orEmpty(r.Errors))
			if err := q(`INSERT INTO objects_sheet_rows (job_id, row_num, state, fields, errors) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (job_id, row_num) DO UPDATE SET state = excluded.state, fields = excluded.fields, errors = excluded.errors`,
				dw.JobID, r.Row, r.State, string(fields), string(errs)); err != nil {
				return err
			}
		}
		return nil
	case opWork:
		if err := q(`INSERT INTO objects_works (accession, job_id, item_id, work_type, state, updated_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (accession) DO NOTHING`, w.Accession, dw.JobID, w.ItemID, w.WorkType, "pending", w.At); err != nil {
			return err
		}
		return owned(ctx, x, "work", `SELECT job_id FROM objects_works WHERE accession = ?`, w.Accession, dw.JobID)
	case opWorkState:
		return q(`UPDATE objects_works SET state = ?, updated_at = ? WHERE accession = ?`, w.State, w.At, w.Accession)
	case opFileSet:
		f := w.FileSet
		if err := q(`INSERT INTO objects_file_sets (accession, file_set_id, job_id, item_id, work_accession, row_num, role, label, location, mime_type, state, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (accession) DO NOTHING`,
			f.Accession, f.ID, dw.JobID, f.ItemID, f.WorkAccession, f.Row, f.Role, f.Label, f.Location, f.MimeType, "pending", w.At); err != nil {
			return err
		}
		return owned(ctx, x, "file set", `SELECT job_id FROM objects_file_sets WHERE accession = ?`, f.Accession, dw.JobID)
	case opCore:
		// A nil map would encode as null, which a JSON merge patch takes for "replace it all".
		core, _ := json.Marshal(orEmptyMap(w.Core))
		merge := `json_patch(core, ?)`
		if x.Dialect() == store.DialectPostgres {
			merge = `(core::jsonb || ?::jsonb)::text`
		}
		if w.ItemID != 0 {
			if err := q(`UPDATE objects_file_sets SET item_id = ? WHERE file_set_id = ?`, w.ItemID, w.FileSetID); err != nil {
				return err
			}
		}
		if w.State != "" {
			return q(`UPDATE objects_file_sets SET core = `+merge+`, state = ?, updated_at = ? WHERE file_set_id = ?`, string(core), w.State, w.At, w.FileSetID)
		}
		return q(`UPDATE objects_file_sets SET core = `+merge+`, updated_at = ? WHERE file_set_id = ?`, string(core), w.At, w.FileSetID)
	case opDerivative:
		v, _ := json.Marshal(w.Value)
		return q(`INSERT INTO objects_derivatives (file_set_id, kind, value) VALUES (?, ?, ?) ON CONFLICT (file_set_id, kind) DO NOTHING`,
			w.FileSetID, w.Kind, string(v))
	case opState:
		return putState(ctx, x, dw.JobID, w.Action, w.At)
	case opBlob:
		sum, _ := w.Value.(string)
		return q(`INSERT INTO objects_blobs (sha256, file_set_id, kind) VALUES (?, ?, ?) ON CONFLICT (sha256, file_set_id, kind) DO NOTHING`,
			sum, w.FileSetID, w.Kind)
	}
	return fmt.Errorf("unknown operation %q", w.Op)
}

// BlobReferenced implements [engine.BlobReferencer]: the preservation copies and derivatives
// of file sets are kept by the blob collector.
func (Domain) BlobReferenced(ctx context.Context, x store.DomainSQL, sha256 string) (bool, error) {
	found := false
	err := query(ctx, x, `SELECT 1 FROM objects_blobs WHERE sha256 = ? LIMIT 1`, []any{sha256},
		func(store.DomainRows) error { found = true; return nil })
	return found, err
}

// owned fails with [AccessionTakenError] when the row of the accession belongs to another job.
func owned(ctx context.Context, x store.DomainSQL, kind, query, accession string, jobID int64) error {
	rows, err := x.Query(ctx, rebind(x.Dialect(), query), accession)
	if err != nil {
		return err
	}
	defer rows.Close()
	var owner int64
	if rows.Next() {
		if err := rows.Scan(&owner); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if owner != jobID {
		return &AccessionTakenError{Kind: kind, Accession: accession}
	}
	return nil
}

func setSheet(ctx context.Context, x store.DomainSQL, jobID int64, w *write) error {
	if _, err := x.Exec(ctx, rebind(x.Dialect(), `INSERT INTO objects_sheets (job_id, name, status, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (job_id) DO NOTHING`), jobID, w.Name, StatusUploaded, w.At); err != nil {
		return err
	}
	set, args := []string{"updated_at = ?"}, []any{w.At}
	if w.Status != "" {
		set, args = append(set, "status = ?"), append(args, w.Status)
	}
	if c := w.Checks; c != nil {
		set, args = append(set, "file_state = ?", "rows_state = ?", "overall_state = ?"), append(args, c.File, c.Rows, c.Overall)
	}
	if w.Errors != nil {
		b, _ := json.Marshal(w.Errors)
		set, args = append(set, "errors = ?"), append(args, string(b))
	}
	if w.RowCount > 0 {
		set, args = append(set, "row_count = ?"), append(args, w.RowCount)
	}
	where := "job_id = ?"
	args = append(args, jobID)
	if len(w.StatusIfs) > 0 {
		where += " AND status IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(w.StatusIfs)), ", ") + ")"
		for _, s := range w.StatusIfs {
			args = append(args, s)
		}
	}
	_, err := x.Exec(ctx, rebind(x.Dialect(), "UPDATE objects_sheets SET "+strings.Join(set, ", ")+" WHERE "+where), args...)
	return err
}

// putState upserts an action state and records its outcome in the history (once per object,
// action and outcome). `waiting` never replaces a state that exists: it is where an action
// starts, not where it returns to.
func putState(ctx context.Context, x store.DomainSQL, jobID int64, s ActionState, at int64) error {
	d := x.Dialect()
	up := `INSERT INTO objects_action_states (object_id, object_type, action, job_id, outcome, notes, inserted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (object_id, action) DO `
	if s.Outcome == OutcomeWaiting {
		up += `NOTHING`
	} else {
		up += `UPDATE SET outcome = excluded.outcome, notes = excluded.notes, updated_at = excluded.updated_at`
	}
	if _, err := x.Exec(ctx, rebind(d, up), s.ObjectID, s.ObjectType, s.Action, jobID, s.Outcome, s.Notes, at, at); err != nil {
		return err
	}
	_, err := x.Exec(ctx, rebind(d, `INSERT INTO objects_action_history (object_id, action, outcome, notes, at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (object_id, action, outcome) DO NOTHING`), s.ObjectID, s.Action, s.Outcome, s.Notes, at)
	return err
}

// rebind turns ? placeholders into the dialect's ([store.Rebind]); the domain's statements have
// no ? in their literals.
func rebind(d store.Dialect, q string) string { return store.Rebind(d, q) }

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func orEmptyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
