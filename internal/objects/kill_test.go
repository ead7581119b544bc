package objects_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// childEnv carries the child's store ("sqlite PATH" or "postgres SCHEMA URL"), after its blob
// and files directories: "BLOBS FILES sqlite PATH".
const childEnv = "SLUICE_OBJECTS_CHILD"

const (
	killRows = 200
	killKey  = "objects-kill"
)

// killSheet writes killRows small, distinct PNGs and a sheet of 20 works of 10 file sets:
// the first of every other work an access image (digests, EXIF, preservation copy, transcription, pyramid
// TIFF and thumbnail), the others supplemental files (digests and preservation copy).
func killSheet(t testing.TB) (dir, sheet string) {
	dir = t.TempDir()
	var b strings.Builder
	b.WriteString(strings.Join(objects.Headers, ",") + "\n")
	for i := range killRows {
		img := image.NewRGBA(image.Rect(0, 0, 24, 16))
		for p := range img.Pix {
			img.Pix[p] = byte(p*7 + i*13)
		}
		img.Set(0, 0, color.RGBA{byte(i), byte(i >> 8), 1, 255})
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("k%03d.png", i)
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		role := "S"
		if i%20 == 0 {
			role = "A"
		}
		fmt.Fprintf(&b, "IMAGE,kw%02d,kf%03d,%s,a description,%s,a label,,\n", i/10, i, name, role)
	}
	return dir, b.String()
}

// TestSheetSurvivesKill runs a 200-row sheet in a child process (this test binary), SIGKILLs it
// three times while file sets run, restarts it and runs the sheet to its end, on every driver;
// then runs the same sheet uninterrupted in this process. Every side effect is there exactly
// once — preservation copies and derivatives in the blob store, derivative and action-state
// rows — and the interrupted sheet's end state equals the uninterrupted one's.
func TestSheetSurvivesKill(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "vips", "vipsthumbnail", "exiftool")
	files, sheet := killSheet(t)
	if err := os.WriteFile(filepath.Join(files, "sheet.csv"), []byte(sheet), 0o644); err != nil {
		t.Fatal(err)
	}
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		blobDir := filepath.Join(t.TempDir(), "blobs")
		where, reopen := enginetest.ChildStore(t)
		env := blobDir + " " + files + " " + where
		for i, after := range []int{150, 350, 550} {
			if runKillChild(t, env, after) {
				t.Fatalf("the sheet ended before kill %d", i+1)
			}
		}
		if !runKillChild(t, env, 0) {
			t.Fatal("the last run ended without the sheet")
		}
		db := reopen()
		blobs, err := blob.OpenDir(blobDir, blob.DirOptions{})
		if err != nil {
			t.Fatal(err)
		}
		job, err := db.JobGetByKey(t.Context(), killKey)
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, Limit: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		retried := 0
		for _, tk := range tasks {
			if tk.Attempt > 1 {
				retried++
			}
		}
		if retried == 0 {
			t.Error("no task ran twice: the kills interrupted no attempt")
		}
		killed := summarize(t, db, blobs, job.ID)

		// The same sheet, uninterrupted, in this process.
		kit := startObjects(t, open)
		id, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "sheet.csv", CSV: strings.NewReader(sheet), FilesDir: files})
		if err != nil {
			t.Fatal(err)
		}
		waitSheet(t, kit, id, objects.StatusAwaitingApproval)
		if err := objects.Approve(t.Context(), kit.Engine, id); err != nil {
			t.Fatal(err)
		}
		waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError)
		clean := summarize(t, kit.Store, kit.Blobs, id)

		if killed.status != objects.StatusCompleted {
			t.Errorf("killed sheet %s, want completed", killed.status)
		}
		if want := 10*(3+7) + 190*(3+3); killed.states != want {
			t.Errorf("%d action states, want %d", killed.states, want)
		}
		if killed.derivatives != 10 || killed.fileSets != killRows || len(killed.blobs) != 1+killRows+10+10 {
			t.Errorf("%d derivatives (want 10), %d file sets (want %d), %d blobs (want the sheet, %d copies, 10 pyramids, 10 thumbnails)",
				killed.derivatives, killed.fileSets, killRows, len(killed.blobs), killRows)
		}
		if killed.String() != clean.String() {
			t.Errorf("killed run differs from the uninterrupted one:\nkilled %s\nclean  %s", killed, clean)
		}
		t.Logf("%d of %d tasks ran more than once; %s", retried, len(tasks), killed)
	})
}

// outcome is what a sheet's run left: counts and a digest of every row that tells.
type outcome struct {
	status                                 string
	fileSets, states, derivatives, history int
	blobs                                  []string
	rows                                   []string
}

func (o outcome) String() string {
	rows := sha256.Sum256([]byte(strings.Join(o.rows, "\n")))
	blobs := sha256.Sum256([]byte(strings.Join(o.blobs, "\n")))
	return fmt.Sprintf("status %s, %d file sets, %d action states, %d history rows, %d derivatives, %d blobs (digest %x), %d rows (digest %x)",
		o.status, o.fileSets, o.states, o.history, o.derivatives, len(o.blobs), blobs[:6], len(o.rows), rows[:6])
}

func summarize(t *testing.T, db store.Store, blobs blob.Store, jobID int64) outcome {
	t.Helper()
	ctx := t.Context()
	x := db.DomainSQL()
	s, err := objects.NewStore(x).GetSheet(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	o := outcome{status: s.Status}
	fs, err := objects.NewStore(x).ListFileSets(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	o.fileSets = len(fs)
	for _, f := range fs {
		full, err := objects.NewStore(x).GetFileSet(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		o.states += len(full.ActionStates)
		o.derivatives += len(full.Derivatives)
		h, err := objects.NewStore(x).History(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		o.history += len(h)
		var acts []string
		for _, a := range full.ActionStates {
			acts = append(acts, a.Action+"="+a.Outcome+":"+a.Notes)
		}
		slices.Sort(acts)
		var ds []string
		for k, v := range full.Derivatives {
			ds = append(ds, k+"="+string(v))
		}
		slices.Sort(ds)
		o.rows = append(o.rows, fmt.Sprintf("%s %s %s %v %v %v %v", f.Accession, f.State, f.MimeType, f.Core["digests"],
			f.Core["preservation_sha256"], acts, ds))
	}
	err = blobs.Walk(ctx, func(sha string, _ int64, _ time.Time) error {
		o.blobs = append(o.blobs, sha)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(o.blobs)
	return o
}

// runKillChild runs the child until it has started killAfter actions, then SIGKILLs it; with 0
// it lets it run to the sheet's end. It reports whether the sheet ended.
func runKillChild(t *testing.T, env string, killAfter int) bool {
	t.Helper()
	return enginetest.RunChild(t, childEnv+"="+env, killAfter, 3*time.Minute)
}

// printing wraps an action to print a line as each of its attempts starts.
type printing struct {
	action.Action
	out func()
}

func (p printing) Run(ctx context.Context, t *action.Task, out action.Output) error {
	p.out()
	return p.Action.Run(ctx, t, out)
}

// runChild is the child process: it opens the store, starts an engine with the objects domain,
// uploads the sheet (or finds it), approves it when it awaits approval, and waits for its end.
func runChild() int {
	ctx := context.Background()
	f := strings.SplitN(os.Getenv(childEnv), " ", 3)
	db, err := enginetest.OpenChildStore(ctx, f[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer db.Close()
	if err := child(ctx, db, f[0], f[1]); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

func child(ctx context.Context, db store.Store, blobDir, files string) error {
	tmp, err := os.MkdirTemp("", "objects-child-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	blobs, err := blob.OpenDir(blobDir, blob.DirOptions{})
	if err != nil {
		return err
	}
	started := make(chan struct{}, 1024)
	go func() {
		for range started {
			fmt.Println("started")
		}
	}()
	svc := &objects.Service{}
	cat := &action.Catalog{}
	for _, a := range append(svc.Actions(), basic.NewPass()) {
		cat.Register(printing{a, func() { started <- struct{}{} }})
	}
	ended := make(chan struct{}, 1)
	var wk *worker.Worker
	e := engine.New(engine.Config{Store: db, Catalog: cat,
		OnReady:  func(qs []string) { wk.Ready(qs) },
		OnJobEnd: func(int64, record.JobState) { ended <- struct{}{} }})
	if err := objects.Register(ctx, e); err != nil {
		return err
	}
	if err := builtin.Apply(ctx, e, objects.Name); err != nil {
		return err
	}
	wk = worker.New(worker.Config{Engine: e, Blobs: blobs, TempDir: tmp, PollInterval: 20 * time.Millisecond})
	if _, err := e.Reclaim(ctx, engine.ReclaimParams{All: true}); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wk.Start(wctx)
	defer wk.Stop(context.Background())
	sheet, err := os.Open(filepath.Join(files, "sheet.csv"))
	if err != nil {
		return err
	}
	defer sheet.Close()
	id, err := objects.Upload(ctx, e, blobs, objects.UploadParams{Name: "sheet.csv", CSV: sheet, FilesDir: files, Key: killKey})
	if err != nil {
		return err
	}
	for {
		s, err := objects.NewStore(db.DomainSQL()).GetSheet(ctx, id)
		if err != nil {
			return err
		}
		if s.Status == objects.StatusAwaitingApproval {
			if err := objects.Approve(ctx, e, id); err != nil {
				return err
			}
		}
		j, err := db.JobGet(ctx, id)
		if err != nil {
			return err
		}
		if j.State != record.JobRunning {
			return nil
		}
		select {
		case <-ended:
		case <-time.After(100 * time.Millisecond):
		}
	}
}
