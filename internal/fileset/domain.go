package fileset

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// DomainName is the name the ingest_fileset_platform table's domain registers under.
const DomainName = "fileset"

//go:embed migrations
var migrations embed.FS

// Domain is the ingest_fileset_platform table (and its companion, the whole results): the
// result of each request whose platform was identified, keyed by (ingest_type, base_url). The zero value is ready to register.
type Domain struct{}

// Register registers the domain with the engine and applies its migrations.
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, DomainName, Domain{})
}

// Migrations implements [engine.Domain].
func (Domain) Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

// resultWrite is the payload of a write to ingest_fileset_platform.
type resultWrite struct {
	Updated int64  `json:"updated"` // Unix nanoseconds
	Result  Result `json:"result"`
	// CDX, instead, is a capture's line for the CDX index (a download's).
	CDX *CDX `json:"cdx,omitempty"`
	// Folder is the archive.org item an archiveorg-* strategy's result wrote.
	Folder *ItemFolder `json:"folder,omitempty"`
}

// Apply implements [engine.Domain]: the results, put in the task's transaction
// ([ResultStore.Put]: the later result wins; a replay of the same write changes nothing).
func (Domain) Apply(ctx context.Context, x store.DomainSQL, ws []engine.DomainWrite) error {
	results := resultsOn(x)
	for _, w := range ws {
		var p resultWrite
		if err := json.Unmarshal(w.Payload, &p); err != nil {
			return fmt.Errorf("fileset result %q: %w", w.Key, err)
		}
		if p.CDX != nil {
			if err := results.PutCDX(ctx, *p.CDX); err != nil {
				return fmt.Errorf("put the CDX line of %q: %w", w.Key, err)
			}
			continue
		}
		if err := results.Put(ctx, PutParams{Result: p.Result, Updated: time.Unix(0, p.Updated), JobID: w.JobID, ItemID: w.ItemID,
			Folder: p.Folder}); err != nil {
			return fmt.Errorf("put fileset result %q: %w", w.Key, err)
		}
	}
	return nil
}

// BlobReferenced implements [engine.BlobReferencer]: the blobs of the archive.org item folders
// (their _meta.xml and _files.xml) and the captures' WARCs (a landing page's), which no item
// references, are kept by the blob collector.
func (Domain) BlobReferenced(ctx context.Context, x store.DomainSQL, sha256 string) (bool, error) {
	return resultsOn(x).BlobReferenced(ctx, sha256)
}
