package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"strings"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/pathroot"

	"github.com/sluice-project/sluice/internal/store"
)

// sheetRoutes are the objects workflow's: ingest sheets, works and file sets (docs/objects.md).
func (a *API) sheetRoutes() []route {
	return []route{
		{"POST", "/v1/sheets", RoleAdmin, "Upload an ingest sheet (text/csv body; query files_dir under a path root or s3://bucket/prefix, name, custom_actions)", a.uploadSheet, 201},
		{"POST", "/v1/sheets/validate", RoleReader, "Validate an ingest sheet without storing it (text/csv body; query files_dir)", a.validateSheet, 200},
		{"GET", "/v1/sheets/{id}", RoleReader, "An ingest sheet: status, checks, file errors, progress", a.getSheet, 200},
		{"GET", "/v1/sheets/{id}/rows", RoleReader, "A sheet's rows with their errors (failed=true: only the failed ones)", a.sheetRows, 200},
		{"POST", "/v1/sheets/{id}/approve", RoleAdmin, "Approve a sheet awaiting approval (409 otherwise)", a.approveSheet, 202},
		{"DELETE", "/v1/sheets/{id}", RoleAdmin, "Delete a sheet that was not approved (409 once approved)", a.deleteSheet, 200},
		{"GET", "/v1/sheets/{id}/progress", RoleReader, "A sheet's progress (actions, file sets, percent) as server-sent events until it ends", a.sheetProgress, 200},
		{"POST", "/v1/sheets/transcoded", RoleAdmin, "A transcoder's report — a MediaConvert Job State Change or an Elastic Transcoder notification, bare or in an SNS Notification — correlated by its user metadata's file_set_id (202); an SNS SubscriptionConfirmation is confirmed through the egress policy (200)", a.transcoded, 202},
		{"GET", "/v1/objects/{id}", RoleReader, "A work (accession number) or a file set (accession number or id) with its action states", a.getObject, 200},
		{"GET", "/v1/objects/{id}/history", RoleReader, "The action history of a work's file sets or of one file set: each action's outcomes (waiting, started, ok or error) with notes and times, in order", a.objectHistory, 200},
	}
}

// filesDir checks a sheet's files location ([API.location]): a directory under a configured
// path root, or an s3://bucket/prefix location under an s3:// path root that opens (its bucket
// reached with the server's AWS_* credentials). The server reads the bucket with its own
// credentials, so a location must lie under an s3:// root as a directory must lie under a
// directory root: otherwise anyone who may validate a sheet could probe every bucket those
// credentials reach, or every file the server may read.
func (a *API) filesDir(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		return "", errf(CodeBadRequest, "files_dir is required")
	}
	t, err := a.location("files_dir", dir, pathroot.Local, pathroot.S3)
	if err != nil {
		return "", err
	}
	if t.Kind == pathroot.S3 {
		if a.cfg.OpenS3 == nil {
			return "", errf(CodeBadRequest, "files_dir %q: this server reads no s3:// locations", dir)
		}
		if _, err := a.cfg.OpenS3(ctx, dir); err != nil {
			var le *blob.LocationError
			if errors.As(err, &le) { // plain words, never the SDK's text
				return "", errf(CodeBadRequest, "files_dir %q: %s", dir, le.Reason)
			}
			return "", errf(CodeBadRequest, "files_dir %q: %v", dir, err)
		}
		return strings.TrimSuffix(dir, "/"), nil
	}
	if !t.Info.IsDir() {
		return "", notKind("files_dir", dir, t.Info.Mode(), "a directory")
	}
	return t.Abs, nil
}

func (a *API) readSheet(w http.ResponseWriter, r *http.Request) ([]byte, string, error) {
	dir, err := a.filesDir(r.Context(), r.URL.Query().Get("files_dir"))
	if err != nil {
		return nil, "", err
	}
	// A sheet over objects.MaxSheetBytes is a file error however it is read: it is not read past
	// that, whatever --max-upload-bytes allows.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, min(a.cfg.Limits.MaxUploadBytes, objects.MaxSheetBytes)))
	if err != nil {
		var mb *http.MaxBytesError
		switch {
		case errors.As(err, &mb) && mb.Limit < objects.MaxSheetBytes:
			return nil, "", errf(CodeTooLarge, "the sheet is larger than %d bytes (--max-upload-bytes)", mb.Limit)
		case errors.As(err, &mb):
			return nil, "", errf(CodeTooLarge, "the sheet is larger than %s, the most a sheet may be", formatBytes(mb.Limit))
		}
		return nil, "", err
	}
	return body, dir, nil
}

func (a *API) uploadSheet(w http.ResponseWriter, r *http.Request) error {
	body, dir, err := a.readSheet(w, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	name := q.Get("name")
	if name == "" {
		name = "sheet.csv"
	}
	var custom []string
	if c := q.Get("custom_actions"); c != "" {
		custom = strings.Split(c, "|")
	}
	e := a.b.Engine()
	if err := builtin.Apply(r.Context(), e, objects.Name); err != nil {
		return err
	}
	id, err := objects.Upload(r.Context(), e, a.b.Blobs(), objects.UploadParams{Name: name, CSV: bytes.NewReader(body),
		FilesDir: dir, CustomActions: custom, Key: r.Header.Get("Idempotency-Key")})
	if err != nil {
		return err
	}
	s, err := objects.Open(e).GetSheet(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s)
	return nil
}

func (a *API) validateSheet(w http.ResponseWriter, r *http.Request) error {
	body, dir, err := a.readSheet(w, r)
	if err != nil {
		return err
	}
	db := objects.Open(a.b.Engine())
	v, err := objects.Validate(r.Context(), bytes.NewReader(body), objects.Env{FilesDir: dir, OpenS3: a.cfg.OpenS3, Roots: &a.roots, Existing: db.Existing})
	if err != nil {
		return a.locationError("files_dir", err) // swapped for a link out since the check above
	}
	failed := []objects.Row{}
	for _, row := range v.Rows {
		if row.State == objects.CheckFail {
			failed = append(failed, row)
		}
	}
	writeJSON(w, http.StatusOK, sheetValidation{Status: v.Status, Checks: v.Checks, Errors: orNone(v.FileErrors), RowCount: len(v.Rows), FailedRows: failed})
	return nil
}

// sheetValidation is the answer to POST /v1/sheets/validate: the sheet's status and checks as
// an upload would store them, its file errors, and the rows that failed.
type sheetValidation struct {
	Status     string               `json:"status"`
	Checks     objects.Checks       `json:"state"`
	Errors     []objects.FieldError `json:"errors"`
	RowCount   int                  `json:"row_count"`
	FailedRows []objects.Row        `json:"failed_rows"`
}

// sheetNotFound names the sheet a request asked for when it does not exist ("sheet 7 does not
// exist"); other errors pass.
func sheetNotFound(err error, id int64) error { return store.NotFound(err, "sheet", id) }

func (a *API) getSheet(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	db := objects.Open(a.b.Engine())
	s, err := db.GetSheet(r.Context(), id)
	if err != nil {
		return sheetNotFound(err, id)
	}
	p, err := db.SheetProgress(r.Context(), id)
	if err != nil {
		return err
	}
	works, err := db.ListWorks(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sheetJSON{s, p, orNone(works)})
	return nil
}

// sheetJSON is GET /v1/sheets/{id}: the stored sheet with its progress and works.
type sheetJSON struct {
	*objects.Sheet
	Progress *objects.Progress `json:"progress"`
	Works    []*objects.Work   `json:"works"`
}

func orNone[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *API) sheetRows(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	db := objects.Open(a.b.Engine())
	if _, err := db.GetSheet(r.Context(), id); err != nil {
		return sheetNotFound(err, id)
	}
	rows, err := db.ListRows(r.Context(), id, r.URL.Query().Get("failed") == "true")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sheetRowList{Rows: orNone(rows)})
	return nil
}

// sheetRowList is GET /v1/sheets/{id}/rows.
type sheetRowList struct {
	Rows []objects.Row `json:"rows"`
}

func (a *API) approveSheet(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	e := a.b.Engine()
	if err := objects.Approve(a.audited(r, "approve", 0, fmt.Sprintf("sheet %d", id)), e, id); err != nil {
		if errors.Is(err, objects.ErrNotAwaitingApproval) {
			return errf(CodeConflict, "%v", err)
		}
		return sheetNotFound(err, id)
	}
	s, err := objects.Open(e).GetSheet(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, s)
	return nil
}

func (a *API) deleteSheet(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	e := a.b.Engine()
	if err := objects.Delete(r.Context(), e, id); err != nil {
		if errors.Is(err, objects.ErrApproved) {
			return errf(CodeConflict, "%v", err)
		}
		return sheetNotFound(err, id)
	}
	s, err := objects.Open(e).GetSheet(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

// sheetProgress streams a sheet's progress as server-sent events ("progress", then "end" with
// its final status), every ProgressInterval while it changes.
func (a *API) sheetProgress(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	db := objects.Open(a.b.Engine())
	p, err := db.SheetProgress(r.Context(), id)
	if err != nil {
		return sheetNotFound(err, id)
	}
	read := false // p is the first value
	return a.streamProgress(w, r, func() (any, bool, string, error) {
		if read {
			if p, err = db.SheetProgress(r.Context(), id); err != nil {
				return nil, false, "", err
			}
		}
		read = true
		return p, p.Ended(), fmt.Sprintf("{\"status\":%q}", p.Status), nil
	})
}

func (a *API) transcoded(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return errf(CodeTooLarge, "an event is at most 1 MiB")
	}
	ev, err := objects.ParseTranscoderEvent(body)
	if err != nil {
		return errf(CodeBadRequest, "%v", err)
	}
	if ev.SNS != nil && ev.SNS.Type == objects.SNSSubscribe {
		// Fetched through the egress policy: a delivery cannot make the server call an address
		// the policy refuses (the message says so, and nothing is fetched).
		if err := objects.ConfirmSubscription(r.Context(), a.cfg.Egress.Client(), ev.SNS); err != nil {
			return errf(CodeBadRequest, "%v", err)
		}
		writeJSON(w, http.StatusOK, &objects.Transcoded{FileSets: []int64{}, SNS: ev.SNS.Type, Note: "subscribed to " + ev.SNS.TopicArn})
		return nil
	}
	f, err := objects.FireTranscoded(r.Context(), a.b.Engine(), body, "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, f)
	return nil
}

func (a *API) getObject(w http.ResponseWriter, r *http.Request) error {
	wk, f, err := objects.Open(a.b.Engine()).GetObject(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, objectJSON{Work: wk, FileSet: f})
	return nil
}

func (a *API) objectHistory(w http.ResponseWriter, r *http.Request) error {
	h, err := objects.Open(a.b.Engine()).GetHistory(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

// objectJSON is GET /v1/objects/{id}: a work (with its file sets) or a file set, whichever the
// id names.
type objectJSON struct {
	Work    *objects.Work    `json:"work,omitempty"`
	FileSet *objects.FileSet `json:"file_set,omitempty"`
}
