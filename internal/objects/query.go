package objects

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// ErrNotFound is [store.ErrNotFound]: a sheet, work or file set that does not exist is a
// [*store.NotFoundError] naming it ("sheet 7 does not exist"), which errors.Is matches with
// either.
var ErrNotFound = store.ErrNotFound

// query runs a read and calls scan per row.
func query(ctx context.Context, x store.DomainSQL, q string, args []any, scan func(r store.DomainRows) error) error {
	rows, err := x.Query(ctx, rebind(x.Dialect(), q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func nanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// GetSheet returns the sheet of a job.
func GetSheet(ctx context.Context, x store.DomainSQL, jobID int64) (*Sheet, error) {
	var s *Sheet
	err := query(ctx, x, `SELECT job_id, name, status, file_state, rows_state, overall_state, errors, row_count, updated_at
		FROM objects_sheets WHERE job_id = ?`, []any{jobID}, func(r store.DomainRows) error {
		s = &Sheet{}
		var errs string
		var at int64
		if err := r.Scan(&s.JobID, &s.Name, &s.Status, &s.Checks.File, &s.Checks.Rows, &s.Checks.Overall, &errs, &s.RowCount, &at); err != nil {
			return err
		}
		s.UpdatedAt = nanos(at)
		return json.Unmarshal([]byte(errs), &s.Errors)
	})
	if err == nil && s == nil {
		err = &store.NotFoundError{Kind: "sheet", ID: strconv.FormatInt(jobID, 10)}
	}
	return s, err
}

// ListRows returns a sheet's rows in order; with failed, only those that failed validation.
func ListRows(ctx context.Context, x store.DomainSQL, jobID int64, failed bool) ([]Row, error) {
	q := `SELECT row_num, state, fields, errors FROM objects_sheet_rows WHERE job_id = ?`
	args := []any{jobID}
	if failed {
		q += ` AND state = ?`
		args = append(args, CheckFail)
	}
	var out []Row
	err := query(ctx, x, q+` ORDER BY row_num`, args, func(r store.DomainRows) error {
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
	})
	return out, err
}

const workColumns = `accession, work_type, state, job_id, item_id, updated_at`

func scanWork(r store.DomainRows) (*Work, error) {
	w := &Work{}
	var at int64
	err := r.Scan(&w.Accession, &w.WorkType, &w.State, &w.JobID, &w.ItemID, &at)
	w.UpdatedAt = nanos(at)
	return w, err
}

// ListWorks returns a sheet's works, in accession order, without their file sets.
func ListWorks(ctx context.Context, x store.DomainSQL, jobID int64) ([]*Work, error) {
	var out []*Work
	err := query(ctx, x, `SELECT `+workColumns+` FROM objects_works WHERE job_id = ? ORDER BY accession`, []any{jobID},
		func(r store.DomainRows) error {
			w, err := scanWork(r)
			out = append(out, w)
			return err
		})
	return out, err
}

// GetWork returns a work with its file sets (without their action states).
func GetWork(ctx context.Context, x store.DomainSQL, accession string) (*Work, error) {
	var w *Work
	err := query(ctx, x, `SELECT `+workColumns+` FROM objects_works WHERE accession = ?`, []any{accession},
		func(r store.DomainRows) (err error) { w, err = scanWork(r); return err })
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, &store.NotFoundError{Kind: "work", ID: strconv.Quote(accession)}
	}
	w.FileSets, err = listFileSets(ctx, x, `work_accession = ?`, accession)
	return w, err
}

const fileSetColumns = `file_set_id, accession, job_id, item_id, work_accession, row_num, role, label, location, mime_type, state, core, updated_at`

func listFileSets(ctx context.Context, x store.DomainSQL, where string, args ...any) ([]*FileSet, error) {
	var out []*FileSet
	err := query(ctx, x, `SELECT `+fileSetColumns+` FROM objects_file_sets WHERE `+where+` ORDER BY row_num`, args,
		func(r store.DomainRows) error {
			f := &FileSet{}
			var core string
			var at int64
			if err := r.Scan(&f.ID, &f.Accession, &f.JobID, &f.ItemID, &f.WorkAccession, &f.Row, &f.Role, &f.Label, &f.Location,
				&f.MimeType, &f.State, &core, &at); err != nil {
				return err
			}
			f.UpdatedAt = nanos(at)
			out = append(out, f)
			return json.Unmarshal([]byte(core), &f.Core)
		})
	return out, err
}

// ListFileSets returns a sheet's file sets in row order (without derivatives or states).
func ListFileSets(ctx context.Context, x store.DomainSQL, jobID int64) ([]*FileSet, error) {
	return listFileSets(ctx, x, `job_id = ?`, jobID)
}

// GetFileSet returns a file set by its accession number or its id, with its derivatives and
// action states.
func GetFileSet(ctx context.Context, x store.DomainSQL, idOrAccession string) (*FileSet, error) {
	fs, err := listFileSets(ctx, x, `accession = ? OR file_set_id = ?`, idOrAccession, idOrAccession)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, &store.NotFoundError{Kind: "file set", ID: strconv.Quote(idOrAccession)}
	}
	f := fs[0]
	f.Derivatives = map[string]json.RawMessage{}
	err = query(ctx, x, `SELECT kind, value FROM objects_derivatives WHERE file_set_id = ?`, []any{f.ID}, func(r store.DomainRows) error {
		var k, v string
		err := r.Scan(&k, &v)
		f.Derivatives[k] = json.RawMessage(v)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.ActionStates, err = ActionStates(ctx, x, f.ID)
	return f, err
}

// ActionStates returns an object's action states in the order of its chain.
func ActionStates(ctx context.Context, x store.DomainSQL, objectID string) ([]ActionState, error) {
	st, err := actionStates(ctx, x, objectID)
	slices.SortStableFunc(st, func(a, b ActionState) int { return chainIndex(a.Action) - chainIndex(b.Action) })
	return st, err
}

func chainIndex(state string) int {
	for i, c := range Chain {
		if c.State == state {
			return i
		}
	}
	return len(Chain)
}

func actionStates(ctx context.Context, x store.DomainSQL, objectID string) ([]ActionState, error) {
	var out []ActionState
	err := query(ctx, x, `SELECT object_id, object_type, action, outcome, notes, inserted_at, updated_at FROM objects_action_states
		WHERE object_id = ? ORDER BY inserted_at, action`, []any{objectID}, func(r store.DomainRows) error {
		var s ActionState
		var in, up int64
		err := r.Scan(&s.ObjectID, &s.ObjectType, &s.Action, &s.Outcome, &s.Notes, &in, &up)
		s.InsertedAt, s.UpdatedAt = nanos(in), nanos(up)
		out = append(out, s)
		return err
	})
	return out, err
}

// History returns the outcomes an object's actions had, in the order they first had them.
func History(ctx context.Context, x store.DomainSQL, objectID string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := query(ctx, x, `SELECT id, object_id, action, outcome, notes, at FROM objects_action_history WHERE object_id = ? ORDER BY id`,
		[]any{objectID}, func(r store.DomainRows) error {
			var h HistoryEntry
			var at int64
			err := r.Scan(&h.Seq, &h.ObjectID, &h.Action, &h.Outcome, &h.Notes, &at)
			h.At = nanos(at)
			out = append(out, h)
			return err
		})
	return out, err
}

// SheetProgress returns a sheet's progress.
func SheetProgress(ctx context.Context, x store.DomainSQL, jobID int64) (*Progress, error) {
	s, err := GetSheet(ctx, x, jobID)
	if err != nil {
		return nil, err
	}
	p := &Progress{SheetID: jobID, Status: s.Status}
	err = query(ctx, x, `SELECT outcome, COUNT(*) FROM objects_action_states WHERE job_id = ? GROUP BY outcome`, []any{jobID},
		func(r store.DomainRows) error {
			var o string
			var n int
			if err := r.Scan(&o, &n); err != nil {
				return err
			}
			p.TotalActions += n
			if o == OutcomeOK || o == OutcomeNA || o == OutcomeError {
				p.DoneActions += n
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = query(ctx, x, `SELECT state, COUNT(*) FROM objects_file_sets WHERE job_id = ? GROUP BY state`, []any{jobID},
		func(r store.DomainRows) error {
			var st string
			var n int
			if err := r.Scan(&st, &n); err != nil {
				return err
			}
			p.FileSets += n
			switch st {
			case StateComplete:
				p.FileSetsComplete += n
			case StateError:
				p.FileSetsError += n
			}
			return nil
		})
	if p.TotalActions > 0 {
		p.Percent = float64(int(1000*float64(p.DoneActions)/float64(p.TotalActions))) / 10
	}
	return p, err
}

// existing returns which of the accession numbers a table holds.
func existing(ctx context.Context, x store.DomainSQL, table string, accessions []string) (map[string]bool, error) {
	out := map[string]bool{}
	const batch = 500
	for start := 0; start < len(accessions); start += batch {
		part := accessions[start:min(start+batch, len(accessions))]
		args := make([]any, len(part))
		for i, a := range part {
			args[i] = a
		}
		q := `SELECT accession FROM ` + table + ` WHERE accession IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(part)), ", ") + `)`
		err := query(ctx, x, q, args, func(r store.DomainRows) error {
			var a string
			err := r.Scan(&a)
			out[a] = true
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Existing returns the work and file set accession numbers among those given that exist in
// the installation: what a sheet validated against x may not name again.
func Existing(ctx context.Context, x store.DomainSQL, works, fileSets []string) (w, f map[string]bool, err error) {
	if w, err = existing(ctx, x, "objects_works", works); err != nil {
		return nil, nil, err
	}
	f, err = existing(ctx, x, "objects_file_sets", fileSets)
	return w, f, err
}
