package objects

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/pathroot"
)

// Service is the objects workflow's actions with what this process gives them: how it opens
// sheets' files (S3, Roots). What they read of the domain's rows, of the engine's records and of
// the blob store (preservation copies, derivatives) comes with each task, through its read port
// ([engine.Reads]; see [Domain.ReadQueries]), so they run in process or in a remote worker
// alike. Make it and register its [Service.Actions] in the catalog. It is safe for concurrent use.
type Service struct {
	// S3 opens the s3://bucket/prefix locations of sheets' files (set it before the service
	// is used). Nil refuses them: a sheet uploaded with one fails validation.
	S3 S3Opener
	// Roots are the path roots (--path-root) of local files directories: every action opens a
	// sheet's files_dir (or a file set's own directory) through them when it runs, so one
	// outside them fails permanently however the job was created. Nil opens any directory: a
	// process whose jobs name directories its own user chose at the shell (the CLI's commands).
	Roots *pathroot.Roots
	// Egress is the policy of the addresses GenerateAIMetadata's service may be reached at
	// (nil: egress's default, loopback and private addresses refused).
	Egress *egress.Policy

	s3 s3Stores
	// unrecorded holds, by item id, when a file set's chain first found its file set's row
	// missing (see [Service.awaitFileSet]).
	unrecorded sync.Map
}

// act is an action made of a spec and a function.
type act struct {
	spec   action.Spec
	policy action.Policy
	run    func(ctx context.Context, t *action.Task, out action.Output) error
}

func (a *act) Spec() action.Spec     { return a.spec }
func (a *act) Policy() action.Policy { return a.policy }
func (a *act) Run(ctx context.Context, t *action.Task, out action.Output) error {
	return a.run(ctx, t, out)
}

// Actions returns the objects workflow's actions: the sheet's, the work's and the file set
// chain's (see [Chain]).
func (s *Service) Actions() []action.Action {
	sheet := []action.Action{
		&act{action.Spec{Name: "objects.validate-sheet", Doc: "Validate an ingest sheet (the root's CSV) row by row; emits sheet.valid.",
			Outcomes: []string{"sheet.valid"}, Concurrency: 2}, action.Policy{NoTempDir: true}, s.validateSheet},
		&act{action.Spec{Name: "objects.await-approval", Doc: "Mark a valid sheet awaiting approval."}, action.Policy{Inline: action.InlineAlways, NoTempDir: true}, s.awaitApproval},
		&act{action.Spec{Name: "objects.create-works", Doc: "Create an approved sheet's works as children of the sheet."}, action.Policy{NoTempDir: true}, s.createWorks},
		&act{action.Spec{Name: "objects.create-file-sets", Doc: "Record a work and create its file sets as its children.",
			Concurrency: 8}, action.Policy{NoTempDir: true}, s.createFileSets},
		&act{action.Spec{Name: "objects.complete-work", Doc: "Complete a work once its file sets are done.",
			Concurrency: 8}, action.Policy{NoTempDir: true}, s.completeWork},
		&act{action.Spec{Name: "objects.complete-sheet", Doc: "Complete a sheet once its works are done: completed or completed_error."}, action.Policy{NoTempDir: true}, s.completeSheet},
	}
	return append(sheet, s.chainActions()...)
}

// now is the clock of the domain's writes, in unix nanoseconds.
func now() int64 { return time.Now().UTC().UnixNano() }

func writeOp(out action.Output, key string, w write) error {
	if w.At == 0 {
		w.At = now()
	}
	return out.Write(action.DomainWrite{Domain: Name, Key: key, Payload: w})
}

// FileSetID returns the id of the file set with the accession number: a UUID (version 5 in
// form) derived from it, so that the same accession always names the same file set, and a
// transcoder's events can carry it before any row exists.
func FileSetID(accession string) string {
	h := sha1.Sum([]byte("sluice-objects/file-set/" + accession))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func (s *Service) validateSheet(ctx context.Context, t *action.Task, out action.Output) error {
	db, err := portOf(ctx)
	if err != nil {
		return err
	}
	rc, err := t.OpenBlob(ctx)
	if err != nil {
		return fmt.Errorf("open the sheet: %w", err)
	}
	defer rc.Close()
	// The rows are written a chunk at a time as they are checked, none held after its chunk.
	const chunk = 1000
	var rows []Row
	chunks := 0
	writeRows := func() error {
		if len(rows) == 0 {
			return nil
		}
		err := writeOp(out, fmt.Sprintf("rows.%d", chunks), write{Op: opRows, Rows: rows})
		rows, chunks = nil, chunks+1
		return err
	}
	v, err := ValidateEach(ctx, rc, Env{FilesDir: str(t.Item.Metadata, "files_dir"), OpenS3: s.openS3, Roots: s.Roots,
		Existing: db.Existing}, func(r Row) error {
		if rows = append(rows, r); len(rows) == chunk {
			return writeRows()
		}
		return nil
	})
	if errors.Is(err, ErrNoS3) { // this process will never read the location: retrying is no use
		return action.Permanent(err)
	}
	if err != nil && !IsS3(str(t.Item.Metadata, "files_dir")) {
		return refusedDir("files_dir", err)
	}
	if err != nil {
		return err
	}
	if err := writeRows(); err != nil {
		return err
	}
	if err := writeOp(out, "sheet", write{Op: opSheet, Name: t.Item.Name, Status: v.Status, Checks: &v.Checks,
		Errors: orEmpty(v.FileErrors), RowCount: v.RowCount}); err != nil {
		return err
	}
	if v.Status == StatusValid {
		out.Emit("sheet.valid")
	}
	return nil
}

func (s *Service) awaitApproval(_ context.Context, _ *action.Task, out action.Output) error {
	return writeOp(out, "sheet", write{Op: opSheet, Status: StatusAwaitingApproval, StatusIfs: []string{StatusValid}})
}

// workRow is the part of a sheet's row a work's item carries for its file sets.
type workRow struct {
	Row    int               `json:"row"`
	Fields map[string]string `json:"fields"`
}

func (s *Service) createWorks(ctx context.Context, t *action.Task, out action.Output) error {
	db, err := portOf(ctx)
	if err != nil {
		return err
	}
	rows, err := db.ListRows(ctx, false)
	if err != nil {
		return err
	}
	v := &Validation{Rows: rows}
	for _, w := range v.Works() {
		wr := make([]workRow, len(w.Rows))
		for i, r := range w.Rows {
			wr[i] = workRow{Row: r.Row, Fields: r.Fields}
		}
		if err := out.CreateChild(ctx, action.Child{Name: w.Accession, Metadata: map[string]any{
			"kind": "work", "work_accession_number": w.Accession, "work_type": w.WorkType, "rows": wr}}); err != nil {
			return err
		}
	}
	return writeOp(out, "sheet", write{Op: opSheet, Status: StatusApproved})
}

func (s *Service) createFileSets(ctx context.Context, t *action.Task, out action.Output) error {
	var rows []workRow
	raw, _ := json.Marshal(t.Item.Metadata["rows"])
	if err := json.Unmarshal(raw, &rows); err != nil || len(rows) == 0 {
		return action.Permanentf("work %s: its item carries no rows", t.Item.Name)
	}
	work, dir := str(t.Item.Metadata, "work_accession_number"), str(t.Item.Metadata, "files_dir")
	if err := writeOp(out, "work", write{Op: opWork, Accession: work, WorkType: str(t.Item.Metadata, "work_type"), ItemID: t.Item.ID}); err != nil {
		return err
	}
	at := now()
	for _, r := range rows {
		f := r.Fields
		acc := f["file_accession_number"]
		id := FileSetID(acc)
		location := joinLocation(dir, f["filename"])
		md := map[string]any{"kind": "file_set", "file_set_id": id, "file_accession_number": acc, "row": r.Row,
			"role": f["role"], "label": f["label"], "description": f["description"], "location": location, "rows": nil,
			"work_image": slices.Contains(truthy, strings.ToLower(f["work_image"]))}
		for _, k := range []string{"structure", "transcription"} {
			if f[k] != "" {
				md[k] = joinLocation(dir, f[k])
			}
		}
		// An IMAGE work's structure is its transcription (Meadow's .txt structure).
		if s := f["structure"]; s != "" && str(t.Item.Metadata, "work_type") == "IMAGE" && f["transcription"] == "" {
			delete(md, "structure")
			md["transcription"] = joinLocation(dir, s)
		}
		if err := out.CreateChild(ctx, action.Child{Name: acc, ContentType: f["mime_type"], Metadata: md}); err != nil {
			return err
		}
		fs := &FileSet{ID: id, Accession: acc, WorkAccession: work, Row: r.Row, Role: f["role"], Label: f["label"],
			Location: location, MimeType: f["mime_type"]}
		if err := writeOp(out, "file_set."+acc, write{Op: opFileSet, At: at, FileSet: fs}); err != nil {
			return err
		}
		for _, a := range initialActions {
			st := ActionState{ObjectID: id, ObjectType: "FileSet", Action: a, Outcome: OutcomeWaiting}
			if err := writeOp(out, "state."+acc+"."+a, write{Op: opState, At: at, Action: st}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Service) completeWork(ctx context.Context, t *action.Task, out action.Output) error {
	db, err := portOf(ctx)
	if err != nil {
		return err
	}
	acc := str(t.Item.Metadata, "work_accession_number")
	fs, err := db.WorkFileSets(ctx, acc)
	if err != nil {
		return err
	}
	state := StateComplete
	if len(fs) == 0 {
		state = StateError
	}
	for _, f := range fs {
		if f.State != StateComplete {
			state = StateError
		}
	}
	return writeOp(out, "work", write{Op: opWorkState, Accession: acc, State: state})
}

func (s *Service) completeSheet(ctx context.Context, t *action.Task, out action.Output) error {
	db, err := portOf(ctx)
	if err != nil {
		return err
	}
	works, err := db.ListWorks(ctx)
	if err != nil {
		return err
	}
	status := StatusCompleted
	if len(works) < t.Item.NChildren {
		status = StatusCompletedError // a work that could not be created
	}
	for _, w := range works {
		if w.State != StateComplete {
			status = StatusCompletedError
		}
	}
	return writeOp(out, "sheet", write{Op: opSheet, Status: status})
}
