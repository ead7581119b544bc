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
	"fmt"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
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
	db := NewStore(x)
	for _, dw := range ws {
		var w write
		if err := metadata.Unmarshal(dw.Payload, &w); err != nil {
			return fmt.Errorf("write %q: %w", dw.Key, err)
		}
		if err := db.apply(ctx, dw.JobID, &w); err != nil {
			return fmt.Errorf("write %q (%s): %w", dw.Key, w.Op, err)
		}
	}
	return nil
}

// BlobReferenced implements [engine.BlobReferencer]: the preservation copies and derivatives
// of file sets are kept by the blob collector.
func (Domain) BlobReferenced(ctx context.Context, x store.DomainSQL, sha256 string) (bool, error) {
	return NewStore(x).BlobReferenced(ctx, sha256)
}

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
