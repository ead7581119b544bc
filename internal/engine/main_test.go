package engine_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_CLAIM_PROCESS") != "" {
		os.Exit(claimProcess()) // the second process of TestClaimInTwoProcesses
	}
	goleak.VerifyTestMain(m)
}
