package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// UploadParams describe an ingest sheet to upload.
type UploadParams struct {
	// Name is the sheet's name (its file name).
	Name string
	// CSV is the sheet.
	CSV io.Reader
	// FilesDir is where its file names point: a directory (made absolute) or an
	// s3://bucket/prefix location (read with [Service.S3]).
	FilesDir string
	// CustomActions, when set, replaces every file set's chain by these actions (Meadow's
	// action names, such as GenerateFileSetDigests), in Meadow's order.
	CustomActions []string
	// Workflow is the workflow to run; defaults to objects (the built-in).
	Workflow string
	// Key, when set, makes the upload idempotent: a second upload with the key finds the
	// first's sheet (and completes its upload, if it was interrupted).
	Key string
}

// Upload stores an ingest sheet and starts its job: it is validated at once, and waits for
// [Approve]. It returns the sheet's id (its job's). The workflow must be stored
// (builtin.Apply).
func Upload(ctx context.Context, e *engine.Engine, blobs blob.Store, p UploadParams) (_ int64, err error) {
	if p.Workflow == "" {
		p.Workflow = Name
	}
	dir := p.FilesDir
	if IsS3(dir) {
		dir = strings.TrimSuffix(dir, "/")
		if _, _, err := blob.ParseURL(dir); err != nil {
			return 0, fmt.Errorf("files location: %w", err)
		}
	} else if dir, err = filepath.Abs(p.FilesDir); err != nil {
		return 0, fmt.Errorf("files dir: %w", err)
	}
	sum, size, err := blobs.Put(ctx, p.CSV)
	if err != nil {
		return 0, fmt.Errorf("store the sheet: %w", err)
	}
	md := map[string]any{"kind": "sheet", "files_dir": dir}
	if len(p.CustomActions) > 0 {
		md["custom_actions"] = p.CustomActions
	}
	sub, err := e.Submit(ctx, engine.SubmitParams{Workflow: p.Workflow, Key: p.Key, Metadata: map[string]any{"sheet": p.Name}})
	if err != nil {
		return 0, err
	}
	id := sub.Job().ID
	if err := Open(e).putSheet(ctx, id, &write{Name: p.Name, At: now()}); err != nil {
		return 0, fmt.Errorf("record sheet %d: %w", id, err)
	}
	if err := sub.Add(ctx, engine.Root{Name: p.Name, ContentType: "text/csv", BlobSHA256: sum, Size: size, Metadata: md}); err != nil {
		return 0, err
	}
	return id, sub.Seal(ctx)
}

// ErrNotAwaitingApproval is returned by [Approve] for a sheet in another status.
var ErrNotAwaitingApproval = errors.New("the sheet is not awaiting approval")

// Approve approves a sheet awaiting approval: its works and file sets are created and ingested.
// Approving an approved sheet again does nothing.
func Approve(ctx context.Context, e *engine.Engine, sheetID int64) error {
	s, err := Open(e).GetSheet(ctx, sheetID)
	if err != nil {
		return err
	}
	switch s.Status {
	case StatusAwaitingApproval:
	case StatusApproved, StatusCompleted, StatusCompletedError:
		return nil
	default:
		return fmt.Errorf("sheet %d is %s: %w", sheetID, s.Status, ErrNotAwaitingApproval)
	}
	roots, err := e.JobItems(ctx, sheetID, "", 1)
	if err != nil {
		return err
	}
	if len(roots) == 0 || roots[0].ParentID != 0 {
		return &store.NotFoundError{Kind: "the root item of sheet", ID: strconv.FormatInt(sheetID, 10)}
	}
	_, err = e.FireExternal(ctx, roots[0].ID, "approved")
	return err
}

// ErrApproved is returned by [Delete] for a sheet that was approved: its works exist.
var ErrApproved = errors.New("the sheet was approved; its works and file sets exist")

// Delete deletes a sheet that was not approved (Meadow's deleted status): its job is canceled
// and its rows kept for the record. Deleting a deleted sheet does nothing.
func Delete(ctx context.Context, e *engine.Engine, sheetID int64) error {
	db := Open(e)
	s, err := db.GetSheet(ctx, sheetID)
	if err != nil {
		return err
	}
	switch s.Status {
	case StatusDeleted:
		return nil
	case StatusApproved, StatusCompleted, StatusCompletedError:
		return fmt.Errorf("sheet %d is %s: %w", sheetID, s.Status, ErrApproved)
	}
	if st, err := e.JobState(ctx, sheetID); err == nil && st == record.JobRunning {
		if err := e.Cancel(ctx, sheetID); err != nil {
			return err
		}
	}
	return db.putSheet(ctx, sheetID, &write{Status: StatusDeleted, At: now(),
		StatusIfs: []string{StatusUploaded, StatusFileFail, StatusRowFail, StatusValid, StatusAwaitingApproval}})
}

// Transcoded is what [FireTranscoded] did with an event.
type Transcoded struct {
	// FileSets are the items (file sets) the event correlated with; Fired those it was new to.
	FileSets []int64 `json:"items"`
	Fired    int     `json:"fired"`
	// Source is the transcoder that sent the event (mediaconvert, elastictranscoder), Status
	// the job's, SNS the kind of SNS delivery it came in ("" for a bare event).
	Source string `json:"source,omitempty"`
	Status string `json:"status,omitempty"`
	SNS    string `json:"sns,omitempty"`
	// Note says why nothing was fired: a confirmation, or a status that ends no job.
	Note string `json:"note,omitempty"`
}

// FireTranscoded hands a transcoder's report (its body, in any form [ParseTranscoderEvent]
// reads) to the running sheets of the workflow: the file set whose file_set_id its user metadata
// carries resumes (or fails, for an ERROR). An event no file set waits for, one that came
// before, or one that ends no job (PROGRESSING) is acknowledged and does nothing. An SNS
// subscription confirmation is returned, not fired: [ConfirmSubscription] confirms it.
func FireTranscoded(ctx context.Context, e *engine.Engine, body []byte, workflow string) (*Transcoded, error) {
	if workflow == "" {
		workflow = Name
	}
	ev, err := ParseTranscoderEvent(body)
	if err != nil {
		return nil, err
	}
	out := &Transcoded{FileSets: []int64{}, Source: ev.Source, Status: ev.Status}
	if ev.SNS != nil {
		out.SNS = ev.SNS.Type
	}
	switch {
	case ev.Body == nil:
		out.Note = "an SNS " + ev.SNS.Type + " carries no event"
		return out, nil
	case !ev.Ends():
		out.Note = "status " + ev.Status + " ends no job; nothing fired"
		return out, nil
	}
	jobs, err := e.RunningJobsOf(ctx, workflow)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		f, err := e.Fire(ctx, engine.FireParams{JobID: j.ID, Event: TranscodeEvent, Body: ev.Body})
		if _, none := errors.AsType[*engine.NoMatchError](err); none {
			continue // the event is for another sheet's file set, or for none
		}
		if err != nil {
			return nil, fmt.Errorf("sheet %d: %w", j.ID, err)
		}
		out.FileSets = append(out.FileSets, f.Items...)
		out.Fired += f.Fired
	}
	return out, nil
}
