package testdomain_test

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
	"github.com/sluice-project/sluice/internal/enginetest/testdomain"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestDomainWritesSpilled runs tasks that write 3,000 writes of a kilobyte each — past the
// megabyte an attempt keeps in memory, so most wait for the commit in a temp file — on every
// driver: a completed task's writes are all committed, in order (its last write, a key it wrote
// first, is the one dropped); a failed attempt's, and all of a result whose last write the
// domain refuses (after the batches before it were applied, in the same transaction), are not.
func TestDomainWritesSpilled(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		const n = 3000
		pad := strings.Repeat("x", 1000)
		w := enginetest.Func("w", func(_ context.Context, tk *action.Task, out action.Output) error {
			write := func(key string, payload any) error {
				return out.Write(action.DomainWrite{Domain: testdomain.Name, Key: key, Payload: payload})
			}
			for i := range n {
				if err := write(fmt.Sprintf("k%04d", i), map[string]any{"i": i, "attempt": tk.Attempt, "pad": pad}); err != nil {
					return err
				}
			}
			switch tk.Item.Name {
			case "ok":
				return write("k0000", map[string]any{"i": "again"})
			case "flaky":
				if tk.Attempt == 1 {
					return errors.New("transient trouble")
				}
			case "refused":
				return write(testdomain.FailKey, 1)
			}
			return nil
		})
		k := enginetest.StartWith(t, open, enginetest.Config{Domains: domains}, w)
		job := k.StartJob(t, "name: w\nsteps:\n  w: {action: w, needs: [start]}\n",
			engine.Root{Name: "ok"}, engine.Root{Name: "flaky"}, engine.Root{Name: "refused"})
		if j := k.WaitJob(t, job.ID, time.Minute); j.State != record.JobComplete {
			t.Fatalf("job = %s (%s), want complete", j.State, j.Error)
		}
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID})
		if err != nil {
			t.Fatal(err)
		}
		name := map[int64]string{}
		for _, it := range items {
			name[it.ID] = it.Name
		}
		taskOf := map[string]*record.Task{}
		for _, tk := range k.Tasks(t, job.ID) {
			taskOf[name[tk.ItemID]] = tk
		}
		if tk := taskOf["refused"]; tk.State != record.TaskFailed || !strings.Contains(tk.Error, `testdomain refuses key "fail"`) {
			t.Errorf("refused task %s (%q), want failed by the domain", tk.State, tk.Error)
		}
		rows, err := testdomain.Rows(t.Context(), k.Store, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, r := range rows {
			item := name[r.ItemID]
			count[item]++
			tk := taskOf[item]
			var i int // the index the key names, which the payload names too
			if _, err := fmt.Sscanf(r.Key, "k%d", &i); err != nil {
				t.Fatalf("row %s/%s: a key the action did not write", item, r.Key)
			}
			want := fmt.Sprintf(`"i":%d`, i)
			p := strings.ReplaceAll(r.Payload, " ", "")
			if r.TaskID != tk.ID || r.Attempt != tk.Attempt || !strings.Contains(p, want) ||
				!strings.Contains(p, fmt.Sprintf(`"attempt":%d`, tk.Attempt)) || !strings.Contains(p, pad) {
				t.Fatalf("row %s/%s by task %d attempt %d (payload %.60s…), want task %d attempt %d with %s",
					item, r.Key, r.TaskID, r.Attempt, p, tk.ID, tk.Attempt, want)
			}
		}
		if count["ok"] != n || count["flaky"] != n || count["refused"] != 0 {
			t.Errorf("rows per item %v, want %d of ok and of flaky, none of refused", count, n)
		}
	})
}
