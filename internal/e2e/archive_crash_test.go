package e2e

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// TestArchiveCrashLoop: the corpus's 20,000-entry zip, beside an office file, under 20 SIGKILLs
// at random 0.3–3 s moments, each followed by the same `sluice ingest`. An unpack takes longer
// than the interval between kills, so before unpack resumed after its committed children and a
// lost attempt that made progress went uncounted, the zip ended "unpack failed 13 times: worker
// lost" and thousands of documents were missing. The export must equal an uninterrupted run's.
func TestArchiveCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop: skipped in -short")
	}
	t.Parallel()
	dir, _ := loadCorpus(t)
	files := []string{"hostile-20000-entries.zip", "testRTFVarious.rtf"}
	var tools []string
	for _, f := range files {
		tools = append(tools, toolsFor(f)...)
	}
	skipWithoutTools(t, tools)
	args := subsetArgs(t, dir, files)
	ctx := t.Context()
	work := t.TempDir()
	clean := filepath.Join(work, "clean")
	if out, err := runSluice(ctx, append([]string{"ingest", "--data", clean}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, tail(out))
	}
	crashed := filepath.Join(work, "crashed")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	killLoop(t, append([]string{"ingest", "--data", crashed}, args...), 20, func() time.Duration {
		return 300*time.Millisecond + time.Duration(rng.Int64N(int64(2700*time.Millisecond)))
	})
	if out, err := runSluice(ctx, append([]string{"ingest", "--data", crashed}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, tail(out))
	}
	want, got := export(t, clean, "text"), export(t, crashed, "text")
	if len(want.docs) < 20001 {
		t.Fatalf("the uninterrupted run made %d documents, want the zip's 20,000 and the office file's", len(want.docs))
	}
	if !bytes.Equal(want.index, got.index) {
		t.Errorf("index.jsonl differs after the kills (%d documents against %d):\n%s", len(got.docs), len(want.docs), lineDiff(want.index, got.index))
	}
	if !bytes.Equal(want.errRaw, got.errRaw) {
		t.Errorf("errors.jsonl differs after the kills:\n%s", lineDiff(want.errRaw, got.errRaw))
	}
}
