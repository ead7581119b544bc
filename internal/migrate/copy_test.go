package migrate_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/cli"
	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/migrate"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newSchema names a fresh schema, dropped when the test ends, and returns the database URL and
// the schema.
func newSchema(t *testing.T) (string, string) {
	t.Helper()
	url, schema := drivertest.DatabaseURL(t), drivertest.Schema(t)
	t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
	return url, schema
}

func openPG(t *testing.T, url, schema string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), postgres.Config{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// source is an embedded installation after a finished documents job (job 1: a zip of two
// texts, two corpus texts and an encrypted zip, so documents, errors, children and blobs) and
// an unfinished bench job (job 2: its tasks ready, no worker ran them).
type source struct {
	dir   string
	blobs int
}

func newSource(t *testing.T) source {
	t.Helper()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "data")
	n, err := node.Open(ctx, node.Config{DataDir: dir, Engine: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := builtin.Apply(ctx, n.Engine, "documents"); err != nil {
		t.Fatal(err)
	}
	// createBench's workflow: one no-op step per item.
	if _, _, err := n.Engine.ApplyWorkflow(ctx, []byte("name: bench\nsteps:\n  work: {action: noop, needs: [start]}\n"), "bench.yaml"); err != nil {
		t.Fatal(err)
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for i, body := range []string{"first text inside a zip\n", "second text inside a zip, ünïcödé\n"} {
		w, err := zw.Create(fmt.Sprintf("dir/note-%d.txt", i))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{"notes.zip": zbuf.Bytes()}
	for _, f := range []string{"testTXTNonASCIIUTF8.txt", "testCSV.csv", "testZipEncrypted.zip"} {
		b, err := os.ReadFile(filepath.Join("/work/shared/corpus/files", f))
		if errors.Is(err, os.ErrNotExist) {
			b = []byte("stand-in for " + f + "\n")
		} else if err != nil {
			t.Fatal(err)
		}
		inputs[f] = b
	}
	var roots []engine.Root
	for _, name := range []string{"notes.zip", "testTXTNonASCIIUTF8.txt", "testCSV.csv", "testZipEncrypted.zip"} {
		sha, size, err := n.Blobs.Put(ctx, bytes.NewReader(inputs[name]))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, engine.Root{Ordinal: len(roots), Name: name, BlobSHA256: sha, Size: size})
	}
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "documents",
		Options: map[string]any{"ocr": false}, Metadata: map[string]any{"b": 1, "a": map[string]any{"z": true, "y": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Engine.AddRoots(ctx, job, roots); err != nil {
		t.Fatal(err)
	}
	n.Start(ctx)
	waitJob(t, n.Store, job.ID)
	n.Stop(10 * time.Second)
	// The worker is stopped: job 2 is left with ready tasks, as a stopped installation would.
	createBench(t, n, 3)

	blobs := 0
	if err := n.Blobs.Walk(ctx, func(string, int64, time.Time) error { blobs++; return nil }); err != nil {
		t.Fatal(err)
	}
	if blobs <= len(roots) {
		t.Fatalf("the documents job stored %d blobs, want more than its %d inputs", blobs, len(roots))
	}
	return source{dir: dir, blobs: blobs}
}

func createBench(t *testing.T, n *node.Node, roots int) *record.Job {
	t.Helper()
	ctx := t.Context()
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	var rs []engine.Root
	for i := range roots {
		rs = append(rs, engine.Root{Ordinal: i, Name: fmt.Sprintf("r%d", i)})
	}
	if err := n.Engine.AddRoots(ctx, job, rs); err != nil {
		t.Fatal(err)
	}
	return job
}

func waitJob(t *testing.T, st store.Store, id int64) {
	t.Helper()
	var j *record.Job
	poll.Until(t, time.Minute, fmt.Sprintf("job %d to finish", id), func() (bool, string) {
		var err error
		if j, err = st.JobGet(t.Context(), id); err != nil {
			return false, err.Error()
		}
		return j.State != record.JobRunning, string(j.State)
	})
	if j.State != record.JobComplete {
		t.Fatalf("job %d ended %s: %s", id, j.State, j.Error)
	}
}

// state is what an installation holds, read through the store interface so both drivers
// answer alike: every job, item (with text), task, attempt and output.
type state struct {
	Jobs     []record.Job
	Items    []record.Item
	Tasks    []record.Task
	Attempts []record.Attempt
	Outputs  []record.Output
	Stats    []map[record.TaskState]int
	Progress []store.JobProgress
}

func snapshot(t *testing.T, st store.Store) state {
	t.Helper()
	ctx := t.Context()
	var s state
	jobs, err := st.JobList(ctx, store.JobListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		j.Metadata, j.Options = canonical(t, j.Metadata), canonical(t, j.Options)
		s.Jobs = append(s.Jobs, *j)
		items, err := st.ItemList(ctx, store.ItemListParams{JobID: j.ID, Limit: 100000, WithText: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			it.Metadata, it.Options = canonical(t, it.Metadata), canonical(t, it.Options)
			s.Items = append(s.Items, *it)
		}
		tasks, err := st.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			s.Tasks = append(s.Tasks, *task)
			as, err := st.AttemptList(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				s.Attempts = append(s.Attempts, *a)
			}
		}
		outs, err := st.OutputList(ctx, store.OutputListParams{JobID: j.ID, Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			s.Outputs = append(s.Outputs, *o)
		}
		stats, err := store.TaskStats(ctx, st, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		s.Stats = append(s.Stats, stats)
		p, err := st.JobProgress(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		s.Progress = append(s.Progress, *p)
	}
	return s
}

// canonical re-encodes a JSON object: Postgres's jsonb keeps objects in its own key order.
func canonical(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("stored JSON %q: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return out
}

func compare[T any](t *testing.T, what string, want, got []T) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s: %d in the target, want %d", what, len(got), len(want))
		return
	}
	for i := range want {
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Errorf("%s #%d differs:\n target %+v\n source %+v", what, i, got[i], want[i])
		}
	}
}

// TestCopy copies a data dir with a finished and an unfinished job to PostgreSQL and a blob
// directory, then runs the target: the same rows come back through the store, every blob reads
// back by its hash, the unfinished job completes there and a new job gets fresh ids (the
// sequences were moved past the copied ids).
func TestCopy(t *testing.T) {
	t.Parallel()
	url, schema := newSchema(t)
	ctx := t.Context()
	src := newSource(t)

	srcNode, err := node.Open(ctx, node.Config{DataDir: src.dir})
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, srcNode.Store)
	srcNode.Close()
	if len(want.Jobs) != 2 || len(want.Items) < 8 || len(want.Outputs) < 4 || len(want.Attempts) == 0 {
		t.Fatalf("source too small to prove anything: %d jobs, %d items, %d outputs, %d attempts",
			len(want.Jobs), len(want.Items), len(want.Outputs), len(want.Attempts))
	}

	dst := openPG(t, url, schema)
	targetBlobs, err := blob.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := migrate.Copy(ctx, migrate.Config{DataDir: src.dir, To: dst, Blobs: targetBlobs, Out: &out})
	t.Logf("copy output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Blobs.Copied != src.blobs || sum.Blobs.Skipped != 0 {
		t.Errorf("copied %d blobs and skipped %d, want %d and 0", sum.Blobs.Copied, sum.Blobs.Skipped, src.blobs)
	}
	rows := map[string]int64{}
	for _, tc := range sum.Tables {
		rows[tc.Table] = tc.Rows
	}
	if rows["jobs"] != 2 || rows["items"] != int64(len(want.Items)) || rows["outputs"] != int64(len(want.Outputs)) || rows["workflows"] != 2 {
		t.Errorf("rows copied per table: %v", rows)
	}
	for _, line := range []string{"rows: jobs", "rows: items", "blobs: " + fmt.Sprint(src.blobs) + " copied"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q", line)
		}
	}

	// A second copy finds the rows and refuses, before touching anything.
	_, err = migrate.Copy(ctx, migrate.Config{DataDir: src.dir, To: dst, Blobs: targetBlobs})
	if err == nil || !strings.Contains(err.Error(), "target database already has 2 jobs") || !strings.Contains(err.Error(), "migrate copy needs an empty one") {
		t.Fatalf("second copy: got %v, want a not-empty error", err)
	}

	n, err := node.Open(ctx, node.Config{DataDir: t.TempDir(), Engine: true, Blobs: targetBlobs,
		OpenStore: func(ctx context.Context) (store.Store, error) {
			return postgres.Open(ctx, postgres.Config{URL: url, Schema: schema})
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	got := snapshot(t, n.Store)
	compare(t, "jobs", want.Jobs, got.Jobs)
	compare(t, "items", want.Items, got.Items)
	compare(t, "tasks", want.Tasks, got.Tasks)
	compare(t, "attempts", want.Attempts, got.Attempts)
	compare(t, "outputs", want.Outputs, got.Outputs)
	compare(t, "task stats", want.Stats, got.Stats)
	checkSearch(t, n.Store, want)
	// Progress sums floats in SQL, in an order each database picks: equal up to rounding.
	for i := range min(len(want.Progress), len(got.Progress)) {
		w, g := want.Progress[i], got.Progress[i]
		if math.Abs(w.Total-g.Total) > 1e-6*w.Total || math.Abs(w.Colored-g.Colored) > 1e-6*w.Total || !reflect.DeepEqual(w.Items, g.Items) {
			t.Errorf("progress of job %d: target %+v, source %+v", i+1, g, w)
		}
	}

	srcBlobs, err := blob.OpenDir(filepath.Join(src.dir, "blobs"), blob.DirOptions{SmallMax: blob.DefaultSmallMax})
	if err != nil {
		t.Fatal(err)
	}
	defer srcBlobs.Close()
	checked := 0
	for _, it := range got.Items {
		for _, sha := range []string{it.BlobSHA256, it.ThumbnailSHA} {
			if sha == "" {
				continue
			}
			b := readBlob(t, targetBlobs, sha)
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != sha {
				t.Errorf("blob %s reads back as bytes hashing to %x", sha, sum)
			}
			if !bytes.Equal(b, readBlob(t, srcBlobs, sha)) {
				t.Errorf("blob %s differs from the source's", sha)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no item references a blob")
	}

	// The copied, unfinished job runs to completion on the target, and a new job gets new ids.
	n.Start(ctx)
	defer n.Stop(10 * time.Second)
	waitJob(t, n.Store, 2)
	job := createBench(t, n, 2)
	waitJob(t, n.Store, job.ID)
	if job.ID != 3 {
		t.Errorf("new job got id %d, want 3", job.ID)
	}
	items, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	maxID := want.Items[0].ID
	for _, it := range want.Items {
		maxID = max(maxID, it.ID)
	}
	for _, it := range items {
		if it.ID <= maxID {
			t.Errorf("new item got id %d, not above the copied ones (max %d)", it.ID, maxID)
		}
	}
}

func readBlob(t *testing.T, s blob.Store, sha string) []byte {
	t.Helper()
	r, err := s.Open(t.Context(), sha)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCopyRefusesRunningEngine: while an engine holds the data dir, copy fails without
// touching the target.
func TestCopyRefusesRunningEngine(t *testing.T) {
	t.Parallel()
	url, schema := newSchema(t)
	dir := t.TempDir()
	n, err := node.Open(t.Context(), node.Config{DataDir: dir, Engine: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	_, err = migrate.Copy(t.Context(), migrate.Config{DataDir: dir, To: openPG(t, url, schema)})
	if !errors.Is(err, node.ErrLocked) {
		t.Fatalf("got %v, want node.ErrLocked", err)
	}
}

// TestCopyCLI runs `sluice migrate copy` without --blobs (they stay in the data dir) and then
// `sluice documents list` against both installations: the listings are identical.
func TestCopyCLI(t *testing.T) {
	t.Parallel()
	url, schema := newSchema(t)
	src := newSource(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	to := url + sep + "sluice_schema=" + schema
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := cli.Main(t.Context(), args, &out, &errOut); code != 0 {
			t.Fatalf("sluice %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
		}
		return out.String()
	}
	want := run("documents", "list", "--job", "1", "--data", src.dir)
	out := run("migrate", "copy", "--from", src.dir, "--to", to)
	if !strings.Contains(out, "blobs: not copied") || strings.Contains(out, url) {
		t.Errorf("copy output (should say the blobs stay, and not repeat the URL):\n%s", out)
	}
	got := run("documents", "list", "--job", "1", "--data", src.dir, "--database", to)
	if want != got || !strings.Contains(want, "document") || !strings.Contains(want, "error") {
		t.Errorf("documents list differs:\n target:\n%s\n source:\n%s", got, want)
	}
	// migrate status honours sluice_schema too.
	if st := run("migrate", "status", "--database", to); !strings.Contains(st, "001 001_init applied") {
		t.Errorf("migrate status:\n%s", st)
	}
	var errOut bytes.Buffer
	if code := cli.Main(t.Context(), []string{"migrate", "copy", "--from", src.dir, "--to", to}, io.Discard, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "target database already has 2 jobs") {
		t.Errorf("second copy: exit %d, %s", code, errOut.String())
	}
	// The data dir is marked: its stale embedded database no longer opens without --database
	// (a gc there would delete the new installation's blobs).
	errOut.Reset()
	if code := cli.Main(t.Context(), []string{"gc", "--data", src.dir}, io.Discard, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "copied to PostgreSQL") {
		t.Errorf("gc on the copied data dir: exit %d, %s", code, errOut.String())
	}
}

// checkSearch: the copy's full-text index (rebuilt, not copied) holds every document: each is
// found by its name, and the index counts as many rows as there are documents.
func checkSearch(t *testing.T, st store.Store, want state) {
	t.Helper()
	ctx := t.Context()
	names := map[int64]string{}
	for _, it := range want.Items {
		names[it.ID] = it.Name
	}
	docs := 0
	for _, o := range want.Outputs {
		if o.Kind != store.OutputDocument {
			continue
		}
		docs++
		q, err := search.Parse(`"` + names[o.ItemID] + `"`)
		if err != nil {
			t.Fatalf("query for %q: %v", names[o.ItemID], err)
		}
		hits, err := docsearch.NewIndex(st.DomainSQL()).Search(ctx, docsearch.SearchParams{Query: q, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(hits, func(h *docsearch.Match) bool { return h.ItemID == o.ItemID }) {
			t.Errorf("search for document %d (%q) in the copy: not found among %d hits", o.ItemID, names[o.ItemID], len(hits))
		}
	}
	n, indexed, err := docsearch.NewIndex(st.DomainSQL()).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if docs == 0 || n < int64(docs) || indexed != n {
		t.Errorf("the copy has %d documents (the source %d) and %d in the index", n, docs, indexed)
	}
}
