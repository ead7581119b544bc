package fileset

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/store"
)

// TestConformance runs the domain conformance kit on ingest_fileset_platform, on every driver.
func TestConformance(t *testing.T) {
	t.Parallel()
	domaintest.Run(t, domaintest.Domain{
		Name:   DomainName,
		Domain: Domain{},
		Writes: func(name string) []action.DomainWrite {
			var out []action.DomainWrite
			for i, st := range []string{StatusSuccess, StatusPlatform404} {
				base := fmt.Sprintf("https://zenodo.org/record/%s-%d", name, i)
				req, _ := json.Marshal(Request{IngestType: "dataset", BaseURL: base})
				n, size := 1, int64(7)
				res := Result{Hit: st == StatusSuccess, Status: st, Request: req, PlatformName: "zenodo",
					PlatformDomain: "zenodo.org", PlatformID: name, FileCount: &n, TotalSize: &size,
					Manifest: []ManifestFile{{Path: "a.csv", Size: &size, MD5: "0123", Status: st}}}
				out = append(out, action.DomainWrite{Domain: DomainName, Key: "dataset " + base,
					Payload: resultWrite{Updated: int64(1000 + i), Result: res}})
			}
			return out
		},
		Rows: func(ctx context.Context, x store.DomainSQL) ([]string, error) {
			rows, err := resultsOn(x).List(ctx, ListParams{Limit: 1000})
			var out []string
			for _, r := range rows {
				b, _ := json.Marshal(r)
				out = append(out, string(b))
			}
			return out, err
		},
	})
}
