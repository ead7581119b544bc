package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestResumedCacheableTask: a cacheable action (an unpack) whose first attempt recorded two
// children resumes after them on its second; the resumed attempt has seen only part of its
// children, so it caches nothing — and completes with all of them (it used to panic).
func TestResumedCacheableTask(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		resumed := make(chan int, 2)
		split := enginetest.Func("split", func(ctx context.Context, tk *action.Task, out action.Output) error {
			skip := action.Resume(out)
			resumed <- skip
			for i := skip; i < 3; i++ {
				if tk.Attempt == 1 && i == 2 {
					return errors.New("the process died here")
				}
				if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/%d", tk.Item.Name, i), Blob: strings.NewReader(fmt.Sprint(i))}); err != nil {
					return err
				}
			}
			return nil
		}).WithPolicy(action.Policy{Cacheable: true})
		k := enginetest.Start(t, open, split)
		sha, size, err := k.Blobs.Put(t.Context(), strings.NewReader("archive"))
		if err != nil {
			t.Fatal(err)
		}
		job := k.StartJob(t, "name: split\nsteps:\n  split: {action: split, needs: [start], when: root}\n",
			engine.Root{Name: "a.zip", BlobSHA256: sha, Size: size})
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		if first, second := <-resumed, <-resumed; first != 0 || second != 2 {
			t.Errorf("attempts resumed after %d and %d children, want 0 and 2", first, second)
		}
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 4 {
			t.Errorf("%d items, want the root and 3 children", len(items))
		}
	})
}

// TestLargeFanOutNotCached: a cacheable action's result is cached with its children, so that
// the same input in another job replays them without running it — but not a result of more
// than a thousand children, which would be held in memory for the life of the task (an archive
// of 100,000 entries). The second job runs the action again then.
func TestLargeFanOutNotCached(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		for _, tc := range []struct {
			children int
			runs     int
		}{{3, 1}, {1001, 2}} {
			runs := 0
			name := fmt.Sprintf("split%d", tc.children)
			split := enginetest.Func(name, func(ctx context.Context, tk *action.Task, out action.Output) error {
				runs++
				for i := range tc.children {
					if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/%d", tk.Item.Name, i)}); err != nil {
						return err
					}
				}
				return nil
			}).WithPolicy(action.Policy{Cacheable: true})
			k := enginetest.Start(t, open, split)
			sha, size, err := k.Blobs.Put(t.Context(), strings.NewReader("archive"))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				job := k.StartJob(t, "name: "+name+"\nsteps:\n  split: {action: "+name+", needs: [start], when: root}\n",
					engine.Root{Name: "a.zip", BlobSHA256: sha, Size: size})
				if j := k.WaitJob(t, job.ID, 60*time.Second); j.State != record.JobComplete {
					t.Fatalf("job %s: %s", j.State, j.Error)
				}
				items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 2000})
				if err != nil {
					t.Fatal(err)
				}
				if n := len(items); n != tc.children+1 {
					t.Fatalf("%d items, want the root and %d children", n, tc.children)
				}
			}
			if runs != tc.runs {
				t.Errorf("%d children: the action ran %d times in two jobs, want %d", tc.children, runs, tc.runs)
			}
		}
	})
}

// TestResumeManyChildren: an attempt after one that recorded more children than the worker
// reads at once (it pages through them; 10 at a time in the tests) replays them all — a child made again is compared with
// the recorded one of its ordinal, across pages, and not made twice — and a later attempt
// resumes after every recorded child.
func TestResumeManyChildren(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		const total = 30
		resumed := make(chan int, 3)
		split := enginetest.Func("split", func(ctx context.Context, tk *action.Task, out action.Output) error {
			from, stop := 0, total
			switch tk.Attempt {
			case 1:
				stop = 25
			case 2:
				stop = 28 // made again from 0: the first 25 are replayed
			default:
				from = action.Resume(out)
				resumed <- from
			}
			for i := from; i < total; i++ {
				if i == stop {
					return errors.New("the process died here")
				}
				if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/%d", tk.Item.Name, i), Blob: strings.NewReader(fmt.Sprint(i))}); err != nil {
					return err
				}
			}
			return nil
		})
		k := enginetest.Start(t, open, split)
		sha, size, err := k.Blobs.Put(t.Context(), strings.NewReader("archive"))
		if err != nil {
			t.Fatal(err)
		}
		job := k.StartJob(t, "name: split\nsteps:\n  split: {action: split, needs: [start], when: root}\n",
			engine.Root{Name: "a.zip", BlobSHA256: sha, Size: size})
		if j := k.WaitJob(t, job.ID, 120*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		if got := <-resumed; got != 28 {
			t.Errorf("the third attempt resumed after %d children, want 28", got)
		}
		n, after := 0, ""
		for {
			items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, AfterSort: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			n += len(items)
			if len(items) < 1000 {
				break
			}
			after = items[len(items)-1].SortKey
		}
		if n != total+1 {
			t.Errorf("%d items, want the root and %d children", n, total)
		}
	})
}
