package watch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/watch"
)

const workflow = "name: inbox\nsteps:\n  a: {action: noop, needs: [start]}\n"

// clock is a test's clock, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type setup struct {
	kit   *enginetest.Kit
	dir   string
	clock *clock
}

func newSetup(t *testing.T, open enginetest.Open) *setup {
	t.Helper()
	k := enginetest.Start(t, open, basic.NewNoop())
	k.ApplyWorkflow(t, workflow)
	if err := watch.Register(t.Context(), k.Engine); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "inbox")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &setup{kit: k, dir: dir, clock: &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
}

// watcher returns a watcher of s.dir with the settle time and edits.
func (s *setup) watcher(t *testing.T, settle time.Duration, edit func(*watch.Config)) *watch.Watcher {
	t.Helper()
	cfg := watch.Config{Location: s.dir, Workflow: "inbox", Settle: settle, Engine: s.kit.Engine, Blobs: s.kit.Blobs,
		Records: s.kit.Store, DB: s.kit.Store, Now: s.clock.Now}
	if edit != nil {
		edit(&cfg)
	}
	w, err := watch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func scan(t *testing.T, w *watch.Watcher) watch.Result {
	t.Helper()
	r, err := w.Scan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// WatchJobs returns, per root name, how many roots the watch jobs in db have under that name,
// and the number of watch jobs.
func watchJobs(t *testing.T, db store.Store) (roots map[string]int, jobs int) {
	t.Helper()
	ctx := t.Context()
	roots = map[string]int{}
	var zero int64
	after := int64(0)
	for {
		js, err := db.JobList(ctx, store.JobListParams{AfterID: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			if !strings.HasPrefix(j.Key, "watch:") {
				continue
			}
			jobs++
			items, err := db.ItemList(ctx, store.ItemListParams{JobID: j.ID, ParentID: &zero, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				roots[it.Name]++
			}
		}
		if len(js) < 500 {
			return roots, jobs
		}
		after = js[len(js)-1].ID
	}
}

// TestFolderSettlesThenTakesOnce drops files into a folder: a file becomes a job only once its
// size and time held for the settle time, exactly once however often it is scanned, also by a
// new watcher (a restart); hidden files are left alone; a rewritten file is a new one.
func TestFolderSettlesThenTakesOnce(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		s := newSetup(t, open)
		w := s.watcher(t, 2*time.Second, nil)
		write(t, filepath.Join(s.dir, "a.txt"), "alpha")
		write(t, filepath.Join(s.dir, "sub", "b.txt"), "beta")
		write(t, filepath.Join(s.dir, ".partial"), "being copied")
		if r := scan(t, w); r.Taken != 0 || r.Waiting != 2 {
			t.Fatalf("first sight: %+v, want 2 waiting", r)
		}
		s.clock.add(time.Second)
		write(t, filepath.Join(s.dir, "sub", "b.txt"), "beta, longer") // still being written
		if r := scan(t, w); r.Taken != 0 {
			t.Fatalf("before the settle time: %+v", r)
		}
		s.clock.add(time.Second)
		if r := scan(t, w); r.Taken != 1 || r.Waiting != 1 {
			t.Fatalf("a.txt settled, b.txt changed a second ago: %+v", r)
		}
		s.clock.add(time.Second)
		if r := scan(t, w); r.Taken != 1 || r.Waiting != 0 {
			t.Fatalf("b.txt settled: %+v", r)
		}
		if r := scan(t, w); r.Taken != 0 {
			t.Fatalf("a scan of nothing new took %d", r.Taken)
		}
		// A restarted watcher has forgotten everything but the database.
		again := s.watcher(t, 2*time.Second, nil)
		scan(t, again)
		s.clock.add(2 * time.Second)
		scan(t, again)
		roots, jobs := watchJobs(t, s.kit.Store)
		if jobs != 2 || roots["a.txt"] != 1 || roots["sub/b.txt"] != 1 {
			t.Fatalf("jobs %d, roots %v: want one job and one root per file", jobs, roots)
		}
		// Rewritten: another file by the same name.
		write(t, filepath.Join(s.dir, "a.txt"), "alpha, second edition")
		scan(t, w)
		s.clock.add(2 * time.Second)
		if r := scan(t, w); r.Taken != 1 {
			t.Fatalf("rewritten a.txt: %+v", r)
		}
		if roots, jobs = watchJobs(t, s.kit.Store); jobs != 3 || roots["a.txt"] != 2 {
			t.Fatalf("after a rewrite: jobs %d, roots %v", jobs, roots)
		}
	})
}

// TestFolderMoveDone moves taken files to done/ (then ignored), or to a done folder elsewhere,
// keeping their relative paths and not overwriting a file of the same name there.
func TestFolderMoveDone(t *testing.T) {
	t.Parallel()
	s := newSetup(t, drivertest.OpenSQLite)
	w := s.watcher(t, -1, func(c *watch.Config) { c.MoveDone = true })
	write(t, filepath.Join(s.dir, "x", "a.txt"), "alpha")
	if r := scan(t, w); r.Taken != 1 {
		t.Fatalf("scan: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "done", "x", "a.txt")); err != nil {
		t.Fatalf("a.txt not in done/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "x", "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("a.txt still in the inbox: %v", err)
	}
	write(t, filepath.Join(s.dir, "x", "a.txt"), "alpha again, new content")
	if r := scan(t, w); r.Taken != 1 {
		t.Fatalf("second a.txt: %+v", r)
	}
	ents, _ := os.ReadDir(filepath.Join(s.dir, "done", "x"))
	if len(ents) != 2 {
		t.Fatalf("done/x holds %d files, want both a.txt", len(ents))
	}
	inbox2, elsewhere := filepath.Join(t.TempDir(), "inbox2"), filepath.Join(t.TempDir(), "processed")
	write(t, filepath.Join(inbox2, "c.txt"), "gamma")
	w2 := s.watcher(t, -1, func(c *watch.Config) { c.Location, c.DoneDir = inbox2, elsewhere })
	if r := scan(t, w2); r.Taken != 1 {
		t.Fatalf("scan with a done folder: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "c.txt")); err != nil {
		t.Fatalf("c.txt not moved: %v", err)
	}
	if roots, jobs := watchJobs(t, s.kit.Store); jobs != 3 || roots["x/a.txt"] != 2 || roots["c.txt"] != 1 {
		t.Fatalf("jobs %d, roots %v", jobs, roots)
	}
}

// TestFolderTwoWatchers runs two watchers of one folder at once, each scanning as fast as it
// can while files arrive: every file becomes exactly one job with one root.
func TestFolderTwoWatchers(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		s := newSetup(t, open)
		const n = 60
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var wg sync.WaitGroup
		for range 2 {
			w := s.watcher(t, -1, nil)
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, err := w.Scan(ctx); err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
				}
			})
		}
		// Without a settle time a file is taken as it is seen: each arrives whole (renamed into
		// the folder), or a watcher could take it empty between its creation and its write —
		// a version of its own, rightly another job.
		staging := t.TempDir()
		for i := range n {
			name := fmt.Sprintf("f%03d.txt", i)
			write(t, filepath.Join(staging, name), fmt.Sprintf("file %d", i))
			if err := os.Rename(filepath.Join(staging, name), filepath.Join(s.dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		poll.Until(t, 60*time.Second, "a job for every file", func() (bool, string) {
			roots, jobs := watchJobs(t, s.kit.Store)
			return len(roots) == n, fmt.Sprintf("%d jobs, %d names", jobs, len(roots))
		})
		cancel()
		wg.Wait()
		roots, jobs := watchJobs(t, s.kit.Store)
		if jobs != n || len(roots) != n {
			t.Fatalf("%d jobs, %d names, want %d", jobs, len(roots), n)
		}
		for name, c := range roots {
			if c != 1 {
				t.Errorf("%s: %d roots", name, c)
			}
		}
	})
}

// TestFolderFinishesAnInterruptedTake starts a file's job as a watcher killed after creating
// it would leave it (no root, not sealed): the next watcher adds the root and seals it, and
// the job completes.
func TestFolderFinishesAnInterruptedTake(t *testing.T) {
	t.Parallel()
	s := newSetup(t, drivertest.OpenSQLite)
	write(t, filepath.Join(s.dir, "a.txt"), "alpha")
	st, _ := os.Stat(filepath.Join(s.dir, "a.txt"))
	key := watch.JobKey(s.dir, "a.txt", st.Size(), fmt.Sprint(st.ModTime().UnixNano()))
	sub, err := s.kit.Engine.Submit(t.Context(), engine.SubmitParams{Workflow: "inbox", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	w := s.watcher(t, -1, nil)
	if r := scan(t, w); r.Taken != 1 {
		t.Fatalf("scan: %+v", r)
	}
	j := s.kit.WaitJob(t, sub.Job().ID, 30*time.Second)
	if j.State != "complete" {
		t.Fatalf("job %d %s", j.ID, j.State)
	}
	if roots, jobs := watchJobs(t, s.kit.Store); jobs != 1 || roots["a.txt"] != 1 {
		t.Fatalf("jobs %d, roots %v", jobs, roots)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	c, err := watch.Parse("inbox", "file:///srv/inbox?workflow=documents&settle=500ms&move-done=true")
	if err != nil {
		t.Fatal(err)
	}
	if c.Location != "/srv/inbox" || c.Workflow != "documents" || c.Settle != 500*time.Millisecond || !c.MoveDone || c.Name != "inbox" {
		t.Fatalf("config = %+v", c)
	}
	c, err = watch.Parse("drop", "s3://media/drop/video?workflow=w&tag-done=1&settle=0&rescan=1m")
	if err != nil {
		t.Fatal(err)
	}
	if c.Location != "s3://media/drop/video" || !c.TagDone || c.Settle >= 0 || c.Rescan != time.Minute {
		t.Fatalf("config = %+v", c)
	}
	for _, bad := range []string{"file:///x", "file://host/x?workflow=w", "s3://b/p?workflow=w&settle=soon", "s3://b?workflow=w&move-done=perhaps", "ftp://x/y?workflow=w"} {
		if _, err := watch.Parse("x", bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if !watch.IsURL("file:///x") || !watch.IsURL("s3://b/p") || watch.IsURL("webhook:?workflow=w") {
		t.Error("IsURL")
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	s := newSetup(t, drivertest.OpenSQLite)
	for _, tc := range []struct {
		name string
		edit func(*watch.Config)
		want string
	}{
		{"missing folder", func(c *watch.Config) { c.Location = filepath.Join(s.dir, "nope") }, "no such file or directory"},
		{"a file", func(c *watch.Config) {
			write(t, filepath.Join(s.dir, "f"), "x")
			c.Location = filepath.Join(s.dir, "f")
		}, "not a directory"},
		{"tag a folder", func(c *watch.Config) { c.TagDone = true }, "tag-done is for S3"},
		{"done is the folder", func(c *watch.Config) { c.DoneDir = s.dir }, "the watched folder itself"},
	} {
		cfg := watch.Config{Location: s.dir, Workflow: "inbox", Engine: s.kit.Engine, Blobs: s.kit.Blobs, Records: s.kit.Store, DB: s.kit.Store}
		tc.edit(&cfg)
		if _, err := watch.New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
