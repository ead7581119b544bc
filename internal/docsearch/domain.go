package docsearch

import (
	"context"
	"embed"
	"fmt"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// DomainName is the name the index is registered under.
const DomainName = "docsearch"

//go:embed migrations
var migrations embed.FS

// Migrations returns the index's migrations in the dialect, for a copy of an installation to
// create its tables.
func Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

// Domain is the index as an [engine.Domain]: its tables, and an [engine.OutputFollower] that
// indexes each document in the transaction that records it, so that a document is searchable
// exactly when it exists. Documents recorded while no engine with the domain ran are indexed by
// [Reindex]. The zero value is ready to use.
type Domain struct{}

var _ engine.OutputFollower = Domain{}

// Register registers the domain with e, creating its tables.
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, DomainName, Domain{})
}

// Migrations implements [engine.Domain].
func (Domain) Migrations(d store.Dialect) []store.DomainMigration { return Migrations(d) }

// Apply implements [engine.Domain]: actions write no rows of the index, which follows the
// documents they record.
func (Domain) Apply(ctx context.Context, x store.DomainSQL, ws []engine.DomainWrite) error {
	if len(ws) > 0 {
		return fmt.Errorf("docsearch: no action writes the index (write %q)", ws[0].Key)
	}
	return nil
}

// OutputsRecorded implements [engine.OutputFollower]: the items of the outputs of kind
// [store.OutputDocument] are added to the index, unless the index has them.
func (Domain) OutputsRecorded(ctx context.Context, x store.DomainSQL, os []store.OutputPutParams) error {
	var ids []int64
	for _, o := range os {
		if o.Kind == store.OutputDocument {
			ids = append(ids, o.ItemID)
		}
	}
	return NewIndex(x).Add(ctx, ids...)
}
