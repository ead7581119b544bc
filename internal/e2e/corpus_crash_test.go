package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/node"
)

// corpusRun is one uninterrupted `sluice ingest` of corpus files and its export.
type corpusRun struct {
	work   string // holds the data dir, "data", and nothing else
	out    []byte // what sluice ingest printed
	peakMB float64
	took   time.Duration
	ex     *exported
	err    error
}

// ingestCorpus ingests files uninterrupted into base/ingest/data and exports the documents'
// text to base/export.
func ingestCorpus(ctx context.Context, base string, files []string) *corpusRun {
	r := &corpusRun{work: filepath.Join(base, "ingest")}
	data := filepath.Join(r.work, "data")
	start := time.Now()
	out, peak, err := runMeasured(ctx, append([]string{"ingest", "--data", data}, files...)...)
	r.out, r.peakMB, r.took = out, peak, time.Since(start)
	if err != nil {
		r.err = fmt.Errorf("uninterrupted ingest: %v\n%s", err, tail(out))
		return r
	}
	r.ex, r.err = exportTo(ctx, data, filepath.Join(base, "export"), "text")
	return r
}

// The package's one uninterrupted run of the whole corpus: TestCorpus checks it against
// expected.json, TestCorpusCrashLoop compares its kill-looped run with it. Whichever asks
// first runs it; the other waits for it.
var (
	corpusRefOnce sync.Once
	corpusRef     *corpusRun
	packageTemp   string // made and removed by TestMain
)

func corpusReference() *corpusRun {
	corpusRefOnce.Do(func() {
		files, err := os.ReadDir(filepath.Join(corpusDir, "files"))
		if err != nil {
			corpusRef = &corpusRun{err: err}
			return
		}
		var args []string
		for _, f := range files {
			if f.Type().IsRegular() {
				args = append(args, filepath.Join(corpusDir, "files", f.Name()))
			}
		}
		sort.Strings(args)
		corpusRef = ingestCorpus(context.Background(), filepath.Join(packageTemp, "corpus-reference"), args)
	})
	return corpusRef
}

// TestCorpusCrashLoop: the whole public corpus, its 20,000-entry zip included, under 50
// SIGKILLs of the real binary at random 0.3–3 s moments (seeded; the seed is logged, and
// SLUICE_TEST_CRASH_SEED replays one), each followed by the same `sluice ingest`, then one run to
// the end. Its export must equal the uninterrupted run's (TestCorpus's) byte for byte, item ids
// aside; a difference names the missing and duplicated documents.
//
// An unpack of the 20,000-entry zip takes longer than the interval between kills: before unpack
// resumed after its committed children and a lost attempt that made progress went uncounted, the
// zip ended "unpack failed 13 times: worker lost" and thousands of documents were missing.
// The crashed run starts at once, beside the reference run, not after it.
func TestCorpusCrashLoop(t *testing.T) {
	// In the suite it pushed the e2e package past CI's 30-minute timeout on the 2-core machine
	// (2026-11-27: the package at 30 min, still in TestCorpusSearch), so it runs by make crashloop.
	if os.Getenv("SLUICE_TEST_CORPUS_CRASH") != "1" {
		t.Skip("the 50-kill corpus crash loop runs with make crashloop (SLUICE_TEST_CORPUS_CRASH=1)")
	}
	t.Parallel()
	dir, _ := loadCorpus(t)
	files := corpusArgs(t, dir, nil)
	var tools []string
	for _, f := range files {
		tools = append(tools, toolsFor(filepath.Base(f))...)
	}
	skipWithoutTools(t, tools)
	refc := make(chan *corpusRun, 1)
	go func() { refc <- corpusReference() }()

	const kills = 50
	seed := time.Now().UnixNano()
	if s := os.Getenv("SLUICE_TEST_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SLUICE_TEST_CRASH_SEED: %v", err)
		}
	}
	t.Logf("seed %d (SLUICE_TEST_CRASH_SEED=%d replays these kill moments)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	crashed := filepath.Join(t.TempDir(), "crashed")
	args := append([]string{"ingest", "--data", crashed}, files...)
	start := time.Now()
	made, _ := killLoop(t, args, kills, func() time.Duration {
		return 300*time.Millisecond + time.Duration(rng.Int64N(int64(2700*time.Millisecond)))
	})
	if out, err := runSluice(t.Context(), args...).CombinedOutput(); err != nil {
		t.Fatalf("final run after %d kills: %v\n%s", made, err, tail(out))
	}
	t.Logf("%d kills and the final run: %s", made, time.Since(start).Round(time.Millisecond))
	if made < kills {
		t.Errorf("the job finished after %d kills; the test needs %d", made, kills)
	}
	ref := <-refc
	if ref.err != nil {
		t.Fatal(ref.err)
	}
	t.Logf("the uninterrupted run (shared with TestCorpus) took %s", ref.took.Round(time.Millisecond))
	want, got := ref.ex, export(t, crashed, "text")
	if len(want.docs) < 20001 {
		t.Fatalf("the uninterrupted run made %d documents, want at least 20001", len(want.docs))
	}
	compareExports(t, want, got, fmt.Sprintf("after %d kills (seed %d)", made, seed))
	n, err := node.Open(t.Context(), node.Config{DataDir: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	checkSearchIndex(t, n.Store)
	if !t.Failed() {
		t.Logf("%d kills; %d documents and %d errors identical to the uninterrupted run", made, len(got.docs), len(got.errors))
	}
}

// compareExports requires got's index.jsonl and errors.jsonl to equal want's byte for byte, and
// names the documents missing from got and those it holds more often than want.
func compareExports(t *testing.T, want, got *exported, when string) {
	t.Helper()
	if !bytes.Equal(want.index, got.index) {
		missing, dups := docDiff(want, got)
		t.Errorf("index.jsonl differs %s: %d documents against %d\nmissing: %s\nduplicated: %s\n%s", when,
			len(got.docs), len(want.docs), missing, dups, lineDiff(want.index, got.index))
	}
	if !bytes.Equal(want.errRaw, got.errRaw) {
		t.Errorf("errors.jsonl differs %s:\n%s", when, lineDiff(want.errRaw, got.errRaw))
	}
}

// docDiff lists, by title, the documents got lacks and those it has more of than want (at
// most 20 of each, then a count).
func docDiff(want, got *exported) (missing, dups string) {
	count := func(ex *exported) map[string]int {
		m := map[string]int{}
		for _, d := range ex.docs {
			title, _ := d["title"].(string)
			m[title]++
		}
		return m
	}
	w, g := count(want), count(got)
	var miss, dup []string
	for title, n := range w {
		if g[title] < n {
			miss = append(miss, fmt.Sprintf("%q×%d", title, n-g[title]))
		}
	}
	for title, n := range g {
		if n > w[title] {
			dup = append(dup, fmt.Sprintf("%q×%d", title, n-w[title]))
		}
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "none"
		}
		sort.Strings(xs)
		s := strings.Join(xs[:min(len(xs), 20)], ", ")
		if len(xs) > 20 {
			s += fmt.Sprintf(" and %d more", len(xs)-20)
		}
		return s
	}
	return list(miss), list(dup)
}
