package graph_test

import (
	"os"
	"testing"
)

// TestMain runs the child process of TestTraversalSurvivesKill when asked (this test binary
// runs itself), else the tests.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}
