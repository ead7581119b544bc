package cli

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
)

// TestProgressLineNeverSilent: while a count of the job's progress takes as long as it likes
// (a job of a hundred thousand items once kept the line silent for 91 s), the line goes on being
// printed from the last count, its elapsed time moving.
func TestProgressLineNeverSilent(t *testing.T) {
	defer func(d time.Duration) { plainEvery = d }(plainEvery)
	plainEvery = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := node.Open(ctx, node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Engine: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := resolveWorkflow(ctx, &env{stdout: io.Discard, stderr: io.Discard}, n, "documents"); err != nil {
		t.Fatal(err)
	}
	// An open job and no workers: it runs until the test ends.
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "documents", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	counted := make(chan struct{})
	var calls int
	count := func(ctx context.Context) error {
		if calls++; calls == 1 {
			return nil
		}
		if calls == 2 {
			close(counted)
		}
		<-ctx.Done() // every later count never ends
		return ctx.Err()
	}
	var out poll.Buffer
	done := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	go func() {
		_, err := watchJob(wctx, &env{stdout: &out, stderr: &out}, n, job.ID,
			func(p *engine.Progress, _ *record.Job) string {
				return "line " + p.Elapsed.Round(time.Millisecond).String()
			}, count)
		done <- err
	}()
	select {
	case <-counted:
	case <-time.After(30 * time.Second):
		t.Fatal("the second count never started")
	}
	before := strings.Count(out.String(), "line ")
	poll.Until(t, 30*time.Second, "five more lines while a count is stuck", func() (bool, string) {
		s := out.String()
		return strings.Count(s, "line ")-before >= 5, s
	})
	stop()
	<-done
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var elapsed []string
	for _, l := range lines {
		if strings.HasPrefix(l, "line ") {
			elapsed = append(elapsed, l)
		}
	}
	if first, last := elapsed[before], elapsed[len(elapsed)-1]; first == last {
		t.Errorf("the elapsed time did not move while the count was stuck: %q then %q", first, last)
	}
}
