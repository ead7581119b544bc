package worker_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the child process of TestBacklogKillWhileWaiting when asked (this test binary
// runs itself), else the tests, failing them if a goroutine outlives them.
func TestMain(m *testing.M) {
	if os.Getenv(killEnv) != "" {
		os.Exit(runKillChild())
	}
	goleak.VerifyTestMain(m)
}
