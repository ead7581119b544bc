package workerproto_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the server child process of TestBacklogRemoteServerKilled when asked (this
// test binary runs itself), else the tests, failing them if a goroutine outlives them.
func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		os.Exit(runServerChild())
	}
	goleak.VerifyTestMain(m)
}
