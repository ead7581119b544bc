// Package e2e holds end-to-end tests that run the real sluice binary, kill it, and compare what
// it left in the database with an uninterrupted run.
package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "sluice")
	packageTemp = dir
	out, err := exec.Command("go", "build", "-o", binary, "../../cmd/sluice").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	flag.Parse()
	widenParallel()
	var cancel context.CancelFunc
	packageCtx, cancel = context.WithCancel(context.Background())
	startCorpusRuns()
	code := m.Run()
	cancel()
	os.RemoveAll(dir)
	os.Exit(code)
}

// snapshot is the observable final state of a data dir, keyed by item name.
type snapshot struct {
	Jobs  []string
	Items map[string]string
	Tasks map[record.TaskState]int
}

func takeSnapshot(t *testing.T, data string) snapshot {
	t.Helper()
	ctx := t.Context()
	n, err := node.Open(ctx, node.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s := snapshot{Items: map[string]string{}, Tasks: map[record.TaskState]int{}}
	jobs, err := n.Store.JobList(ctx, store.JobListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		s.Jobs = append(s.Jobs, j.WorkflowName+":"+string(j.State)+":"+j.Error)
		// The job's outputs, read once: a page of them per item sorted the job's outputs each
		// time (26 s of the test's 37).
		outputs := map[int64][]string{}
		for afterItem := int64(0); ; {
			outs, err := n.Store.OutputList(ctx, store.OutputListParams{JobID: j.ID, AfterItem: afterItem, Limit: 100_000})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				outputs[o.ItemID] = append(outputs[o.ItemID], o.Kind+":"+string(o.Value))
			}
			if len(outs) < 100_000 {
				break
			}
			// A page ends after an item: a full one could have cut that item's outputs.
			afterItem = outs[len(outs)-1].ItemID
			if cut := outputs[afterItem]; len(cut) > 0 {
				delete(outputs, afterItem)
				afterItem--
			}
		}
		after := ""
		for {
			items, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: j.ID, AfterSort: after, Limit: 2000, WithText: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				evs, err := n.Store.EventListByItem(ctx, it.ID)
				if err != nil {
					t.Fatal(err)
				}
				sort.Strings(evs)
				tasks, err := n.Store.TaskListByItem(ctx, it.ID)
				if err != nil {
					t.Fatal(err)
				}
				var ts []string
				for _, tk := range tasks {
					ts = append(ts, tk.Step+"="+string(tk.State))
					s.Tasks[tk.State]++
				}
				sort.Strings(ts)
				os := outputs[it.ID]
				key := fmt.Sprintf("%s#%d", it.Name, it.Ordinal)
				if _, dup := s.Items[key]; dup {
					t.Errorf("duplicate item %s", key)
				}
				s.Items[key] = fmt.Sprintf("state=%s err=%q text=%q blob=%s children=%d depth=%d events=%v tasks=%v outputs=%v",
					it.State, it.Error, it.Text, it.BlobSHA256, it.NChildren, it.Depth, evs, ts, os)
			}
			if len(items) < 2000 {
				break
			}
			after = items[len(items)-1].SortKey
		}
	}
	return s
}

const crashWorkflow = `name: crash
steps:
  detect:  {action: detect, needs: [start], attempts: 100}
  unpack:  {action: unpack, needs: [detected.archive], attempts: 100}
  hash:    {action: exec, needs: [detected.text], attempts: 100, with: {command: [sha256sum], stdout: text}}
  collect: {action: ingest, needs: [children.done], attempts: 100}
  note:    {action: noop, needs: [start], attempts: 100}
`

// makeZips writes nz zip files of per text files each.
func makeZips(t *testing.T, dir string, nz, per int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for z := 0; z < nz; z++ {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for i := 0; i < per; i++ {
			w, err := zw.Create(fmt.Sprintf("dir%d/file-%04d.txt", i%3, i))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(w, "archive %d entry %d: %s\n", z, i, strings.Repeat("x", i%50))
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("batch-%03d.zip", z)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runSluice(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// crashLoopWorkflow is crashWorkflow with the command run for one text entry in ten (the others'
// hash step is skipped, and recorded so): 5,000 runs of sha256sum were four fifths of the job's
// time (a clean run 14.9 s, 2.9 s with none), and 500 still put many kills inside a command.
const crashLoopWorkflow = `name: crash
steps:
  detect:  {action: detect, needs: [start], attempts: 100}
  unpack:  {action: unpack, needs: [detected.archive], attempts: 100}
  hash:    {action: exec, needs: [detected.text], when: 'name.endsWith("0.txt")', attempts: 100, with: {command: [sha256sum], stdout: text}}
  collect: {action: ingest, needs: [children.done], attempts: 100}
  note:    {action: noop, needs: [start], attempts: 100}
`

// TestCrashLoop runs a 5,050-item fan-out job through the real binary, SIGKILLs it at 20 random
// moments, restarts it each time with the same command, and compares the end state with an
// uninterrupted run's.
func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop: skipped in -short")
	}
	dir := t.TempDir()
	wf := filepath.Join(dir, "crash.yaml")
	if err := os.WriteFile(wf, []byte(crashLoopWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(dir, "inputs")
	makeZips(t, inputs, 50, 100) // 50 roots + 5,000 children

	ctx := t.Context()
	clean := filepath.Join(dir, "clean")
	start := time.Now()
	if out, err := runSluice(ctx, "run", "--data", clean, wf, inputs).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	cleanDur := time.Since(start)
	t.Logf("uninterrupted run: %s", cleanDur)

	crashed := filepath.Join(dir, "crashed")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills := 0
	finished := false
	for kills < 20 && !finished {
		cmd := runSluice(ctx, "run", "--data", crashed, wf, inputs)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Random moments across the whole run, including the first milliseconds (job creation,
		// blob writes) and the fan-out.
		delay := 10*time.Millisecond + time.Duration(rng.Int64N(int64(cleanDur/30)))
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d failed before its kill: %v\n%s", kills, err, out.String())
			}
			finished = true
			continue
		case <-time.After(delay):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		kills++
	}
	if out, err := runSluice(ctx, "run", "--data", crashed, wf, inputs).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	if kills < 20 {
		t.Fatalf("the job finished after %d kills; the test needs 20", kills)
	}
	want, got := takeSnapshot(t, clean), takeSnapshot(t, crashed)
	if len(want.Items) != 5050 {
		t.Fatalf("uninterrupted run has %d items, want 5050", len(want.Items))
	}
	if fmt.Sprint(want.Jobs) != fmt.Sprint(got.Jobs) {
		t.Errorf("jobs differ: clean %v, crashed %v", want.Jobs, got.Jobs)
	}
	if len(got.Items) != len(want.Items) {
		t.Errorf("crashed run has %d items, clean %d", len(got.Items), len(want.Items))
	}
	diffs := 0
	for k, v := range want.Items {
		if got.Items[k] != v {
			diffs++
			if diffs <= 5 {
				t.Errorf("item %s differs:\n clean:   %s\n crashed: %s", k, v, got.Items[k])
			}
		}
	}
	if diffs > 0 {
		t.Errorf("%d items differ", diffs)
	}
	// Every task complete exactly once, or skipped (the hash step of nine entries in ten).
	if got.Tasks[record.TaskComplete] != want.Tasks[record.TaskComplete] || got.Tasks[record.TaskSkipped] != want.Tasks[record.TaskSkipped] ||
		len(got.Tasks) != 2 || want.Tasks[record.TaskSkipped] != 4550 {
		t.Errorf("tasks: clean %v, crashed %v (every task must be complete exactly once, or skipped: 4,550)", want.Tasks, got.Tasks)
	}
	// The search index holds exactly the documents, across the kills.
	n, err := node.Open(ctx, node.Config{DataDir: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	checkSearchIndex(t, n.Store)
	var b []byte
	b, _ = json.Marshal(got.Tasks)
	t.Logf("crashed run survived %d kills; tasks %s", kills, b)
}
