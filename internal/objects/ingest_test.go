package objects_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/converter/convertertest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/source"
)

// startObjects starts an engine and a worker with the objects domain, its actions and the
// built-in objects workflow.
func startObjects(t testing.TB, open enginetest.Open) *enginetest.Kit {
	t.Helper()
	svc := &objects.Service{}
	kit := enginetest.StartWith(t, open, enginetest.Config{Domains: map[string]engine.Domain{objects.Name: objects.Domain{}}},
		append(svc.Actions(), basic.NewPass())...)
	if err := builtin.Apply(t.Context(), kit.Engine, objects.Name); err != nil {
		t.Fatal(err)
	}
	return kit
}

// run runs a tool that makes test media, failing the test with its output.
func run(t testing.TB, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// canonicalMedia makes the canonical sheet's files with vips and ffmpeg test patterns.
func canonicalMedia(t *testing.T) string {
	t.Helper()
	convertertest.RequireTools(t, "vips", "vipsthumbnail", "ffmpeg", "ffprobe", "exiftool")
	dir := t.TempDir()
	for _, d := range []string{"img", "video", "audio", "docs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run(t, dir, "vips", "sines", "img/front.tif", "96", "64")
	run(t, dir, "vips", "eye", "img/front-master.tif", "120", "80")
	run(t, dir, "vips", "zone", "img/back.tmp.v", "64", "64")
	run(t, dir, "vips", "linear", "img/back.tmp.v", "img/back.jpg", "127", "128")
	run(t, dir, "vips", "xyz", "video/poster.tmp.v", "48", "32")
	run(t, dir, "vips", "cast", "video/poster.tmp.v", "video/poster.png", "uchar")
	run(t, dir, "ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=duration=1:size=160x120:rate=10",
		"-pix_fmt", "yuv420p", "video/reel.mp4")
	vtt := "WEBVTT\n\n00:00.000 --> 00:00.500\nOpening titles\n\n00:00.500 --> 00:01.000\nThe reel\n"
	if err := os.WriteFile(filepath.Join(dir, "video/reel.vtt"), []byte(vtt), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "audio/tone.wav")
	if err := os.WriteFile(filepath.Join(dir, "audio/tone.vtt"), []byte("WEBVTT\n\n00:00.000 --> 00:01.000\nA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docs/notes.pdf"), []byte(minimalPDF), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// minimalPDF is a one-page PDF with no content.
const minimalPDF = "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n" +
	"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

// canonicalSheet is the canonical shape: an image work with access, preservation and auxiliary
// file sets, and a video work with an access file and its WebVTT structure, and a poster.
const canonicalSheet = `work_type,work_accession_number,file_accession_number,filename,description,role,label,work_image,structure
IMAGE,%[1]s-img,%[1]s-img-a,img/front.tif,front of the print,A,front,true,
IMAGE,%[1]s-img,%[1]s-img-p,img/front-master.tif,preservation master of the front,P,front master,false,
IMAGE,%[1]s-img,%[1]s-img-x,img/back.jpg,back of the print,X,back,false,
VIDEO,%[1]s-vid,%[1]s-vid-a,video/reel.mp4,the reel,A,reel,true,video/reel.vtt
VIDEO,%[1]s-vid,%[1]s-vid-x,video/poster.png,the poster,X,poster,false,
`

// goodSheet is the canonical sheet and more: an auxiliary PDF and a supplemental document in
// the image work, and an audio work with its access file and its structure — every role (A, P,
// S, X) and image, audio, video and document files.
const goodSheet = canonicalSheet + `IMAGE,%[1]s-img,%[1]s-img-xp,docs/notes.pdf,the curator's notes,X,notes,false,
IMAGE,%[1]s-img,%[1]s-img-s,docs/notes.pdf,the notes again,S,notes (supplement),,
AUDIO,%[1]s-aud,%[1]s-aud-a,audio/tone.wav,a tone,A,tone,true,audio/tone.vtt
`

// initial is every chain's start.
var initial = []string{"IngestFileSet", "ExtractMimeType", "InitializeDispatch"}

// wantChains are Meadow's chains of the canonical file sets, by the accession's suffix.
var wantChains = map[string][]string{
	"img-a": append(slices.Clone(initial), "GenerateFileSetDigests", "ExtractExifMetadata", "CopyFileToPreservation",
		"AttachTranscription", "CreatePyramidTiff", "GenerateAIMetadata", "FileSetComplete"),
	"img-p": append(slices.Clone(initial), "GenerateFileSetDigests", "ExtractExifMetadata", "CopyFileToPreservation", "FileSetComplete"),
	"img-x": append(slices.Clone(initial), "GenerateFileSetDigests", "ExtractExifMetadata", "CopyFileToPreservation",
		"CreatePyramidTiff", "FileSetComplete"),
	"vid-a": append(slices.Clone(initial), "GenerateFileSetDigests", "CopyFileToPreservation", "ExtractMediaMetadata",
		"CreateTranscodeJob", "TranscodeComplete", "FileSetComplete"),
	"vid-x": append(slices.Clone(initial), "GenerateFileSetDigests", "ExtractExifMetadata", "CopyFileToPreservation",
		"CreatePyramidTiff", "FileSetComplete"),
}

// goodChains are Meadow's chains of the good sheet's file sets: the canonical ones and its own.
var goodChains = func() map[string][]string {
	m := maps.Clone(wantChains)
	m["img-xp"] = append(slices.Clone(initial), "GenerateFileSetDigests", "ExtractExifMetadata", "CopyFileToPreservation",
		"CreateDerivativeCopy", "FileSetComplete")
	m["img-s"] = append(slices.Clone(initial), "GenerateFileSetDigests", "CopyFileToPreservation", "FileSetComplete")
	m["aud-a"] = append(slices.Clone(initial), "GenerateFileSetDigests", "CopyFileToPreservation", "ExtractMediaMetadata",
		"CreateTranscodeJob", "TranscodeComplete", "FileSetComplete")
	return m
}()

func upload(t *testing.T, kit *enginetest.Kit, name, sheet, dir string) int64 {
	t.Helper()
	id, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: name, CSV: strings.NewReader(sheet), FilesDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitSheet waits for the sheet to reach one of the statuses.
func waitSheet(t testing.TB, kit *enginetest.Kit, id int64, statuses ...string) *objects.Sheet {
	t.Helper()
	return waitSheetFor(t, kit, id, 2*time.Minute, statuses...)
}

// waitSheetFor is [waitSheet] with a deadline.
func waitSheetFor(t testing.TB, kit *enginetest.Kit, id int64, d time.Duration, statuses ...string) *objects.Sheet {
	t.Helper()
	var s *objects.Sheet
	poll.Until(t, d, fmt.Sprintf("sheet %d to be %v", id, statuses), func() (bool, string) {
		var err error
		if s, err = objects.NewStore(kit.Store.DomainSQL()).GetSheet(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(statuses, s.Status), s.Status
	})
	return s
}

// okHistory returns the actions of a file set that became ok, in the order they did, and checks
// each was started before (but one skipped, as GenerateAIMetadata unconfigured is).
func okHistory(t *testing.T, kit *enginetest.Kit, id string) []string {
	t.Helper()
	h, err := objects.NewStore(kit.Store.DomainSQL()).History(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var oks []string
	started := map[string]bool{}
	for _, e := range h {
		switch e.Outcome {
		case objects.OutcomeStarted:
			started[e.Action] = true
		case objects.OutcomeOK:
			if !started[e.Action] && !strings.HasPrefix(e.Notes, "skipped: ") {
				t.Errorf("file set %s: %s ok without having started", id, e.Action)
			}
			oks = append(oks, e.Action)
		}
	}
	return oks
}

// transcodeEvent is a MediaConvert-shaped EventBridge "Job State Change" event we author.
func transcodeEvent(fileSetID, status string) []byte {
	detail := map[string]any{
		"timestamp": 1764201600000, "accountId": "000000000000", "queue": "arn:aws:mediaconvert:us-east-1:000000000000:queues/Default",
		"jobId": "1764201600000-test01", "status": status,
		"userMetadata": map[string]any{"file_set_id": fileSetID, "context": "Sheet"},
	}
	switch status {
	case "COMPLETE":
		detail["outputGroupDetails"] = []any{map[string]any{
			"type":              "HLS_GROUP",
			"playlistFilePaths": []any{"s3://streaming/" + fileSetID + "/reel.m3u8"},
			"outputDetails":     []any{map[string]any{"durationInMs": 1000, "videoDetails": map[string]any{"widthInPx": 160, "heightInPx": 120}}},
		}}
	case "ERROR":
		detail["errorCode"] = 1401
		detail["errorMessage"] = "Unable to open input file: the test transcoder refuses this one"
	}
	b, _ := json.Marshal(map[string]any{"version": "0", "id": "00000000-0000-4000-8000-" + fileSetID[24:], "detail-type": "MediaConvert Job State Change",
		"source": "aws.mediaconvert", "account": "000000000000", "time": "2025-11-27T00:00:00Z", "region": "us-east-1",
		"resources": []any{"arn:aws:mediaconvert:us-east-1:000000000000:jobs/1764201600000-test01"}, "detail": detail})
	return b
}

// TestCanonicalSheet runs the good sheet — every role, image, audio, video and document files —
// end to end on generated media, on each driver: validation, approval, each file set's chain
// exactly as Meadow's table says (from the action state history), the video and the audio
// waiting (TranscodeComplete `waiting`) until the test posts the transcoder's COMPLETE — bare for
// the video, inside an SNS Notification for the audio — then every work and the sheet
// completed, every action ok. Then two sheets that fail only now the good one is ingested get
// Meadow's row, field and words.
func TestCanonicalSheet(t *testing.T) {
	t.Parallel()
	dir := canonicalMedia(t)
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjects(t, open)
		ctx := t.Context()
		x := kit.Store.DomainSQL()
		id := upload(t, kit, "canonical.csv", fmt.Sprintf(goodSheet, "c"), dir)
		s := waitSheet(t, kit, id, objects.StatusAwaitingApproval, objects.StatusRowFail, objects.StatusFileFail)
		if s.Status != objects.StatusAwaitingApproval || s.Checks != (objects.Checks{File: "pass", Rows: "pass", Overall: "pass"}) || s.RowCount != 8 {
			rows, _ := objects.NewStore(x).ListRows(ctx, id, true)
			t.Fatalf("sheet %+v, failed rows %+v", s, rows)
		}
		if fs, _ := objects.NewStore(x).ListFileSets(ctx, id); len(fs) != 0 {
			t.Fatalf("%d file sets before approval", len(fs))
		}
		if err := objects.Approve(ctx, kit.Engine, id); err != nil {
			t.Fatal(err)
		}
		video, audio := objects.FileSetID("c-vid-a"), objects.FileSetID("c-aud-a")
		// The video's and the audio's chains pause at the transcode: every other file set completes.
		poll.Until(t, 2*time.Minute, "the video and the audio to wait for their transcodes and the others to complete", func() (bool, string) {
			fs, err := objects.NewStore(x).ListFileSets(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			vst, _ := objects.NewStore(x).ActionStates(ctx, video)
			ast, _ := objects.NewStore(x).ActionStates(ctx, audio)
			done := 0
			for _, f := range fs {
				if f.State == objects.StateComplete {
					done++
				}
			}
			return done == 6 && awaitsTranscode(vst) && awaitsTranscode(ast), fmt.Sprintf("%d complete, video states %v, audio states %v", done, vst, ast)
		})
		if j, _ := kit.Store.JobGet(ctx, id); j.State != record.JobRunning {
			t.Fatalf("job %s while the video waits", j.State)
		}
		p, err := objects.NewStore(x).SheetProgress(ctx, id)
		if err != nil || p.FileSetsComplete != 6 || p.FileSets != 8 || p.DoneActions >= p.TotalActions {
			t.Fatalf("progress %+v (%v)", p, err)
		}
		// An event for a file set no sheet has is acknowledged and fires nothing.
		if f, err := objects.FireTranscoded(ctx, kit.Engine, transcodeEvent(objects.FileSetID("nobody"), "COMPLETE"), ""); err != nil || f.Fired != 0 {
			t.Fatalf("unknown event: %+v, %v", f, err)
		}
		f, err := objects.FireTranscoded(ctx, kit.Engine, transcodeEvent(video, "COMPLETE"), "")
		if err != nil || f.Fired != 1 {
			t.Fatalf("COMPLETE: %+v, %v", f, err)
		}
		f, err = objects.FireTranscoded(ctx, kit.Engine, snsNotification(transcodeEvent(audio, "COMPLETE")), "")
		if err != nil || f.Fired != 1 || f.SNS != objects.SNSNotification {
			t.Fatalf("COMPLETE in an SNS Notification: %+v, %v", f, err)
		}
		s = waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError)
		if s.Status != objects.StatusCompleted {
			t.Fatalf("sheet %s", s.Status)
		}
		// A repeated event is acknowledged and does nothing.
		if f, err := objects.FireTranscoded(ctx, kit.Engine, transcodeEvent(video, "ERROR"), ""); err != nil || f.Fired != 0 {
			t.Fatalf("repeated event: %+v, %v", f, err)
		}
		for suffix, want := range goodChains {
			fid := objects.FileSetID("c-" + suffix)
			if got := okHistory(t, kit, fid); !slices.Equal(got, want) {
				t.Errorf("%s chain:\n got %v\nwant %v", suffix, got, want)
			}
			f, err := objects.NewStore(x).GetFileSet(ctx, fid)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range f.ActionStates {
				if a.Outcome != objects.OutcomeOK {
					t.Errorf("%s: %s is %s", suffix, a.Action, a.Outcome)
				}
			}
			if f.State != objects.StateComplete || f.Core["digests"] == nil || f.Core["preservation_sha256"] == nil {
				t.Errorf("%s: %+v", suffix, f)
			}
			sum, _ := f.Core["preservation_sha256"].(string)
			if _, err := kit.Blobs.Stat(ctx, sum); err != nil {
				t.Errorf("%s: preservation copy %s: %v", suffix, sum, err)
			}
		}
		img, _ := objects.NewStore(x).GetFileSet(ctx, objects.FileSetID("c-img-a"))
		if img.Derivatives["pyramid_tiff"] == nil || img.Core["exif"] == nil || img.MimeType != "image/tiff" {
			t.Errorf("access image: %+v", img)
		}
		if pdf, _ := objects.NewStore(x).GetFileSet(ctx, objects.FileSetID("c-img-xp")); pdf.Derivatives["copy"] == nil || pdf.MimeType != "application/pdf" {
			t.Errorf("auxiliary PDF: %+v", pdf)
		}
		// Every file's PRONOM identification is recorded beside its MIME type.
		for acc, puid := range map[string]string{"c-img-a": "fmt/353", "c-img-xp": "fmt/18", "c-aud-a": "fmt/141", "c-vid-a": "fmt/199"} {
			f, _ := objects.NewStore(x).GetFileSet(ctx, objects.FileSetID(acc))
			id, _ := f.Core["pronom"].(map[string]any)
			formats, _ := id["formats"].([]any)
			if len(formats) == 0 || formats[0].(map[string]any)["puid"] != puid || id["basis"] != "signature" {
				t.Errorf("%s (%s): PRONOM %v, want %s by its signature", acc, f.MimeType, f.Core["pronom"], puid)
			}
		}
		for _, fid := range []string{video, audio} {
			av, _ := objects.NewStore(x).GetFileSet(ctx, fid)
			if !strings.Contains(string(av.Derivatives["playlist"]), "reel.m3u8") || av.Core["mediainfo"] == nil {
				t.Errorf("%s: derivatives %v, core %v", av.Accession, av.Derivatives, av.Core)
			}
		}
		for _, w := range []string{"c-img", "c-vid", "c-aud"} {
			if w, err := objects.NewStore(x).GetWork(ctx, w); err != nil || w.State != objects.StateComplete {
				t.Errorf("work %+v: %v", w, err)
			}
		}
		if p, _ := objects.NewStore(x).SheetProgress(ctx, id); p.Percent != 100 || p.FileSetsComplete != 8 {
			t.Errorf("progress %+v", p)
		}
		// Every blob is referenced — by an item or by the domain — so a collection with no
		// grace deletes none: not the preservation copies, not the pyramid TIFFs.
		if deleted, _, err := blob.GC(ctx, kit.Blobs, func(sha string) (bool, error) { return kit.Engine.BlobReferenced(ctx, sha) }, 0, time.Now().Add(time.Hour)); err != nil || deleted != 0 {
			t.Errorf("blob collection deleted %d blobs (%v), want 0", deleted, err)
		}
		// Two sheets that fail only now: one names a file set the good sheet made, the other
		// one of its works (each after a good row).
		head := strings.Join(objects.Headers, ",") + "\n"
		for _, tc := range []struct{ sheet, want string }{
			{"IMAGE,n-img,n-img-a,img/front.tif,again,A,again,,\nIMAGE,n-img,c-img-s,docs/notes.pdf,notes,S,notes,,\n",
				"2 file_accession_number: file_accession_number: c-img-s already exists in system"},
			{"IMAGE,n-img,n-img-b,img/back.jpg,back,A,back,,\nAUDIO,c-aud,n-aud-a,audio/tone.wav,tone,A,tone,,\n",
				"2 work_accession_number: work_accession_number: c-aud already exists in system"},
		} {
			v, err := objects.Validate(ctx, strings.NewReader(head+tc.sheet), objects.Env{FilesDir: dir, Existing: objects.NewStore(x).Existing})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range v.Rows {
				for _, e := range r.Errors {
					got = append(got, fmt.Sprintf("%d %s: %s", r.Row, e.Field, e.Message))
				}
			}
			if v.Status != objects.StatusRowFail || strings.Join(got, "; ") != tc.want {
				t.Errorf("a sheet after the good one: %s %q, want %q", v.Status, got, tc.want)
			}
		}
	})
}

// TestTranscodeError posts an ERROR for the video: that file set fails with the event's message
// (its waiting actions "Previous action failed"), the image work completes, and the sheet ends
// completed_error. The event comes through a source (the topic variant). A second sheet naming an accession the first created fails validation.
func TestTranscodeError(t *testing.T) {
	t.Parallel()
	dir := canonicalMedia(t)
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		kit := startObjects(t, open)
		ctx := t.Context()
		x := kit.Store.DomainSQL()
		sheet := strings.Join(strings.Split(fmt.Sprintf(canonicalSheet, "e"), "\n")[:5:5], "\n")
		sheet = strings.Replace(sheet, "IMAGE,e-img,e-img-a,img/front.tif,front of the print,A,front,true,\n", "", 1)
		sheet = strings.Replace(sheet, "IMAGE,e-img,e-img-x,img/back.jpg,back of the print,X,back,false,\n", "", 1) + "\n"
		id := upload(t, kit, "error.csv", sheet, dir)
		waitSheet(t, kit, id, objects.StatusAwaitingApproval)
		if err := objects.Approve(ctx, kit.Engine, id); err != nil {
			t.Fatal(err)
		}
		video := objects.FileSetID("e-vid-a")
		waitTranscodePending(t, kit, video)
		// The transcoder's event comes from a topic: a source firing transcoded, correlated by
		// the workflow's correlate: (a JetStream source hands its messages to the same handler).
		src, err := source.Parse("mediaconvert", "webhook:?workflow=objects&event=transcoded")
		if err != nil {
			t.Fatal(err)
		}
		h := &source.Handler{Engine: kit.Engine, Records: kit.Store, Blobs: kit.Blobs}
		if o, err := h.Handle(ctx, src, source.Message{ID: "m1", Body: transcodeEvent(video, "ERROR")}); err != nil || len(o.Fired) != 1 {
			t.Fatalf("ERROR through the source: %+v, %v", o, err)
		}
		s := waitSheet(t, kit, id, objects.StatusCompleted, objects.StatusCompletedError)
		if s.Status != objects.StatusCompletedError {
			t.Fatalf("sheet %s, want completed_error", s.Status)
		}
		f, err := objects.NewStore(x).GetFileSet(ctx, video)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]objects.ActionState{}
		for _, a := range f.ActionStates {
			states[a.Action] = a
		}
		const msg = "Unable to open input file: the test transcoder refuses this one"
		if tc := states["TranscodeComplete"]; tc.Outcome != objects.OutcomeError || !strings.Contains(tc.Notes, msg) {
			t.Errorf("TranscodeComplete = %+v, want error with the event's message", tc)
		}
		if c := states["FileSetComplete"]; c.Outcome != objects.OutcomeError || c.Notes != "Previous action failed" {
			t.Errorf("FileSetComplete = %+v", c)
		}
		if f.State != objects.StateError {
			t.Errorf("video file set %s", f.State)
		}
		if w, _ := objects.NewStore(x).GetWork(ctx, "e-img"); w == nil || w.State != objects.StateComplete {
			t.Errorf("image work %+v, want complete", w)
		}
		if w, _ := objects.NewStore(x).GetWork(ctx, "e-vid"); w == nil || w.State != objects.StateError {
			t.Errorf("video work %+v, want error", w)
		}
		again := upload(t, kit, "again.csv", strings.Join(objects.Headers, ",")+"\nIMAGE,e-img-2,e-img-p,img/front-master.tif,a description,P,a label,,\n", dir)
		s = waitSheet(t, kit, again, objects.StatusRowFail, objects.StatusAwaitingApproval)
		rows, _ := objects.NewStore(x).ListRows(ctx, again, true)
		if s.Status != objects.StatusRowFail || len(rows) != 1 || rows[0].Row != 1 ||
			rows[0].Errors[0] != (objects.FieldError{Field: "file_accession_number", Message: "file_accession_number: e-img-p already exists in system"}) {
			t.Errorf("second sheet %s, rows %+v", s.Status, rows)
		}
	})
}

// awaitsTranscode reports whether a file set's states are those of one waiting for the
// transcoder, as Meadow shows it: CreateTranscodeJob ok, TranscodeComplete and
// FileSetComplete waiting.
func awaitsTranscode(st []objects.ActionState) bool {
	out := map[string]string{}
	for _, a := range st {
		out[a.Action] = a.Outcome
	}
	return out["CreateTranscodeJob"] == objects.OutcomeOK && out["TranscodeComplete"] == objects.OutcomeWaiting &&
		out["FileSetComplete"] == objects.OutcomeWaiting
}

// waitTranscodePending waits until the file set waits for the transcoder's event.
func waitTranscodePending(t *testing.T, kit *enginetest.Kit, fileSet string) {
	t.Helper()
	poll.Until(t, 2*time.Minute, "the video to wait for its transcode", func() (bool, string) {
		st, _ := objects.NewStore(kit.Store.DomainSQL()).ActionStates(t.Context(), fileSet)
		return awaitsTranscode(st), fmt.Sprint(st)
	})
}
