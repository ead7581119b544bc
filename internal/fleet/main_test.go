package fleet_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them (a register never stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
