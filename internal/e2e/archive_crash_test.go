package e2e

import (
	"bytes"
	"math/rand/v2"
	"os"
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
	crashLoopCompare(t, subsetArgs(t, dir, []string{"hostile-20000-entries.zip", "testRTFVarious.rtf"}), 20, 20001)
}

// TestCorpusCrashLoop is the long variant, run by `make crashloop` (SLUICE_TEST_CORPUS_CRASH=1):
// the whole public corpus, its 20,000-entry zip included, under 50 SIGKILLs at random 0.3–3 s
// moments. It does not fit CI's budget: the uninterrupted run alone takes minutes on 2 cores.
func TestCorpusCrashLoop(t *testing.T) {
	if os.Getenv("SLUICE_TEST_CORPUS_CRASH") != "1" {
		t.Skip("the 50-kill corpus crash loop runs with make crashloop (SLUICE_TEST_CORPUS_CRASH=1)")
	}
	dir, _ := loadCorpus(t)
	crashLoopCompare(t, corpusArgs(t, dir, nil), 50, 20001)
}

// crashLoopCompare ingests files once uninterrupted, then under up to kills SIGKILLs at random
// 0.3–3 s moments (the same command run again after each) and once more to the end, and requires
// the two exports to be identical, with at least minDocs documents.
func crashLoopCompare(t *testing.T, files []string, kills, minDocs int) {
	t.Helper()
	var tools []string
	for _, f := range files {
		tools = append(tools, toolsFor(filepath.Base(f))...)
	}
	skipWithoutTools(t, tools)
	ctx := t.Context()
	work := t.TempDir()
	clean := filepath.Join(work, "clean")
	start := time.Now()
	if out, err := runSluice(ctx, append([]string{"ingest", "--data", clean}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, tail(out))
	}
	t.Logf("uninterrupted run: %s", time.Since(start).Round(time.Millisecond))
	crashed := filepath.Join(work, "crashed")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	start = time.Now()
	made, _ := killLoop(t, append([]string{"ingest", "--data", crashed}, files...), kills, func() time.Duration {
		return 300*time.Millisecond + time.Duration(rng.Int64N(int64(2700*time.Millisecond)))
	})
	if out, err := runSluice(ctx, append([]string{"ingest", "--data", crashed}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, tail(out))
	}
	t.Logf("%d kills and the final run: %s", made, time.Since(start).Round(time.Millisecond))
	want, got := export(t, clean, "text"), export(t, crashed, "text")
	if len(want.docs) < minDocs {
		t.Fatalf("the uninterrupted run made %d documents, want at least %d", len(want.docs), minDocs)
	}
	if !bytes.Equal(want.index, got.index) {
		t.Errorf("index.jsonl differs after %d kills (%d documents against %d):\n%s", made, len(got.docs), len(want.docs), lineDiff(want.index, got.index))
	}
	if !bytes.Equal(want.errRaw, got.errRaw) {
		t.Errorf("errors.jsonl differs after %d kills:\n%s", made, lineDiff(want.errRaw, got.errRaw))
	}
}
