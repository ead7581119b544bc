package testdomain_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest/domaintest"
	"github.com/sluice-project/sluice/internal/enginetest/testdomain"
	"github.com/sluice-project/sluice/internal/store"
)

// TestConformance runs the domain conformance kit on the test domain, on every driver.
func TestConformance(t *testing.T) {
	t.Parallel()
	domaintest.Run(t, domaintest.Domain{
		Name:   testdomain.Name,
		Domain: testdomain.Domain{},
		Writes: func(name string) []action.DomainWrite {
			return []action.DomainWrite{
				{Domain: testdomain.Name, Key: "k1", Payload: map[string]any{"item": name}},
				{Domain: testdomain.Name, Key: "k2", Payload: []int{1, 2}},
			}
		},
		Rows: func(ctx context.Context, x store.DomainSQL) ([]string, error) {
			rows, err := testdomain.AllRows(ctx, x)
			var out []string
			for _, r := range rows {
				out = append(out, fmt.Sprintf("%d/%s/%s job %d task %d attempt %d %s", r.ItemID, r.Step, r.Key, r.JobID, r.TaskID, r.Attempt, strings.ReplaceAll(r.Payload, " ", "")))
			}
			return out, err
		},
	})
}
