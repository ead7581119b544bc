package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// The package's two runs of the whole corpus, started by TestMain (startCorpusRuns) before the
// first test so that they go on beside all the others: the uninterrupted one, which TestCorpus
// checks against expected.json, and the kill-looped one, which TestCorpusCrashLoop compares with
// it. A test that finds its run not started (go test -run chose it but startCorpusRuns did not
// see that) starts it itself.
var (
	packageTemp string          // made and removed by TestMain
	packageCtx  context.Context // cancelled by TestMain when the tests have run
	corpusRefs  = newOnce[*corpusRun]()
	crashes     struct {
		sync.Mutex
		next *crashedRun // started in advance, not yet taken by a TestCorpusCrashLoop
		n    int
	}
)

// once runs a function once and hands its result to every caller, waiting for it.
type once[T any] struct {
	start sync.Once
	done  chan struct{}
	v     T
}

func newOnce[T any]() *once[T] { return &once[T]{done: make(chan struct{})} }

// get starts f if nobody has and waits for its result.
func (o *once[T]) get(f func() T) T {
	o.begin(f)
	<-o.done
	return o.v
}

// begin starts f in the background if nobody has.
func (o *once[T]) begin(f func() T) {
	o.start.Do(func() { go func() { o.v = f(); close(o.done) }() })
}

// corpusFiles lists the corpus files as command-line arguments (each file a root named by its
// base name), sorted.
func corpusFiles() ([]string, error) {
	return listFiles(filepath.Join(corpusDir, "files"), nil)
}

// corpusTools lists the converters the whole corpus needs.
func corpusTools(files []string) []string {
	var tools []string
	for _, f := range files {
		tools = append(tools, toolsFor(filepath.Base(f))...)
	}
	return tools
}

func corpusReference() *corpusRun {
	return corpusRefs.get(referenceRun)
}

func referenceRun() *corpusRun {
	files, err := corpusFiles()
	if err != nil {
		return &corpusRun{err: err}
	}
	return ingestCorpus(packageCtx, filepath.Join(packageTemp, "corpus-reference"), files)
}

// startCorpusRuns starts the corpus runs the selected tests will wait for, when every converter
// they need is installed (otherwise the tests skip or fail without them). Called by TestMain
// once the flags are parsed.
func startCorpusRuns() {
	if testing.Short() || flag.Lookup("test.list").Value.String() != "" ||
		!selected("TestCorpus") && !selected("TestCorpusCrashLoop") {
		return
	}
	files, err := corpusFiles()
	if err != nil || len(missingTools(corpusTools(files))) > 0 {
		return
	}
	corpusRefs.begin(referenceRun)
	if selected("TestCorpusCrashLoop") {
		crashes.Lock()
		crashes.next = startCrash(files)
		crashes.Unlock()
	}
}

// selected reports whether go test's -run and -skip select the top-level test name. It reads
// only the patterns' first element (the top level), which is all a guess needs: a test its
// run's start was not guessed for starts the run itself.
func selected(name string) bool {
	match := func(flagName string) (bool, bool) {
		f := flag.Lookup(flagName)
		if f == nil || f.Value.String() == "" {
			return false, false
		}
		first, _, _ := strings.Cut(f.Value.String(), "/")
		ok, err := regexp.MatchString(first, name)
		return ok && err == nil, true
	}
	run, set := match("test.run")
	skip, _ := match("test.skip")
	return (run || !set) && !skip
}

// widenParallel lets two more tests than go test's default (GOMAXPROCS) run in parallel, unless
// -parallel was given: TestCorpus and TestCorpusCrashLoop each hold a slot while they wait for
// their runs, which go on in the background.
func widenParallel() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(runtime.GOMAXPROCS(0)+2))
	}
}

// The corpus crash loop's kills: 50 at random 0.3–3 s moments, as issue #16 asks, and 10 early
// ones at 20–300 ms, in the start-up, job creation and root recording of a run and in the reclaim
// of a restarted one. The first kill is an early one: it lands in the first run's job creation.
const (
	corpusKills = 50
	earlyKills  = 10
)

// crashedRun is a kill-looped ingest of the whole corpus, run in the background.
type crashedRun struct {
	data  string
	seed  int64
	start time.Time
	done  chan struct{}
	kills int // made
	took  time.Duration
	err   error
}

// startCrash starts a kill-looped ingest of files with a new seed (or SLUICE_TEST_CRASH_SEED's)
// into a data dir of its own.
func startCrash(files []string) *crashedRun {
	crashes.n++
	r := &crashedRun{data: filepath.Join(packageTemp, fmt.Sprintf("corpus-crashed-%d", crashes.n)),
		seed: time.Now().UnixNano(), start: time.Now(), done: make(chan struct{})}
	if s := os.Getenv("SLUICE_TEST_CRASH_SEED"); s != "" {
		var err error
		if r.seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			r.err = fmt.Errorf("SLUICE_TEST_CRASH_SEED: %v", err)
			close(r.done)
			return r
		}
	}
	go func() {
		defer close(r.done)
		defer func() { r.took = time.Since(r.start) }()
		args := append([]string{"ingest", "--data", r.data}, files...)
		var finished bool
		r.kills, finished, r.err = killLoop(packageCtx, args, crashDelays(r.seed))
		if r.err != nil {
			return
		}
		if finished {
			r.err = fmt.Errorf("the job finished after %d kills; the test needs %d", r.kills, corpusKills+earlyKills)
			return
		}
		if out, err := runSluice(packageCtx, args...).CombinedOutput(); err != nil {
			r.err = fmt.Errorf("final run after %d kills: %v\n%s", r.kills, err, tail(out))
		}
	}()
	return r
}

// crashDelays returns the kill moments of a seed: corpusKills at 0.3–3 s and earlyKills at
// 20–300 ms after each run's start, in a random order that begins with an early one.
func crashDelays(seed int64) []time.Duration {
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	var d []time.Duration
	for range earlyKills {
		d = append(d, 20*time.Millisecond+time.Duration(rng.Int64N(int64(280*time.Millisecond))))
	}
	for range corpusKills {
		d = append(d, 300*time.Millisecond+time.Duration(rng.Int64N(int64(2700*time.Millisecond))))
	}
	// The first stays first (an early one); the others in a random order.
	rng.Shuffle(len(d)-1, func(i, j int) { d[i+1], d[j+1] = d[j+1], d[i+1] })
	return d
}

// takeCrash returns the crashed run started in advance, or starts one (the first
// TestCorpusCrashLoop of the package takes the advance run; -count's repeats each start a new
// one, with a new seed).
func takeCrash(t *testing.T) *crashedRun {
	t.Helper()
	crashes.Lock()
	defer crashes.Unlock()
	if r := crashes.next; r != nil {
		crashes.next = nil
		return r
	}
	files, err := corpusFiles()
	if err != nil {
		t.Fatal(err)
	}
	return startCrash(files)
}

// TestCorpusCrashLoop: the whole public corpus, its 20,000-entry zip included, under 50
// SIGKILLs of the real binary at random 0.3–3 s moments and 10 at 20–300 ms (seeded; the seed is
// logged, and SLUICE_TEST_CRASH_SEED replays one), each followed by the same `sluice ingest`,
// then one run to the end. Its export must equal the uninterrupted run's (TestCorpus's) byte for
// byte, item ids aside; a difference names the missing and duplicated documents. The search
// index must hold exactly the documents.
//
// An unpack of the 20,000-entry zip takes longer than the interval between kills: before unpack
// resumed after its committed children and a lost attempt that made progress went uncounted, the
// zip ended "unpack failed 13 times: worker lost" and thousands of documents were missing.
// Both runs start with the package (TestMain), beside each other and the other tests.
func TestCorpusCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop: skipped in -short")
	}
	t.Parallel()
	files, err := corpusFiles()
	if err != nil {
		t.Fatalf("the shared corpus is missing: %v", err)
	}
	skipWithoutTools(t, corpusTools(files))
	r := takeCrash(t)
	t.Cleanup(func() { os.RemoveAll(r.data) })
	t.Logf("seed %d (SLUICE_TEST_CRASH_SEED=%d replays these kill moments)", r.seed, r.seed)
	// Inside go test's 30 minutes, so that a hung run fails here, with its seed, instead of in
	// the timeout's panic.
	select {
	case <-r.done:
	case <-time.After(time.Until(r.start.Add(25 * time.Minute))):
		t.Fatalf("the crashed run (seed %d) has not ended 25 minutes after its start", r.seed)
	}
	if r.err != nil {
		t.Fatalf("seed %d: %v", r.seed, r.err)
	}
	t.Logf("%d kills and the final run: %s", r.kills, r.took.Round(time.Millisecond))
	if left := leftovers(r.data); len(left) > 0 {
		// Converters of killed runs that outlived them (issue #16: a sandbox killed while it was
		// being set up ran its tool on, re-parented to pid 1, out of reach of the group kill).
		// Each converter now dies with its Sluice, and what a death within microseconds of a
		// fork leaves is reaped by the next run on the data dir (internal/subprocess records).
		t.Errorf("%d processes of the crashed runs outlived them (now killed):\n%s", len(left), strings.Join(left, "\n"))
	}
	ref := corpusReference()
	if ref.err != nil {
		t.Fatal(ref.err)
	}
	t.Logf("the uninterrupted run (shared with TestCorpus) took %s", ref.took.Round(time.Millisecond))
	want, got := ref.ex, export(t, r.data, "text")
	if len(want.docs) < 20001 {
		t.Fatalf("the uninterrupted run made %d documents, want at least 20001", len(want.docs))
	}
	compareExports(t, want, got, fmt.Sprintf("after %d kills (seed %d)", r.kills, r.seed))
	n, err := node.Open(t.Context(), node.Config{DataDir: r.data})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	checkSearchIndex(t, n.Store)
	if !t.Failed() {
		t.Logf("%d kills; %d documents and %d errors identical to the uninterrupted run", r.kills, len(got.docs), len(got.errors))
	}
}

// leftovers SIGKILLs the processes whose command line names dir (the runs' converters and
// their sandboxes; every sluice run on dir has ended) and describes each.
func leftovers(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pid == os.Getpid() {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		out = append(out, fmt.Sprintf("pid %d: %s", pid, cmd[:min(len(cmd), 200)]))
	}
	return out
}

// killLoop runs the binary with args and SIGKILLs its process group after each of delays,
// starting it again after each kill. It returns how many kills it made and whether a run
// finished before its kill (the job is done: later kills would test nothing).
func killLoop(ctx context.Context, args []string, delays []time.Duration) (int, bool, error) {
	for n, d := range delays {
		cmd := runSluice(ctx, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return n, false, err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				return n, false, fmt.Errorf("run %d failed before its kill: %v\n%s", n, err, tail(out.Bytes()))
			}
			return n, true, nil
		case <-time.After(d):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if err := ctx.Err(); err != nil {
			return n, false, errors.New("the tests ended before the crash loop")
		}
	}
	return len(delays), false, nil
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

// TestCrashDelays: a seed's kill moments are 10 at 20–300 ms, the first of them first, and 50 at
// 0.3–3 s, the same again for the same seed (SLUICE_TEST_CRASH_SEED replays a run).
func TestCrashDelays(t *testing.T) {
	t.Parallel()
	for _, seed := range []int64{1, 42, time.Now().UnixNano()} {
		d := crashDelays(seed)
		if d[0] >= 300*time.Millisecond {
			t.Errorf("seed %d: the first kill at %s, want an early one", seed, d[0])
		}
		var early, late int
		for _, x := range d {
			switch {
			case x >= 20*time.Millisecond && x < 300*time.Millisecond:
				early++
			case x >= 300*time.Millisecond && x < 3*time.Second:
				late++
			default:
				t.Errorf("seed %d: a kill at %s", seed, x)
			}
		}
		if early != earlyKills || late != corpusKills {
			t.Errorf("seed %d: %d early kills and %d at 0.3–3 s, want %d and %d", seed, early, late, earlyKills, corpusKills)
		}
		if again := crashDelays(seed); fmt.Sprint(again) != fmt.Sprint(d) {
			t.Errorf("seed %d: another sequence the second time", seed)
		}
	}
}
