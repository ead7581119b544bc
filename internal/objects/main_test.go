package objects_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the child process of TestSheetSurvivesKill when asked (this test binary runs
// itself), else the tests, failing them if a goroutine outlives them.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
