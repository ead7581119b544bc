package fileset

import (
	"context"
	"errors"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// readResult is the fileset domain's read query: the result stored for a request's
// (ingest_type, base_url), shared across jobs by design (a request already archived is
// success-existing, whichever job archived it).
const readResult = "result"

// readCDX is the capture the CDX index holds of a URL with a payload digest (nil: none), which
// decides success-existing for the web-* strategies.
const readCDX = "cdx"

// cdxKey names a capture.
type cdxKey struct {
	URL     string `json:"url"`
	SHA1Hex string `json:"sha1hex"`
}

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
		readCDX: engine.NewReadQuery(func(ctx context.Context, x store.DomainSQL, _ int64, k cdxKey) (*CDX, error) {
			c, err := resultsOn(x).CDX(ctx, k.URL, k.SHA1Hex)
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil
			}
			return c, err
		}),
	}
}
