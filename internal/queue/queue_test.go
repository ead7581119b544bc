package queue_test

import (
	"testing"

	"github.com/sluice-project/sluice/internal/queue"
)

// TestNames pins the queue names stores hold (existing rows keep them across upgrades) and that
// only remote queues read as remote.
func TestNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		q          queue.Name
		want       string
		remoteName string
	}{
		{queue.Action("pdf"), "pdf", ""},
		{queue.Step("pdf", "documents", "convert"), "pdf@documents/convert", ""},
		{queue.Remote("Pdf"), "remote:Pdf", "Pdf"},
	} {
		if tt.q.String() != tt.want {
			t.Errorf("queue %q; want %q", tt.q, tt.want)
		}
		name, remote := tt.q.Remote()
		if remote != (tt.remoteName != "") || name != tt.remoteName {
			t.Errorf("%q.Remote() = %q, %v; want %q", tt.q, name, remote, tt.remoteName)
		}
	}
}
