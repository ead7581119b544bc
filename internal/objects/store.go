package objects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/store"
)

// ErrNotFound is [store.ErrNotFound]: a sheet, work or file set that does not exist is a
// [*store.NotFoundError] naming it ("sheet 7 does not exist"), which errors.Is matches with
// either.
var ErrNotFound = store.ErrNotFound

// Store reads and writes the domain's rows with typed queries: every statement of the domain is
// one of the [store.DomainQuery] values below, its SQLite and PostgreSQL forms side by side.
// API, web and CLI read sheets, works and file sets through it ([Open]); the domain's Apply
// writes through one over the task's transaction. It is safe for concurrent use when its
// [store.DomainSQL] is.
type Store struct{ x store.DomainSQL }

// NewStore returns the Store that runs its statements on x: a store driver's (autocommit), or
// a transaction's.
func NewStore(x store.DomainSQL) *Store { return &Store{x: x} }

// Open returns the Store over the engine's store, outside any task's transaction.
func Open(e *engine.Engine) *Store { return NewStore(e.DomainSQL()) }

// The domain's statements. Those both dialects speak are written once ([store.SharedQuery]).
var (
	sheetGet = store.SharedQuery(`SELECT job_id, name, status, file_state, rows_state, overall_state, errors, row_count, updated_at
		FROM objects_sheets WHERE job_id = ?`)
	sheetCreate = store.SharedQuery(`INSERT INTO objects_sheets (job_id, name, status, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (job_id) DO NOTHING`)
	rowsList       = store.SharedQuery(`SELECT row_num, state, fields, errors FROM objects_sheet_rows WHERE job_id = ? ORDER BY row_num`)
	rowsListFailed = store.SharedQuery(`SELECT row_num, state, fields, errors FROM objects_sheet_rows WHERE job_id = ? AND state = ? ORDER BY row_num`)
	rowPut         = store.SharedQuery(`INSERT INTO objects_sheet_rows (job_id, row_num, state, fields, errors) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (job_id, row_num) DO UPDATE SET state = excluded.state, fields = excluded.fields, errors = excluded.errors`)

	worksOfSheet = store.SharedQuery(`SELECT ` + workColumns + ` FROM objects_works WHERE job_id = ? ORDER BY accession`)
	workGet      = store.SharedQuery(`SELECT ` + workColumns + ` FROM objects_works WHERE accession = ?`)
	workOwner    = store.SharedQuery(`SELECT job_id FROM objects_works WHERE accession = ?`)
	workCreate   = store.SharedQuery(`INSERT INTO objects_works (accession, job_id, item_id, work_type, state, updated_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (accession) DO NOTHING`)
	workSetState = store.SharedQuery(`UPDATE objects_works SET state = ?, updated_at = ? WHERE accession = ?`)

	fileSetsOfSheet = store.SharedQuery(`SELECT ` + fileSetColumns + ` FROM objects_file_sets WHERE job_id = ? ORDER BY row_num`)
	fileSetsOfWork  = store.SharedQuery(`SELECT ` + fileSetColumns + ` FROM objects_file_sets WHERE work_accession = ? ORDER BY row_num`)
	fileSetByID     = store.SharedQuery(`SELECT ` + fileSetColumns + ` FROM objects_file_sets WHERE file_set_id = ?`)
	fileSetByEither = store.SharedQuery(`SELECT ` + fileSetColumns + ` FROM objects_file_sets WHERE accession = ? OR file_set_id = ? ORDER BY row_num`)
	fileSetOwner    = store.SharedQuery(`SELECT job_id FROM objects_file_sets WHERE accession = ?`)
	fileSetCreate   = store.SharedQuery(`INSERT INTO objects_file_sets (accession, file_set_id, job_id, item_id, work_accession, row_num, role, label, location, mime_type, state, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (accession) DO NOTHING`)
	fileSetSetItem = store.SharedQuery(`UPDATE objects_file_sets SET item_id = ? WHERE file_set_id = ?`)
	// The core metadata is a JSON object as text, merged with a JSON merge patch.
	fileSetMergeCore = store.DomainQuery{
		SQLite:   `UPDATE objects_file_sets SET core = json_patch(core, ?), updated_at = ? WHERE file_set_id = ?`,
		Postgres: `UPDATE objects_file_sets SET core = (core::jsonb || $1::jsonb)::text, updated_at = $2 WHERE file_set_id = $3`,
	}
	fileSetMergeCoreState = store.DomainQuery{
		SQLite:   `UPDATE objects_file_sets SET core = json_patch(core, ?), state = ?, updated_at = ? WHERE file_set_id = ?`,
		Postgres: `UPDATE objects_file_sets SET core = (core::jsonb || $1::jsonb)::text, state = $2, updated_at = $3 WHERE file_set_id = $4`,
	}
	fileSetStates = store.SharedQuery(`SELECT state, COUNT(*) FROM objects_file_sets WHERE job_id = ? GROUP BY state`)

	derivativesOf   = store.SharedQuery(`SELECT kind, value FROM objects_derivatives WHERE file_set_id = ?`)
	derivativeHas   = store.SharedQuery(`SELECT 1 FROM objects_derivatives WHERE file_set_id = ? AND kind = ? LIMIT 1`)
	derivativeStore = store.SharedQuery(`INSERT INTO objects_derivatives (file_set_id, kind, value) VALUES (?, ?, ?)
		ON CONFLICT (file_set_id, kind) DO NOTHING`)

	statesOf = store.SharedQuery(`SELECT object_id, object_type, action, outcome, notes, inserted_at, updated_at FROM objects_action_states
		WHERE object_id = ? ORDER BY inserted_at, action`)
	stateOutcome  = store.SharedQuery(`SELECT outcome FROM objects_action_states WHERE object_id = ? AND action = ?`)
	stateOutcomes = store.SharedQuery(`SELECT outcome, COUNT(*) FROM objects_action_states WHERE job_id = ? GROUP BY outcome`)
	// waiting is where an action starts, never where it returns to: it replaces no state.
	stateWaiting = store.SharedQuery(`INSERT INTO objects_action_states (object_id, object_type, action, job_id, outcome, notes, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (object_id, action) DO NOTHING`)
	statePut = store.SharedQuery(`INSERT INTO objects_action_states (object_id, object_type, action, job_id, outcome, notes, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (object_id, action) DO UPDATE SET outcome = excluded.outcome, notes = excluded.notes, updated_at = excluded.updated_at`)
	historyOf  = store.SharedQuery(`SELECT id, object_id, action, outcome, notes, at FROM objects_action_history WHERE object_id = ? ORDER BY id`)
	historyAdd = store.SharedQuery(`INSERT INTO objects_action_history (object_id, action, outcome, notes, at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (object_id, action, outcome) DO NOTHING`)

	blobAny  = store.SharedQuery(`SELECT 1 FROM objects_blobs WHERE sha256 = ? LIMIT 1`)
	blobKind = store.SharedQuery(`SELECT 1 FROM objects_blobs WHERE sha256 = ? AND kind = ? LIMIT 1`)
	blobAdd  = store.SharedQuery(`INSERT INTO objects_blobs (sha256, file_set_id, kind) VALUES (?, ?, ?)
		ON CONFLICT (sha256, file_set_id, kind) DO NOTHING`)
)

const (
	workColumns    = `accession, work_type, state, job_id, item_id, updated_at`
	fileSetColumns = `file_set_id, accession, job_id, item_id, work_accession, row_num, role, label, location, mime_type, state, core, updated_at`
)

func nanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// exists reports whether the read q has a row.
func (s *Store) exists(ctx context.Context, q store.DomainQuery, args ...any) (bool, error) {
	found := false
	err := q.Each(ctx, s.x, func(store.DomainRows) error { found = true; return nil }, args...)
	return found, err
}

// GetSheet returns the sheet of a job.
func (s *Store) GetSheet(ctx context.Context, jobID int64) (*Sheet, error) {
	var sh *Sheet
	err := sheetGet.Each(ctx, s.x, func(r store.DomainRows) error {
		sh = &Sheet{}
		var errs string
		var at int64
		if err := r.Scan(&sh.JobID, &sh.Name, &sh.Status, &sh.Checks.File, &sh.Checks.Rows, &sh.Checks.Overall, &errs, &sh.RowCount, &at); err != nil {
			return err
		}
		sh.UpdatedAt = nanos(at)
		return json.Unmarshal([]byte(errs), &sh.Errors)
	}, jobID)
	if err == nil && sh == nil {
		err = &store.NotFoundError{Kind: "sheet", ID: strconv.FormatInt(jobID, 10)}
	}
	return sh, err
}

// ListRows returns a sheet's rows in order; with failed, only those that failed validation.
func (s *Store) ListRows(ctx context.Context, jobID int64, failed bool) ([]Row, error) {
	q, args := rowsList, []any{jobID}
	if failed {
		q, args = rowsListFailed, append(args, CheckFail)
	}
	var out []Row
	err := q.Each(ctx, s.x, func(r store.DomainRows) error {
		var row Row
		var fields, errs string
		if err := r.Scan(&row.Row, &row.State, &fields, &errs); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(fields), &row.Fields); err != nil {
			return err
		}
		out = append(out, row)
		return json.Unmarshal([]byte(errs), &out[len(out)-1].Errors)
	}, args...)
	return out, err
}

func scanWork(r store.DomainRows) (*Work, error) {
	w := &Work{}
	var at int64
	err := r.Scan(&w.Accession, &w.WorkType, &w.State, &w.JobID, &w.ItemID, &at)
	w.UpdatedAt = nanos(at)
	return w, err
}

// ListWorks returns a sheet's works, in accession order, without their file sets.
func (s *Store) ListWorks(ctx context.Context, jobID int64) ([]*Work, error) {
	var out []*Work
	err := worksOfSheet.Each(ctx, s.x, func(r store.DomainRows) error {
		w, err := scanWork(r)
		out = append(out, w)
		return err
	}, jobID)
	return out, err
}

// GetWork returns a work with its file sets (without their action states).
func (s *Store) GetWork(ctx context.Context, accession string) (*Work, error) {
	var w *Work
	err := workGet.Each(ctx, s.x, func(r store.DomainRows) (err error) { w, err = scanWork(r); return err }, accession)
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, &store.NotFoundError{Kind: "work", ID: strconv.Quote(accession)}
	}
	w.FileSets, err = s.WorkFileSets(ctx, accession)
	return w, err
}

func (s *Store) fileSets(ctx context.Context, q store.DomainQuery, args ...any) ([]*FileSet, error) {
	var out []*FileSet
	err := q.Each(ctx, s.x, func(r store.DomainRows) error {
		f := &FileSet{}
		var core string
		var at int64
		if err := r.Scan(&f.ID, &f.Accession, &f.JobID, &f.ItemID, &f.WorkAccession, &f.Row, &f.Role, &f.Label, &f.Location,
			&f.MimeType, &f.State, &core, &at); err != nil {
			return err
		}
		f.UpdatedAt = nanos(at)
		out = append(out, f)
		return metadata.Unmarshal([]byte(core), &f.Core)
	}, args...)
	return out, err
}

// ListFileSets returns a sheet's file sets in row order (without derivatives or states).
func (s *Store) ListFileSets(ctx context.Context, jobID int64) ([]*FileSet, error) {
	return s.fileSets(ctx, fileSetsOfSheet, jobID)
}

// WorkFileSets returns a work's file sets in row order (without derivatives or states).
func (s *Store) WorkFileSets(ctx context.Context, workAccession string) ([]*FileSet, error) {
	return s.fileSets(ctx, fileSetsOfWork, workAccession)
}

// FileSet returns the row of the file set with the id (without derivatives or states).
func (s *Store) FileSet(ctx context.Context, id string) (*FileSet, error) {
	fs, err := s.fileSets(ctx, fileSetByID, id)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, &store.NotFoundError{Kind: "file set", ID: strconv.Quote(id)}
	}
	return fs[0], nil
}

// GetFileSet returns a file set by its accession number or its id, with its derivatives and
// action states.
func (s *Store) GetFileSet(ctx context.Context, idOrAccession string) (*FileSet, error) {
	fs, err := s.fileSets(ctx, fileSetByEither, idOrAccession, idOrAccession)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, &store.NotFoundError{Kind: "file set", ID: strconv.Quote(idOrAccession)}
	}
	f := fs[0]
	f.Derivatives = map[string]json.RawMessage{}
	err = derivativesOf.Each(ctx, s.x, func(r store.DomainRows) error {
		var k, v string
		err := r.Scan(&k, &v)
		f.Derivatives[k] = json.RawMessage(v)
		return err
	}, f.ID)
	if err != nil {
		return nil, err
	}
	f.ActionStates, err = s.ActionStates(ctx, f.ID)
	return f, err
}

// HasDerivative reports whether the file set has a derivative of the kind.
func (s *Store) HasDerivative(ctx context.Context, fileSetID, kind string) (bool, error) {
	return s.exists(ctx, derivativeHas, fileSetID, kind)
}

// ActionStates returns an object's action states in the order of its chain.
func (s *Store) ActionStates(ctx context.Context, objectID string) ([]ActionState, error) {
	var out []ActionState
	err := statesOf.Each(ctx, s.x, func(r store.DomainRows) error {
		var st ActionState
		var in, up int64
		err := r.Scan(&st.ObjectID, &st.ObjectType, &st.Action, &st.Outcome, &st.Notes, &in, &up)
		st.InsertedAt, st.UpdatedAt = nanos(in), nanos(up)
		out = append(out, st)
		return err
	}, objectID)
	slices.SortStableFunc(out, func(a, b ActionState) int { return chainIndex(a.Action) - chainIndex(b.Action) })
	return out, err
}

func chainIndex(state string) int {
	for i, c := range Chain {
		if c.State == state {
			return i
		}
	}
	return len(Chain)
}

// ActionOutcome returns the outcome of an object's action ("" when it has none).
func (s *Store) ActionOutcome(ctx context.Context, objectID, action string) (string, error) {
	var o string
	err := stateOutcome.Each(ctx, s.x, func(r store.DomainRows) error { return r.Scan(&o) }, objectID, action)
	return o, err
}

// History returns the outcomes an object's actions had, in the order they first had them.
func (s *Store) History(ctx context.Context, objectID string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := historyOf.Each(ctx, s.x, func(r store.DomainRows) error {
		var h HistoryEntry
		var at int64
		err := r.Scan(&h.Seq, &h.ObjectID, &h.Action, &h.Outcome, &h.Notes, &at)
		h.At = nanos(at)
		out = append(out, h)
		return err
	}, objectID)
	return out, err
}

// SheetProgress returns a sheet's progress.
func (s *Store) SheetProgress(ctx context.Context, jobID int64) (*Progress, error) {
	sh, err := s.GetSheet(ctx, jobID)
	if err != nil {
		return nil, err
	}
	p := &Progress{SheetID: jobID, Status: sh.Status}
	outcomes, err := s.countBy(ctx, stateOutcomes, jobID)
	if err != nil {
		return nil, err
	}
	for o, n := range outcomes {
		p.TotalActions += n
		if o == OutcomeOK || o == OutcomeNA || o == OutcomeError {
			p.DoneActions += n
		}
	}
	states, err := s.countBy(ctx, fileSetStates, jobID)
	for st, n := range states {
		p.FileSets += n
		switch st {
		case StateComplete:
			p.FileSetsComplete += n
		case StateError:
			p.FileSetsError += n
		}
	}
	if p.TotalActions > 0 {
		p.Percent = float64(int(1000*float64(p.DoneActions)/float64(p.TotalActions))) / 10
	}
	return p, err
}

// countBy returns the counts of the read q, which groups rows by its first column.
func (s *Store) countBy(ctx context.Context, q store.DomainQuery, args ...any) (map[string]int, error) {
	out := map[string]int{}
	err := q.Each(ctx, s.x, func(r store.DomainRows) error {
		var k string
		var n int
		err := r.Scan(&k, &n)
		out[k] += n
		return err
	}, args...)
	return out, err
}

// Existing returns the work and file set accession numbers among those given that exist in
// the installation: what a sheet validated against the store may not name again.
func (s *Store) Existing(ctx context.Context, works, fileSets []string) (w, f map[string]bool, err error) {
	if w, err = s.existing(ctx, "objects_works", works); err != nil {
		return nil, nil, err
	}
	f, err = s.existing(ctx, "objects_file_sets", fileSets)
	return w, f, err
}

// existing returns which of the accession numbers a table holds, asking 500 at a time.
func (s *Store) existing(ctx context.Context, table string, accessions []string) (map[string]bool, error) {
	out := map[string]bool{}
	const batch = 500
	for start := 0; start < len(accessions); start += batch {
		part := accessions[start:min(start+batch, len(accessions))]
		args := make([]any, len(part))
		for i, a := range part {
			args[i] = a
		}
		q := store.SharedQuery(`SELECT accession FROM ` + table + ` WHERE accession IN (` + store.Placeholders(len(part)) + `)`)
		err := q.Each(ctx, s.x, func(r store.DomainRows) error {
			var a string
			err := r.Scan(&a)
			out[a] = true
			return err
		}, args...)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BlobReferenced reports whether a file set references the blob (as any kind).
func (s *Store) BlobReferenced(ctx context.Context, sha256 string) (bool, error) {
	return s.exists(ctx, blobAny, sha256)
}

// BlobReferencedAs reports whether a file set references the blob as the kind (preservation,
// copy, transcription).
func (s *Store) BlobReferencedAs(ctx context.Context, sha256, kind string) (bool, error) {
	return s.exists(ctx, blobKind, sha256, kind)
}

// PutState upserts an action state and records its outcome in the history (once per object,
// action and outcome). `waiting` never replaces a state that exists: it is where an action
// starts, not where it returns to.
func (s *Store) PutState(ctx context.Context, jobID int64, st ActionState, at int64) error {
	up := statePut
	if st.Outcome == OutcomeWaiting {
		up = stateWaiting
	}
	if _, err := up.Exec(ctx, s.x, st.ObjectID, st.ObjectType, st.Action, jobID, st.Outcome, st.Notes, at, at); err != nil {
		return err
	}
	_, err := historyAdd.Exec(ctx, s.x, st.ObjectID, st.Action, st.Outcome, st.Notes, at)
	return err
}

// putSheet creates the sheet of a job unless it exists, then sets what w carries of it: its
// status (only from one of w.StatusIfs, when set), checks, errors and row count.
func (s *Store) putSheet(ctx context.Context, jobID int64, w *write) error {
	if _, err := sheetCreate.Exec(ctx, s.x, jobID, w.Name, StatusUploaded, w.At); err != nil {
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
		where += " AND status IN (" + store.Placeholders(len(w.StatusIfs)) + ")"
		for _, st := range w.StatusIfs {
			args = append(args, st)
		}
	}
	_, err := store.SharedQuery("UPDATE objects_sheets SET "+strings.Join(set, ", ")+" WHERE "+where).Exec(ctx, s.x, args...)
	return err
}

// apply makes one write of a task of the job.
func (s *Store) apply(ctx context.Context, jobID int64, w *write) error {
	exec := func(q store.DomainQuery, args ...any) error {
		_, err := q.Exec(ctx, s.x, args...)
		return err
	}
	switch w.Op {
	case opSheet:
		return s.putSheet(ctx, jobID, w)
	case opRows:
		for _, r := range w.Rows {
			fields, _ := json.Marshal(r.Fields)
			errs, _ := json.Marshal(orEmpty(r.Errors))
			if err := exec(rowPut, jobID, r.Row, r.State, string(fields), string(errs)); err != nil {
				return err
			}
		}
		return nil
	case opWork:
		if err := exec(workCreate, w.Accession, jobID, w.ItemID, w.WorkType, StatePending, w.At); err != nil {
			return err
		}
		return s.owned(ctx, "work", workOwner, w.Accession, jobID)
	case opWorkState:
		return exec(workSetState, w.State, w.At, w.Accession)
	case opFileSet:
		f := w.FileSet
		if err := exec(fileSetCreate, f.Accession, f.ID, jobID, f.ItemID, f.WorkAccession, f.Row, f.Role, f.Label, f.Location,
			f.MimeType, StatePending, w.At); err != nil {
			return err
		}
		return s.owned(ctx, "file set", fileSetOwner, f.Accession, jobID)
	case opCore:
		// A nil map would encode as null, which a JSON merge patch takes for "replace it all".
		core, _ := json.Marshal(orEmptyMap(w.Core))
		if w.ItemID != 0 {
			if err := exec(fileSetSetItem, w.ItemID, w.FileSetID); err != nil {
				return err
			}
		}
		if w.State != "" {
			return exec(fileSetMergeCoreState, string(core), w.State, w.At, w.FileSetID)
		}
		return exec(fileSetMergeCore, string(core), w.At, w.FileSetID)
	case opDerivative:
		v, _ := json.Marshal(w.Value)
		return exec(derivativeStore, w.FileSetID, w.Kind, string(v))
	case opState:
		return s.PutState(ctx, jobID, w.Action, w.At)
	case opBlob:
		sum, _ := w.Value.(string)
		return exec(blobAdd, sum, w.FileSetID, w.Kind)
	}
	return fmt.Errorf("unknown operation %q", w.Op)
}

// owned fails with [AccessionTakenError] when the row of the accession belongs to another job.
func (s *Store) owned(ctx context.Context, kind string, q store.DomainQuery, accession string, jobID int64) error {
	var owner int64
	if err := q.Each(ctx, s.x, func(r store.DomainRows) error { return r.Scan(&owner) }, accession); err != nil {
		return err
	}
	if owner != jobID {
		return &AccessionTakenError{Kind: kind, Accession: accession}
	}
	return nil
}

// GetObject returns what an id names — a work (its accession number), with its file sets, else
// a file set (its accession number or id) — each file set with its derivatives and action
// states. Neither is a [*store.NotFoundError] naming a "work or file set".
func (s *Store) GetObject(ctx context.Context, id string) (*Work, *FileSet, error) {
	w, err := s.GetWork(ctx, id)
	switch {
	case err == nil:
		for i, f := range w.FileSets {
			if w.FileSets[i], err = s.GetFileSet(ctx, f.ID); err != nil {
				return nil, nil, err
			}
		}
		return w, nil, nil
	case !errors.Is(err, ErrNotFound):
		return nil, nil, err
	}
	f, err := s.GetFileSet(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, &store.NotFoundError{Kind: "work or file set", ID: strconv.Quote(id)}
	}
	return nil, f, err
}

// ObjectHistory is the action history of a work's file sets, or of one file set.
type ObjectHistory struct {
	Work     string           `json:"work_accession_number,omitempty"`
	FileSets []FileSetHistory `json:"file_sets"`
}

// FileSetHistory is one file set's action history: every outcome each of its actions had —
// waiting, started, then ok or error, with its notes — in the order they happened.
type FileSetHistory struct {
	ID        string         `json:"id"`
	Accession string         `json:"accession_number"`
	Row       int            `json:"row"`
	Role      string         `json:"role"`
	State     string         `json:"state"`
	History   []HistoryEntry `json:"history"`
}

// GetHistory returns the action history of the work or file set an id names (as [Store.GetObject]).
func (s *Store) GetHistory(ctx context.Context, id string) (*ObjectHistory, error) {
	w, f, err := s.GetObject(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &ObjectHistory{}
	sets := []*FileSet{f}
	if w != nil {
		out.Work, sets = w.Accession, w.FileSets
	}
	for _, f := range sets {
		h, err := s.History(ctx, f.ID)
		if err != nil {
			return nil, err
		}
		out.FileSets = append(out.FileSets, FileSetHistory{ID: f.ID, Accession: f.Accession, Row: f.Row, Role: f.Role,
			State: f.State, History: orEmpty(h)})
	}
	if out.FileSets == nil {
		out.FileSets = []FileSetHistory{}
	}
	return out, nil
}
