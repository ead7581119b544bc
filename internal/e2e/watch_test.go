package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
)

// watchRoots counts, per root name, the roots of the data dir's jobs made by a watcher, and
// those jobs.
func watchRoots(t *testing.T, data string) (roots map[string]int, jobs int) {
	t.Helper()
	n, err := node.Open(t.Context(), node.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	roots = map[string]int{}
	var zero int64
	after := int64(0)
	for {
		js, err := n.Store.JobList(t.Context(), store.JobListParams{AfterID: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			if !strings.HasPrefix(j.Key, "watch:") {
				continue
			}
			jobs++
			items, err := n.Store.ItemList(t.Context(), store.ItemListParams{JobID: j.ID, ParentID: &zero, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				roots[it.Name]++
			}
		}
		if len(js) < 500 {
			return roots, jobs
		}
		after = js[len(js)-1].ID
	}
}

// TestWatchKilledAndTwoAtOnce drops 240 files, each written in two steps, into a folder that
// two `sluice watch --move-done` processes watch at once, and SIGKILLs and restarts one of them
// after every batch of 20 files, while the next batch is being dropped: afterwards every file
// is in done/ and is exactly one root of exactly one job.
func TestWatchKilledAndTwoAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, inbox := filepath.Join(dir, "data"), filepath.Join(dir, "inbox")
	if err := os.Mkdir(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "inbox.yaml")
	if err := os.WriteFile(wf, []byte("name: inbox\nsteps:\n  a: {action: noop, needs: [start]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The workflow is stored once, before two processes race to store it.
	if out, err := runSluice(t.Context(), "workflow", "apply", wf, "--data", data).CombinedOutput(); err != nil {
		t.Fatalf("workflow apply: %v\n%s", err, out)
	}
	type proc struct {
		kill func()
		out  *bytes.Buffer
	}
	start := func() proc {
		cmd := runSluice(t.Context(), "watch", inbox, "--workflow", "inbox", "--settle", "20ms", "--poll", "5ms", "--move-done", "--data", data)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		kill := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		t.Cleanup(kill)
		return proc{kill: kill, out: out}
	}
	watchers := []proc{start(), start()}
	const batches, per = 12, 20
	for b := range batches {
		for i := range per {
			p := filepath.Join(inbox, fmt.Sprintf("b%02d", b), fmt.Sprintf("f%02d.txt", i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			// Written in two steps: a watcher may see the first half, which must not settle.
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "batch %d ", b)
			fmt.Fprintf(f, "file %d\n", i)
			f.Close()
		}
		k := b % 2
		watchers[k].kill()
		watchers[k] = start()
	}
	done := filepath.Join(inbox, "done")
	poll.Until(t, 120*time.Second, "every file moved to done/", func() (bool, string) {
		n := 0
		_ = filepath.WalkDir(done, func(_ string, e os.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				n++
			}
			return nil
		})
		return n == batches*per, fmt.Sprintf("%d files in done/", n)
	})
	for _, w := range watchers {
		w.kill()
	}
	roots, jobs := watchRoots(t, data)
	if jobs != batches*per || len(roots) != batches*per {
		t.Fatalf("%d jobs, %d names; want %d\n%s\n%s", jobs, len(roots), batches*per, watchers[0].out, watchers[1].out)
	}
	for name, c := range roots {
		if c != 1 {
			t.Errorf("%s: %d roots", name, c)
		}
	}
	// Nothing was moved aside as a second copy (NAME.JOB_ID): each file was moved once.
	_ = filepath.WalkDir(done, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && !strings.HasSuffix(p, ".txt") {
			t.Errorf("a file moved twice: %s", p)
		}
		return nil
	})
}
