package e2e

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/worker"
)

// onceSubset has every converter, and the same files twice (the zip and the tar of the Tika
// samples hold the same documents), so even the first job has conversions to share.
var onceSubset = []string{
	"test-documents.zip", "test-documents.tar", "testPDF_acroform3.pdf", "testRTFVarious.rtf",
	"testHTML_utf8.html", "testPNG.png", "candide-windows-1252.txt", "testRFC822_normal_zip",
}

// TestConversionsOnce ingests a corpus subset in two jobs of one in-process node and counts the
// worker's actual action runs: every conversion runs once (the number of runs equals the number
// of distinct cache keys), and the second job runs none.
func TestConversionsOnce(t *testing.T) {
	t.Parallel()
	dir, _ := loadCorpus(t)
	var tools []string
	for _, f := range onceSubset {
		tools = append(tools, toolsFor(f)...)
	}
	skipWithoutTools(t, tools)
	ctx := t.Context()
	data := filepath.Join(t.TempDir(), "data")
	n, err := node.Open(ctx, node.Config{DataDir: data, Engine: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := builtin.Apply(ctx, n.Engine, "documents"); err != nil {
		t.Fatal(err)
	}
	var roots []engine.Root
	for i, f := range onceSubset {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sha, size, err := n.Blobs.Put(ctx, fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, engine.Root{Ordinal: i, Name: f, BlobSHA256: sha, Size: size})
	}
	n.Start(ctx)
	defer n.Stop(10 * time.Second)
	run := func(label string) (docs int) {
		t.Helper()
		job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "documents",
			Options: map[string]any{"ocr": false, "split_by_page": false}, Metadata: map[string]any{"run": label}})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Engine.AddRoots(ctx, job, roots); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(4 * time.Minute)
		for {
			j, err := n.Store.JobGet(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != record.JobRunning {
				if j.State != record.JobComplete {
					t.Fatalf("job %s ended %s: %s", label, j.State, j.Error)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s still running after 4 minutes", label)
			}
			n.Store.Wait(ctx, 50*time.Millisecond)
		}
		outs, err := n.Store.OutputList(ctx, store.OutputListParams{JobID: job.ID, Kind: ingest.KindDocument, Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		return len(outs)
	}

	docs1 := run("first")
	first := n.Worker.Stats()
	keys := cacheRows(t, filepath.Join(data, "sluice.db"))
	var runs, hits int64
	for _, act := range cacheable() {
		runs += first[act].Runs
		hits += first[act].CacheHits
	}
	t.Logf("first job: %d documents; %d conversions run, %d cache hits, %d cache keys; per action %v", docs1, runs, hits, keys, first)
	if runs != keys {
		t.Errorf("first job ran %d conversions for %d distinct inputs: some ran more than once", runs, keys)
	}
	if first["office"].CacheHits == 0 || first["pdf"].CacheHits == 0 {
		t.Errorf("the tar repeats the zip's documents, yet office and pdf had no cache hits: %v", first)
	}

	docs2 := run("second")
	second := n.Worker.Stats()
	for _, act := range cacheable() {
		if d := second[act].Runs - first[act].Runs; d != 0 {
			t.Errorf("second job ran %s %d times, want 0 (all cached)", act, d)
		}
	}
	if d := second["office"].CacheHits - first["office"].CacheHits; d == 0 {
		t.Errorf("second job had no office cache hits")
	}
	if docs2 != docs1 || docs1 == 0 {
		t.Errorf("documents: first job %d, second %d", docs1, docs2)
	}
	t.Logf("second job: %d documents; per action %v", docs2, delta(first, second))
}

func delta(a, b map[string]worker.ActionStats) map[string]worker.ActionStats {
	out := map[string]worker.ActionStats{}
	for k, v := range b {
		out[k] = worker.ActionStats{Runs: v.Runs - a[k].Runs, CacheHits: v.CacheHits - a[k].CacheHits}
	}
	return out
}

// cacheRows counts the conversion cache's rows: one per distinct (action, settings, options,
// content) that ran.
func cacheRows(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM cache").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// cacheable returns the built-in actions whose results the conversion cache keeps.
func cacheable() []string {
	cat := node.Catalog()
	var out []string
	for _, name := range cat.Names() {
		if cat.Policy(name).Cacheable {
			out = append(out, name)
		}
	}
	return out
}
