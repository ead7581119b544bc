package watch_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them (a watcher never stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
