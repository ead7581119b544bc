package objects

import (
	"encoding/json"
	"time"
)

// The statuses of an ingest sheet (Meadow's): uploaded → file_fail | row_fail | valid →
// awaiting_approval → approved → completed | completed_error.
const (
	StatusUploaded         = "uploaded"
	StatusFileFail         = "file_fail"
	StatusRowFail          = "row_fail"
	StatusValid            = "valid"
	StatusAwaitingApproval = "awaiting_approval"
	StatusApproved         = "approved"
	StatusCompleted        = "completed"
	StatusCompletedError   = "completed_error"
	StatusDeleted          = "deleted"
)

// The states of a sheet's checks (file, rows, overall) and of a row.
const (
	CheckPending = "pending"
	CheckPass    = "pass"
	CheckFail    = "fail"
)

// The outcomes of an action state, Meadow's action_states vocabulary: an action is waiting from
// the moment its file set's chain is known until it starts (TranscodeComplete until the
// transcoder's event arrives), started while it works, then ok or error; `n/a` counts as ok.
const (
	OutcomeWaiting = "waiting"
	OutcomeStarted = "started"
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeNA      = "n/a"
)

// The states of a work and of a file set.
const (
	StatePending  = "pending"
	StateComplete = "complete"
	StateError    = "error"
)

// Checks are a sheet's three checks, each pending, pass or fail.
type Checks struct {
	File    string `json:"file"`
	Rows    string `json:"rows"`
	Overall string `json:"overall"`
}

// FieldError is one validation error of a row (or of the file, with the field "file" or
// "header"): the field it concerns and Meadow's message. A row's message starts with its field,
// as Meadow's do ("work_image: boolean type required"); the file's are Meadow's file errors as
// they are ("Invalid header: filenam").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Row is one row of a sheet: its number (Meadow's: the first row after the header is row 1),
// its state (pass or fail), its fields by header and its errors.
type Row struct {
	Row    int               `json:"row"`
	State  string            `json:"state"`
	Fields map[string]string `json:"fields"`
	Errors []FieldError      `json:"errors"`
}

// Sheet is an ingest sheet: one job of the objects workflow.
type Sheet struct {
	JobID     int64        `json:"id"`
	Name      string       `json:"name"`
	Status    string       `json:"status"`
	Checks    Checks       `json:"state"`
	Errors    []FieldError `json:"errors"`
	RowCount  int          `json:"row_count"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// Work is a work: its accession number (unique in the installation), type and file sets.
type Work struct {
	Accession string     `json:"accession_number"`
	WorkType  string     `json:"work_type"`
	State     string     `json:"state"`
	JobID     int64      `json:"sheet_id"`
	ItemID    int64      `json:"item_id"`
	UpdatedAt time.Time  `json:"updated_at"`
	FileSets  []*FileSet `json:"file_sets,omitempty"`
}

// FileSet is one file of a work, in a role (A access, P preservation, X auxiliary, S
// supplemental), with the core metadata its actions recorded (mime_type, digests, exif,
// mediainfo, preservation location …) and its derivatives.
type FileSet struct {
	ID            string                     `json:"id"`
	Accession     string                     `json:"accession_number"`
	JobID         int64                      `json:"sheet_id"`
	ItemID        int64                      `json:"item_id"`
	WorkAccession string                     `json:"work_accession_number"`
	Row           int                        `json:"row"`
	Role          string                     `json:"role"`
	Label         string                     `json:"label"`
	Location      string                     `json:"location"`
	MimeType      string                     `json:"mime_type"`
	State         string                     `json:"state"`
	Core          map[string]any             `json:"core_metadata,omitempty"`
	Derivatives   map[string]json.RawMessage `json:"derivatives,omitempty"`
	ActionStates  []ActionState              `json:"action_states,omitempty"`
	UpdatedAt     time.Time                  `json:"updated_at"`
}

// ActionState is the state of one action on one object, unique per (object, action).
type ActionState struct {
	ObjectID   string    `json:"object_id"`
	ObjectType string    `json:"object_type"`
	Action     string    `json:"action"`
	Outcome    string    `json:"outcome"`
	Notes      string    `json:"notes,omitempty"`
	InsertedAt time.Time `json:"inserted_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
}

// HistoryEntry is the first time an object's action had an outcome; entries are ordered by Seq.
type HistoryEntry struct {
	Seq      int64     `json:"seq"`
	ObjectID string    `json:"object_id"`
	Action   string    `json:"action"`
	Outcome  string    `json:"outcome"`
	Notes    string    `json:"notes,omitempty"`
	At       time.Time `json:"at"`
}

// Progress is a sheet's progress (Meadow's ingest progress): actions done (ok, n/a or error) of
// all its file sets' action states, file sets complete, and the percentage.
type Progress struct {
	SheetID          int64   `json:"sheet_id"`
	Status           string  `json:"status"`
	TotalActions     int     `json:"total_actions"`
	DoneActions      int     `json:"completed_actions"`
	FileSets         int     `json:"total_file_sets"`
	FileSetsComplete int     `json:"completed_file_sets"`
	FileSetsError    int     `json:"error_file_sets"`
	Percent          float64 `json:"percent_complete"`
}

// Ended reports whether the sheet is in a final status.
func (p *Progress) Ended() bool {
	switch p.Status {
	case StatusCompleted, StatusCompletedError, StatusFileFail, StatusRowFail, StatusDeleted:
		return true
	}
	return false
}

// PUID returns the PRONOM identifier GenerateFileSetDigests recorded for the file set's file
// (its first format's), "" when none was.
func (f *FileSet) PUID() string {
	id, _ := f.Core["pronom"].(map[string]any)
	formats, _ := id["formats"].([]any)
	if len(formats) == 0 {
		return ""
	}
	first, _ := formats[0].(map[string]any)
	puid, _ := first["puid"].(string)
	return puid
}
