package outbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them (a relay never stopped).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// nats.go's connections end their goroutines asynchronously after Close.
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// http.Transport's idle connections of the webhook test's client.
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
