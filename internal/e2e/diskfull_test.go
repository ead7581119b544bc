package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// fullWorkflow has the default attempts: a full disk must not spend them into item errors.
const fullWorkflow = `name: full
steps:
  detect:  {action: detect, needs: [start]}
  unpack:  {action: unpack, needs: [detected.archive]}
  hash:    {action: exec, needs: [detected.text], with: {command: [sha256sum], stdout: text}}
  collect: {action: ingest, needs: [children.done]}
`

// mountTmpfs mounts a tmpfs of size (as mount's size= option) at a fresh directory, unmounted
// when the test ends. It needs root: without it the test skips, or fails when
// SLUICE_TEST_REQUIRE_TOOLS=1 (CI runs as root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	return mountTmpfsAt(t, t.TempDir(), size)
}

// mountTmpfsAt is [mountTmpfs] at dir, which must exist.
func mountTmpfsAt(t *testing.T, dir, size string) string {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		msg := fmt.Sprintf("mount a tmpfs (needs root): %v", err)
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestDiskFull runs a job whose data dir is on a 4 MiB tmpfs: the inputs fit, their entries do
// not. Before, the process went on forever with every commit failing, silent unless logging was
// on. Now it stops with an error that names the full disk and says how to go on; nothing is
// corrupted and no attempt is spent into an item error: once the tmpfs is grown, the same
// command resumes the job, and the export equals an uninterrupted run's.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "4m")
	work := t.TempDir()
	wf := filepath.Join(work, "full.yaml")
	if err := os.WriteFile(wf, []byte(fullWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(work, "in")
	if err := os.Mkdir(inputs, 0o755); err != nil {
		t.Fatal(err)
	}
	// 2 MB of entries that do not compress, stored as they are.
	rng := rand.New(rand.NewPCG(1, 2))
	for z := 0; z < 2; z++ {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for i := 0; i < 100; i++ {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("d/f%03d.txt", i), Method: zip.Store})
			if err != nil {
				t.Fatal(err)
			}
			line := make([]byte, 10_000)
			for j := range line {
				line[j] = "abcdefghij klmnop\n"[rng.IntN(18)]
			}
			w.Write(line)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(inputs, fmt.Sprintf("batch-%d.zip", z)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	clean := filepath.Join(work, "clean")
	if out, err := runSluice(ctx, "run", "--data", clean, wf, inputs).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, tail(out))
	}

	data := filepath.Join(mnt, "data")
	// Before, the run never ended: bound it.
	fullCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := runSluice(fullCtx, "run", "--data", data, wf, inputs).CombinedOutput()
	if fullCtx.Err() != nil {
		t.Fatalf("the run on a full disk went on for a minute without a word\n%s", tail(out))
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the run on a full disk ended with %v, want a failure naming the full disk (grow the entries if the job fit)\n%s", err, tail(out))
	}
	msg := string(out)
	if !strings.Contains(msg, "the disk of the data dir "+data+" is full") || !strings.Contains(msg, "run the same command again to resume job 1") {
		t.Errorf("the error does not name the full disk and how to go on:\n%s", tail(out))
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	if out, err := runSluice(ctx, "run", "--data", data, wf, inputs).CombinedOutput(); err != nil {
		t.Fatalf("the same command once there is space: %v\n%s", err, tail(out))
	}
	want, wantErrs := exportJob(t, clean)
	got, gotErrs := exportJob(t, data)
	if n := bytes.Count(want, []byte("\n")); n != 200 || len(wantErrs) != 0 {
		t.Fatalf("the uninterrupted run made %d documents and errors %q, want 200 and none", n, wantErrs)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("index.jsonl differs after the full disk:\n%s", lineDiff(want, got))
	}
	if len(gotErrs) != 0 {
		t.Errorf("errors after the full disk:\n%s", gotErrs)
	}
}

// exportJob exports job 1 of a data dir and returns its index.jsonl, item ids left out, and
// errors.jsonl.
func exportJob(t *testing.T, data string) (index, errs []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export")
	if b, err := runSluice(t.Context(), "documents", "export", "--data", data, "--job", "1", "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(out, "index.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Item ids depend on the order tasks ran in: everything else must match.
	for _, line := range bytes.SplitAfter(raw, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			index = append(index, line...)
			continue
		}
		delete(m, "id")
		b, _ := json.Marshal(m)
		index = append(append(index, b...), '\n')
	}
	errs, err = os.ReadFile(filepath.Join(out, "errors.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return index, errs
}

// fillWorkflow's one step writes 3 MB into its temp dir (the tool's working directory), with
// one attempt: an attempt spent on a full disk would be an item error.
const fillWorkflow = `name: fill
steps:
  fill: {action: exec, needs: [start], attempts: 1, with: {command: [sh, -c, "head -c 3000000 /dev/zero > fill && wc -c < fill"], stdout: text}}
`

// TestWorkerTempDirFull runs a job whose tool writes 3 MB into the worker's temp dir, a 2 MiB
// tmpfs. The tool fails with an exit status and "No space left on device" on its stderr, which
// says nothing about the input: the attempt is given back with a message that names the full
// temp dir, the task waits and runs again (no item error however often it happens), and once
// the tmpfs is grown the job completes with every item.
func TestWorkerTempDirFull(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	tmp := filepath.Join(data, "tmp") // the worker's temp dir (node.Open)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfsAt(t, tmp, "2m")
	n, err := node.Open(ctx, node.Config{DataDir: data, Engine: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Start(ctx)
	defer n.Stop(10 * time.Second)
	if _, _, err := n.Engine.ApplyWorkflow(ctx, []byte(fillWorkflow), "fill.yaml"); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(dir, "in")
	if err := os.Mkdir(inputs, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 3
	for i := range files {
		if err := os.WriteFile(filepath.Join(inputs, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintln("input", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job := jobOfFiles(t, n, "fill", inputs)
	// Every task meets the full temp dir at least once, and waits with its attempt given back.
	met := map[int64]string{}
	poll.Until(t, time.Minute, "every task to meet the full temp dir", func() (bool, string) {
		tasks, err := n.Store.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, Limit: 1000})
		if err != nil {
			return false, err.Error()
		}
		for _, tk := range tasks {
			if tk.State == record.TaskFailed || tk.State == record.TaskComplete {
				t.Fatalf("task %d %s on a full temp dir: %s", tk.ID, tk.State, tk.Error)
			}
			if strings.Contains(tk.Error, "temp dir is full") {
				if tk.State == record.TaskReady && tk.Attempt != 0 {
					t.Fatalf("task %d waits at attempt %d; want its attempt given back", tk.ID, tk.Attempt)
				}
				met[tk.ID] = tk.Error
			}
		}
		return len(met) == files, fmt.Sprintf("%d of %d tasks", len(met), files)
	})
	for _, msg := range met {
		if !strings.Contains(msg, "no space left on device") || !strings.Contains(msg, "free of 2.0 MiB") {
			t.Errorf("the task's error does not say plainly that the temp dir is full: %q", msg)
		}
		t.Logf("a task's error on the full temp dir: %s", msg)
		break
	}
	if err := syscall.Mount("tmpfs", tmp, "tmpfs", syscall.MS_REMOUNT, "size=16m"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	waitFor(t, time.Minute, "the job to end", func() bool {
		j, err := n.Store.JobGet(ctx, job.ID)
		return err == nil && j.State != record.JobRunning
	})
	if j, _ := n.Store.JobGet(ctx, job.ID); j.State != record.JobComplete {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	its, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != files {
		t.Fatalf("%d items, want %d", len(its), files)
	}
	for _, it := range its {
		if it.Error != "" || it.State != record.ItemIngested {
			t.Errorf("item %q: %s %q", it.Name, it.State, it.Error)
		}
	}
}
