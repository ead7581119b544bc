package workerproto_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
)

// TestClients shows what the server knows of its remote workers: the actions a client polled
// for, its polls waiting, the tasks it holds, and its last contact, told apart by token,
// address and User-Agent (which names the worker's host and process).
func TestClients(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{longPoll: 2 * time.Second})
	b.job(t, "hello pdf")
	before := time.Now()
	th := b.poll(t)
	clients := b.srv.Clients()
	if len(clients) != 1 {
		t.Fatalf("clients = %+v, want one", clients)
	}
	c := clients[0]
	if c.InFlight != 1 || c.Polling != 0 || fmt.Sprint(c.Actions) != "[Pdf]" || c.TokenID != "anonymous" || c.Addr != "127.0.0.1" ||
		!strings.HasPrefix(c.Agent, "sluice-worker (") || c.Seen.Before(before) {
		t.Fatalf("client %+v: want Pdf, 1 task in flight, no poll waiting, seen since the poll", c)
	}
	// A second poll waits (no task left): the same client, now polling.
	done := make(chan error, 1)
	go func() {
		_, err := b.client().Poll(t.Context(), "Pdf")
		done <- err
	}()
	poll.Until(t, 10*time.Second, "the poll counted", func() (bool, string) {
		cs := b.srv.Clients()
		return len(cs) == 1 && cs[0].Polling == 1, fmt.Sprintf("%+v", cs)
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := th.Post(t.Context(), "done", nil); err != nil {
		t.Fatal(err)
	}
	cs := b.srv.Clients()
	if len(cs) != 1 || cs[0].InFlight != 0 || cs[0].Polling != 0 {
		t.Fatalf("after done: %+v, want no task in flight and no poll", cs)
	}
}
