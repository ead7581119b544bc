package fileset

import (
	"context"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// readResult is the fileset domain's read query: the result stored for a request's
// (ingest_type, base_url), shared across jobs by design (a request already archived is
// success-existing, whichever job archived it).
const readResult = "result"

// resultKey names a stored result.
type resultKey struct {
	IngestType string `json:"ingest_type"`
	BaseURL    string `json:"base_url"`
}

// ReadQueries implements [engine.DomainReader].
func (Domain) ReadQueries() map[string]engine.ReadQuery {
	return map[string]engine.ReadQuery{
		readResult: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, k resultKey) (*Row, error) {
			return resultsOn(x).Get(ctx, k.IngestType, k.BaseURL)
		}),
	}
}
