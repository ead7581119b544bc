package objects_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/when"
	"github.com/sluice-project/sluice/internal/workflow"
)

// TestChainTable evaluates the built-in workflow's when: conditions for every (role, MIME type)
// row of Meadow's table, and custom_actions: the chain is the table's, and at each position
// exactly one of the action's step and its "-na" pass applies, so the chain never stalls.
func TestChainTable(t *testing.T) {
	t.Parallel()
	src, _ := builtin.Source(objects.Name)
	def, err := workflow.Parse(src, "objects.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const (
		img   = "GenerateFileSetDigests ExtractExifMetadata CopyFileToPreservation"
		av    = "GenerateFileSetDigests CopyFileToPreservation ExtractMediaMetadata"
		plain = "GenerateFileSetDigests CopyFileToPreservation FileSetComplete"
	)
	for _, tc := range []struct {
		role, mime string
		custom     []string
		want       string
	}{
		{"A", "image/tiff", nil, img + " AttachTranscription CreatePyramidTiff GenerateAIMetadata FileSetComplete"},
		{"A", "image/jpeg", nil, img + " AttachTranscription CreatePyramidTiff GenerateAIMetadata FileSetComplete"},
		{"X", "image/png", nil, img + " CreatePyramidTiff FileSetComplete"},
		{"X", "application/pdf", nil, img + " CreateDerivativeCopy FileSetComplete"},
		{"X", "application/zip", nil, img + " CreateDerivativeCopy FileSetComplete"},
		{"X", "application/zip-compressed", nil, img + " CreateDerivativeCopy FileSetComplete"},
		{"P", "image/tiff", nil, img + " FileSetComplete"},
		{"A", "video/mp4", nil, av + " CreateTranscodeJob TranscodeComplete FileSetComplete"},
		{"A", "audio/mpeg", nil, av + " CreateTranscodeJob TranscodeComplete FileSetComplete"},
		{"P", "video/x-matroska", nil, av + " FileSetComplete"},
		{"P", "audio/x-wav", nil, av + " FileSetComplete"},
		{"P", "application/pdf", nil, plain},
		{"S", "image/tiff", nil, plain},
		{"S", "video/mp4", nil, plain},
		{"S", "text/plain", nil, plain},
		// Combinations the table has no chain for: InitializeDispatch fails them.
		{"A", "application/pdf", nil, "FileSetComplete"},
		{"X", "video/mp4", nil, "FileSetComplete"},
		{"Q", "image/tiff", nil, "FileSetComplete"},
		// custom_actions replace the table.
		{"A", "image/tiff", []string{"GenerateFileSetDigests", "CreatePyramidTiff"}, "GenerateFileSetDigests CreatePyramidTiff FileSetComplete"},
		{"P", "video/mp4", []string{"CopyFileToPreservation"}, "CopyFileToPreservation FileSetComplete"},
	} {
		t.Run(fmt.Sprintf("%s %s %v", tc.role, tc.mime, tc.custom), func(t *testing.T) {
			md := map[string]any{"role": tc.role}
			if tc.custom != nil {
				cs := make([]any, len(tc.custom))
				for i, c := range tc.custom {
					cs[i] = c
				}
				md["custom_actions"] = cs
			}
			it := when.Item{Depth: 2, ContentType: tc.mime, Metadata: md}
			applies := map[string]bool{}
			for _, s := range def.Steps {
				ok := s.When == ""
				if !ok {
					e, err := when.Parse(s.When)
					if err != nil {
						t.Fatalf("step %s: %v", s.Name, err)
					}
					ok = e.Eval(it)
				}
				applies[s.Name] = ok
			}
			var chain []string
			for _, c := range objects.Chain[3:] {
				for _, s := range def.Steps {
					if s.Action == c.Action && applies[s.Name] {
						chain = append(chain, c.State)
					}
				}
			}
			if got := strings.Join(chain, " "); got != tc.want {
				t.Errorf("chain\n got %s\nwant %s", got, tc.want)
			}
			for _, s := range def.Steps {
				if na, ok := strings.CutSuffix(s.Name, "-na"); ok && applies[na] == applies[s.Name] {
					t.Errorf("%s and %s both apply or neither does (%v)", na, s.Name, applies[na])
				}
			}
			for _, name := range []string{"validate-sheet", "create-file-sets", "complete-work"} {
				if applies[name] {
					t.Errorf("%s applies to a file set", name)
				}
			}
		})
	}
}

// pngFile writes a small PNG, distinct per seed.
func pngFile(t testing.TB, path string, seed int) {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 16, 12))
	for i := range img.Pix {
		img.Pix[i] = byte(i*5 + seed*31)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCustomActions uploads a sheet whose file sets carry custom_actions: an access image runs
// exactly those actions (and the initial three, and FileSetComplete), not the table's; its
// transcription (the sheet's optional column) is attached.
func TestCustomActions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pngFile(t, filepath.Join(dir, "a.png"), 1)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("Dear Sir, the print arrived today."), 0o644); err != nil {
		t.Fatal(err)
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjects(t, open)
		id, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "custom.csv", FilesDir: dir,
			CSV:           strings.NewReader(strings.Join(objects.Headers, ",") + ",transcription\nIMAGE,cw,cf,a.png,a description,A,a label,,,a.txt\n"),
			CustomActions: []string{"GenerateFileSetDigests", "CopyFileToPreservation", "AttachTranscription"}})
		if err != nil {
			t.Fatal(err)
		}
		waitSheet(t, kit, id, objects.StatusAwaitingApproval)
		if err := objects.Approve(t.Context(), kit.Engine, id); err != nil {
			t.Fatal(err)
		}
		if s := waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError); s.Status != objects.StatusCompleted {
			t.Fatalf("sheet %s", s.Status)
		}
		want := append(slices.Clone(initial), "GenerateFileSetDigests", "CopyFileToPreservation", "AttachTranscription", "FileSetComplete")
		if got := okHistory(t, kit, objects.FileSetID("cf")); !slices.Equal(got, want) {
			t.Errorf("chain %v, want %v", got, want)
		}
		// The transcription is attached: a derivative whose blob holds the file.
		f, err := objects.NewStore(kit.Store.DomainSQL()).GetFileSet(t.Context(), "cf")
		if err != nil {
			t.Fatal(err)
		}
		var tr struct{ SHA256 string }
		if err := json.Unmarshal(f.Derivatives["transcription"], &tr); err != nil {
			t.Fatalf("transcription derivative %s: %v", f.Derivatives["transcription"], err)
		}
		rc, err := kit.Blobs.Open(t.Context(), tr.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if b, _ := io.ReadAll(rc); string(b) != "Dear Sir, the print arrived today." {
			t.Errorf("transcription blob %q", b)
		}
	})
}

// TestTranscodeDeadline gives the transcode a deadline that passes before any event: the video
// file set fails with the named deadline error, and the sheet ends completed_error.
func TestTranscodeDeadline(t *testing.T) {
	t.Parallel()
	convertertest.RequireTools(t, "ffmpeg", "ffprobe")
	dir := t.TempDir()
	run(t, dir, "ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=duration=0.5:size=64x48:rate=5", "-pix_fmt", "yuv420p", "v.mp4")
	src, _ := builtin.Source(objects.Name)
	short := strings.Replace(string(src), "deadline: 24h", "deadline: 1ms", 1)
	if short == string(src) {
		t.Fatal("the built-in workflow has no 24h deadline to shorten")
	}
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjects(t, open)
		kit.ApplyWorkflow(t, short) // a new version of objects: the sheet runs it
		id, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "deadline.csv", FilesDir: dir,
			CSV: strings.NewReader(strings.Join(objects.Headers, ",") + "\nVIDEO,dw,df,v.mp4,a description,A,a label,,\n")})
		if err != nil {
			t.Fatal(err)
		}
		waitSheet(t, kit, id, objects.StatusAwaitingApproval)
		if err := objects.Approve(t.Context(), kit.Engine, id); err != nil {
			t.Fatal(err)
		}
		// The maintenance leader expires waits; here the test does, until the wait is gone.
		poll.Until(t, time.Minute, "the transcode's wait to expire", func() (bool, string) {
			n, err := kit.Engine.ExpireWaits(t.Context(), 100)
			if err != nil {
				t.Fatal(err)
			}
			return n > 0, "no wait expired yet"
		})
		if s := waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError); s.Status != objects.StatusCompletedError {
			t.Fatalf("sheet %s, want completed_error", s.Status)
		}
		f, err := objects.NewStore(kit.Store.DomainSQL()).GetFileSet(t.Context(), objects.FileSetID("df"))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range f.ActionStates {
			if a.Action == "TranscodeComplete" && (a.Outcome != objects.OutcomeError || !strings.Contains(a.Notes, "deadline: waited 1ms for transcoded")) {
				t.Errorf("TranscodeComplete %+v, want the deadline's error", a)
			}
		}
		if f.State != objects.StateError {
			t.Errorf("file set %s", f.State)
		}
	})
}

// TestAccessionTakenAtApproval validates two sheets naming the same accessions while neither is
// approved (both pass), approves both: the first creates the work, the second's work fails with
// "already exists in system" and that sheet ends completed_error — never two works of one
// accession.
func TestAccessionTakenAtApproval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.txt"), []byte("supplement"), 0o644); err != nil {
		t.Fatal(err)
	}
	sheet := strings.Join(objects.Headers, ",") + "\nIMAGE,tw,tf,s.txt,a description,S,a label,,\n"
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjects(t, open)
		first, second := upload(t, kit, "first.csv", sheet, dir), upload(t, kit, "second.csv", sheet, dir)
		waitSheet(t, kit, first, objects.StatusAwaitingApproval)
		waitSheet(t, kit, second, objects.StatusAwaitingApproval)
		for _, id := range []int64{first, second} {
			if err := objects.Approve(t.Context(), kit.Engine, id); err != nil {
				t.Fatal(err)
			}
			waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError)
		}
		x := kit.Store.DomainSQL()
		if s, _ := objects.NewStore(x).GetSheet(t.Context(), first); s.Status != objects.StatusCompleted {
			t.Errorf("first sheet %s", s.Status)
		}
		if s, _ := objects.NewStore(x).GetSheet(t.Context(), second); s.Status != objects.StatusCompletedError {
			t.Errorf("second sheet %s, want completed_error", s.Status)
		}
		w, err := objects.NewStore(x).GetWork(t.Context(), "tw")
		if err != nil || w.JobID != first || len(w.FileSets) != 1 {
			t.Errorf("work %+v (%v), want the first sheet's", w, err)
		}
		items, err := kit.Store.ItemList(t.Context(), store.ItemListParams{JobID: second, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, it := range items {
			found = found || strings.Contains(it.Error, "work accession number tw already exists in system")
		}
		if !found {
			t.Errorf("no item of the second sheet has the error; items %+v", items)
		}
	})
}
