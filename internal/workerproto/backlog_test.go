package workerproto_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// backlogChildren is how many children TestBacklogBoundRemote's worker streams:
// SLUICE_TEST_BACKLOG_CHILDREN sets it (100000 for the measured run in docs/performance.md).
func backlogChildren(t *testing.T) int {
	return sizeFromEnv(t, "SLUICE_TEST_BACKLOG_CHILDREN", 2000, 1)
}

// sizeFromEnv returns the number the environment variable name holds, at least least, or def
// when it is not set: the size knob of a test whose default is sized for CI.
func sizeFromEnv(t *testing.T, name string, def, least int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want a number of at least %d", name, v, least)
	}
	return n
}

// TestBacklogBoundRemote: a remote worker streams the children of an archive (2,000, ten times
// the bound, 4 KiB each, in one multipart POST) while the in-process step that processes each child is slower (it
// takes a token per child, which the test hands out). The server stops reading the POST while
// the job's backlog is at the bound: progress says "waiting for downstream", the worker's writes
// block in TCP, and the job's unprocessed items, sampled all along, never pass the bound (the
// root, whose task is the one waiting, is the slack). Every child is made once, in order. On
// each store driver.
func TestBacklogBoundRemote(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		testBacklogBoundRemote(t, open)
	})
}

func testBacklogBoundRemote(t *testing.T, open enginetest.Open) {
	n := backlogChildren(t)
	const bound = 200
	tokens := make(chan struct{})
	b := setup(t, opts{maxBacklog: bound, tokens: tokens, idle: time.Minute, open: open})
	job := b.job(t, "archive")
	th := b.poll(t)
	var sent atomic.Int64
	errc := make(chan error, 1)
	payload := bytes.Repeat([]byte("x"), 4096)
	go func() {
		s := th.Stream(t.Context())
		for i := range n {
			if err := s.Part(fmt.Sprintf("%d.json", i), str(childJSON(fmt.Sprintf("c%06d", i)))); err != nil {
				errc <- err
				return
			}
			blob := append(fmt.Appendf(nil, "%06d", i), payload...)
			if err := s.Part(fmt.Sprintf("%d.blob", i), bytes.NewReader(blob)); err != nil {
				errc <- err
				return
			}
			sent.Store(int64(i + 1))
		}
		if err := s.Part("done", str("")); err != nil {
			errc <- err
			return
		}
		errc <- s.Close()
	}()

	b.waitDownstream(t, job)
	if got := countUnprocessed(t, b.db, job.ID); got > bound+1 {
		t.Fatalf("%d items unprocessed while the POST waits, want at most %d", got, bound+1)
	}
	if a := sent.Load(); n >= 5000 && a >= int64(n) {
		// The kernel's socket buffers hold some of the body, not 20 MB of it.
		t.Errorf("the worker sent all %d children while the server waited: its POST was read on", a)
	}

	stop := make(chan struct{})
	go func() {
		for {
			select {
			case tokens <- struct{}{}:
			case <-stop:
				return
			}
		}
	}()
	defer close(stop)
	peak, samples := 0, 0
	var rss []float64
	// The rate is the children committed per second once downstream runs: the server's, as long
	// as the downstream step keeps up (it takes tokens as fast as it runs).
	start, made := time.Now(), b.root(t, job).NChildren
	first := made
	milestone := n / 10
	poll.Until(t, 60*time.Minute, "the job to end", func() (bool, string) {
		peak = max(peak, countUnprocessed(t, b.db, job.ID))
		if samples++; samples%50 == 0 {
			rss = append(rss, rssMB())
			if n > 5000 {
				made = b.root(t, job).NChildren
			}
		}
		if n > 5000 && made >= milestone {
			t.Logf("%d of %d children made (%.0f/s), %d unprocessed, RSS %.1f MB, heap in use %.1f MB", made, n,
				float64(made-first)/time.Since(start).Seconds(), countUnprocessed(t, b.db, job.ID), rssMB(), heapMB())
			milestone = (made/(n/10) + 1) * (n / 10)
		}
		j, err := b.e.Job(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State != record.JobRunning, fmt.Sprintf("%s, %d of %d sent", j.State, sent.Load(), n)
	})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d children, bound %d: at most %d items unprocessed in %d samples; the process's RSS from %.1f to %.1f MB in %d samples, %.1f MB at the end; %d children in %s once downstream ran (%.0f/s)",
		n, bound, peak, samples, slices.Min(rss), slices.Max(rss), len(rss), rssMB(), n-first, took.Round(time.Second), float64(n-first)/took.Seconds())
	if peak > bound+1 {
		t.Errorf("%d items unprocessed at a sample, want at most %d (the bound and the root)", peak, bound+1)
	}
	root := b.root(t, job)
	kids := b.children(t, root)
	if len(kids) != n || root.NChildren != n || root.Error != "" {
		t.Fatalf("%d children, n_children %d, error %q; want %d", len(kids), root.NChildren, root.Error, n)
	}
	for i, k := range kids {
		if k.Ordinal != i || k.Name != fmt.Sprintf("c%06d", i) || k.State != record.ItemIngested {
			t.Fatalf("child %d: ordinal %d %q %s", i, k.Ordinal, k.Name, k.State)
		}
	}
}

// countUnprocessed counts the job's items not yet processed, at any depth.
func countUnprocessed(t *testing.T, db store.Executor, jobID int64) int {
	t.Helper()
	n, err := db.ItemCountBacklog(t.Context(), store.ItemCountBacklogParams{JobID: jobID, Depth: -1, Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rssMB is the process's resident set (the server, its worker and the test's worker are all
// in it), in MB; 0 where /proc is not there.
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// heapMB is the process's heap in use, in MB.
func heapMB() float64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// TestCancelWhileWaitingForDownstream: a multipart POST that waits at the backlog bound when its
// job is canceled is let finish and answered 404, like any canceled POST. The wait's count ran on
// the request's context, which the cancel ends: its error was answered 500, which cut the POST
// (TestCancel's "open multipart let finish" failed so in CI, the parts after the cancel arriving
// while the first child waited for its admission).
func TestCancelWhileWaitingForDownstream(t *testing.T) {
	t.Parallel()
	const bound = 2
	// No token is ever given: downstream never runs, and the POST waits at the bound.
	b := setup(t, opts{maxBacklog: bound, tokens: make(chan struct{}), idle: time.Minute})
	job := b.job(t, "archive")
	th := b.poll(t)
	s := th.Stream(t.Context())
	errc := make(chan error, 1)
	go func() {
		for i := range 20 {
			if err := s.Part(fmt.Sprintf("%d.json", i), str(childJSON(fmt.Sprintf("c%02d", i)))); err != nil {
				errc <- fmt.Errorf("part %d.json: %w", i, err)
				return
			}
			if err := s.Part(fmt.Sprintf("%d.blob", i), str(fmt.Sprintf("child %d", i))); err != nil {
				errc <- fmt.Errorf("part %d.blob: %w", i, err)
				return
			}
		}
		// The worker goes on writing, unaware of the cancel: more than any buffer holds.
		for i := range 2000 {
			if err := s.Part("heartbeat", strings.NewReader(strings.Repeat("h", 1024))); err != nil {
				errc <- fmt.Errorf("heartbeat %d: %w", i, err)
				return
			}
		}
		if err := s.Part("done", nil); err != nil {
			errc <- fmt.Errorf("done: %w", err)
			return
		}
		errc <- s.Close()
	}()
	b.waitDownstream(t, job)
	if err := b.e.Cancel(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, workerproto.ErrGone) {
		t.Fatalf("the POST waiting at the bound when its job was canceled: %v, want it let finish and answered 404", err)
	}
}

// waitDownstream waits until job's open POST waits at the backlog bound for downstream work.
func (b *bundle) waitDownstream(t *testing.T, job *record.Job) {
	t.Helper()
	poll.Until(t, 2*time.Minute, "the POST to wait for downstream", func() (bool, string) {
		p, err := b.e.Progress(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return p.Downstream, fmt.Sprintf("%+v", p)
	})
}
