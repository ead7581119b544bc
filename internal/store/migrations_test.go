package store_test

import (
	"slices"
	"testing"

	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/store/sqlite"
)

// TestMigrationVersionsMatch: both drivers number their migrations alike, so one schema version
// means the same thing whichever database holds it.
func TestMigrationVersionsMatch(t *testing.T) {
	t.Parallel()
	lite, pg := sqlite.MigrationVersions(), postgres.MigrationVersions()
	if len(lite) == 0 || !slices.Equal(lite, pg) {
		t.Fatalf("migration versions differ: sqlite %v, postgres %v", lite, pg)
	}
}
