package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// openNode opens an engine node on a store of the driver open opens, and starts it.
func openNode(t *testing.T, open drivertest.Open) *node.Node {
	t.Helper()
	return startNode(t, node.Config{DataDir: t.TempDir(), Engine: true,
		OpenStore: func(context.Context) (store.Store, error) { return open(t), nil }})
}

// startNode opens and starts a node, stopped and closed when the test ends.
func startNode(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.Start(ctx)
	t.Cleanup(func() {
		n.Stop(5 * time.Second)
		cancel()
		n.Close()
	})
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, func() (bool, string) { return cond(), "" })
}

func startMediathread(t *testing.T, n *node.Node, src string) (*record.Job, *record.Item) {
	t.Helper()
	ctx := t.Context()
	if _, _, err := n.Engine.ApplyWorkflow(ctx, []byte(src), "mediathread.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "mediathread-video"})
	if err != nil {
		t.Fatal(err)
	}
	sha, size, err := n.Blobs.Put(ctx, strings.NewReader("not really a video"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Engine.AddRoots(ctx, job, []engine.Root{{Name: "lecture.mp4", BlobSHA256: sha, Size: size}}); err != nil {
		t.Fatal(err)
	}
	items, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: job.ID})
	if err != nil || len(items) != 1 {
		t.Fatalf("items %v %v", items, err)
	}
	return job, items[0]
}

func taskStates(t *testing.T, n *node.Node, itemID int64) map[string]*record.Task {
	t.Helper()
	tasks, err := n.Store.TaskListByItem(t.Context(), itemID)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*record.Task{}
	for _, tk := range tasks {
		m[tk.Step] = tk
	}
	return m
}

func TestMediathread(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		testMediathread(t, open)
	})
}

func testMediathread(t *testing.T, open drivertest.Open) {
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "mediathread.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := openNode(t, open)
	job, it := startMediathread(t, n, string(src))
	ctx := t.Context()

	// Both start steps run; the rest waits for the transcoder's external event.
	waitFor(t, 30*time.Second, "start steps", func() bool {
		ts := taskStates(t, n, it.ID)
		return ts["extract-metadata"] != nil && ts["extract-metadata"].State == record.TaskComplete &&
			ts["create-transcode"] != nil && ts["create-transcode"].State == record.TaskComplete
	})
	ts := taskStates(t, n, it.ID)
	for _, s := range []string{"pull-thumbnails", "copy-to-cunix", "submit", "email-success", "email-failure"} {
		if ts[s] != nil {
			t.Fatalf("%s ran before et-job-finished: %+v", s, ts[s])
		}
	}
	cur, _ := n.Store.ItemGet(ctx, it.ID)
	if cur.State != record.ItemWritten {
		t.Fatalf("item waiting for an external event is %s, want written", cur.State)
	}
	var md map[string]any
	if err := json.Unmarshal(cur.Metadata, &md); err != nil {
		t.Fatal(err)
	}
	if tj, _ := md["transcode_job"].(string); !strings.HasPrefix(tj, "tj-") {
		t.Fatalf("create-transcode's metadata missing: %s", cur.Metadata)
	}
	if j, _ := n.Store.JobGet(ctx, job.ID); j.State != record.JobRunning {
		t.Fatalf("job %s before the external event", j.State)
	}
	// Every declared step shows its state, the unrun ones blocked with what they need; the job
	// waits on the transcoder's event for two steps.
	states, err := n.Engine.StepStates(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, st := range states {
		shown = append(shown, st.Step+":"+string(st.State)+"("+strings.Join(st.Needs, "+")+")")
	}
	if got := strings.Join(shown, " "); got != "extract-metadata:complete() create-transcode:complete() pull-thumbnails:blocked(et-job-finished) "+
		"copy-to-cunix:blocked(et-job-finished) submit:blocked(poster-created+uploaded-to-cunix) email-success:blocked(submitted) email-failure:blocked(failed)" {
		t.Errorf("step states while waiting: %s", got)
	}
	waits, err := n.Engine.Waits(ctx, job.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(waits.Events) != 1 || waits.Events[0].Event != "et-job-finished" || waits.Events[0].Waiting != 2 || waits.ItemsRead != 1 || len(waits.Items) != 5 {
		t.Errorf("waits: %+v", waits)
	}
	// An undeclared event is refused; the declared one fires once, a repeat is harmless.
	if _, err := n.Engine.FireExternal(ctx, it.ID, "et-bogus"); err == nil {
		t.Fatal("an undeclared external event was accepted")
	}
	if fired, err := n.Engine.FireExternal(ctx, it.ID, "et-job-finished"); err != nil || !fired {
		t.Fatalf("fire: %v %v", fired, err)
	}
	if fired, err := n.Engine.FireExternal(ctx, it.ID, "et-job-finished"); err != nil || fired {
		t.Fatalf("repeat fire: %v %v", fired, err)
	}
	waitFor(t, 30*time.Second, "job end", func() bool {
		j, _ := n.Store.JobGet(ctx, job.ID)
		return j.State != record.JobRunning
	})
	j, _ := n.Store.JobGet(ctx, job.ID)
	if j.State != record.JobComplete {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	ts = taskStates(t, n, it.ID)
	// submit waits for all three of its needs (AND-join).
	for _, dep := range []string{"extract-metadata", "pull-thumbnails", "copy-to-cunix"} {
		if ts[dep].FinishedAt.After(ts["submit"].StartedAt) {
			t.Errorf("submit started at %s before %s finished at %s", ts["submit"].StartedAt, dep, ts[dep].FinishedAt)
		}
	}
	if ts["email-success"] == nil || ts["email-success"].State != record.TaskComplete || ts["email-success"].StartedAt.Before(ts["submit"].FinishedAt) {
		t.Errorf("email-success did not run after submit: %+v", ts["email-success"])
	}
	if ts["email-failure"] != nil {
		t.Errorf("email-failure ran on the success path")
	}
	if len(ts) != 6 {
		t.Errorf("%d tasks ran, want 6: %v", len(ts), ts)
	}
	states, err = n.Engine.StepStates(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last := states[len(states)-1]; last.Step != "email-failure" || last.State != record.TaskSkipped || last.Reason != "not reached: failed never fired" {
		t.Errorf("email-failure after the success path: %+v", last)
	}
}

func TestMediathreadFailurePath(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		testMediathreadFailurePath(t, open)
	})
}

func testMediathreadFailurePath(t *testing.T, open drivertest.Open) {
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "mediathread.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The metadata extractor rejects the input: a permanent failure.
	bad := strings.Replace(string(src), `with: {command: [sh, -c, 'wc -c'], input: stdin}`,
		`with: {command: [sh, -c, 'echo corrupt video >&2; exit 3'], input: stdin, permanent_exit_codes: [3]}`, 1)
	if bad == string(src) {
		t.Fatal("the example changed: update the test's replacement")
	}
	n := openNode(t, open)
	job, it := startMediathread(t, n, bad)
	waitFor(t, 30*time.Second, "job end", func() bool {
		j, _ := n.Store.JobGet(t.Context(), job.ID)
		return j.State != record.JobRunning
	})
	j, _ := n.Store.JobGet(t.Context(), job.ID)
	if j.State != record.JobFailed {
		t.Fatalf("job %s, want failed", j.State)
	}
	ts := taskStates(t, n, it.ID)
	if ts["extract-metadata"].State != record.TaskFailed || !strings.Contains(ts["extract-metadata"].Error, "corrupt video") {
		t.Errorf("extract-metadata: %+v", ts["extract-metadata"])
	}
	if ts["email-failure"] == nil || ts["email-failure"].State != record.TaskComplete {
		t.Errorf("email-failure did not run: %+v", ts["email-failure"])
	}
	if ts["submit"] != nil || ts["email-success"] != nil {
		t.Errorf("success steps ran on the failure path")
	}
	cur, _ := n.Store.ItemGet(t.Context(), it.ID)
	if !strings.Contains(cur.Error, "corrupt video") {
		t.Errorf("item error %q", cur.Error)
	}
}
