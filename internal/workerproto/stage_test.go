package workerproto_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/enginetest"
)

// unsyncedDir is a blob directory whose staged blobs never become durable: each wait fails.
type unsyncedDir struct{ *blob.Dir }

func (d unsyncedDir) Stage(ctx context.Context, r io.Reader, soon bool) (string, int64, func() error, error) {
	sha, n, _, err := d.Dir.Stage(ctx, r, soon)
	return sha, n, func() error { return errors.New("disk gone") }, err
}

// TestStagedBlobNotDurable: the children of a remote task are written only once their staged
// blobs are durable. When they cannot be, none of them is written, and the task fails with the
// storage error (its one attempt spent, the item fails).
func TestStagedBlobNotDurable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		children int
	}{
		{name: "with the result", children: 3},
		{name: "in a flush", children: 300}, // more than a flush's 256
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, opts{attempts: 1, serverBlobs: func(d *blob.Dir) blob.Store { return unsyncedDir{d} }})
			job := b.job(t, "input")
			th := b.poll(t)
			s := th.Stream(t.Context())
			for i := range tc.children {
				if err := s.Part(fmt.Sprintf("%d.json", i), str(childJSON(fmt.Sprint("c", i)))); err != nil {
					t.Fatal(err)
				}
				if err := s.Part(fmt.Sprintf("%d.blob", i), str(fmt.Sprint("blob ", i))); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Part("done", str("")); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			enginetest.WaitJob(t, b.e, job.ID, time.Minute)
			root := b.root(t, job)
			if kids := b.children(t, root); len(kids) != 0 || root.NChildren != 0 {
				t.Errorf("%d children written (n_children %d), want none: their blobs were never durable", len(kids), root.NChildren)
			}
			if !strings.Contains(root.Error, "disk gone") {
				t.Errorf("item error %q, want the storage error", root.Error)
			}
		})
	}
}
