package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/objects"
)

// TestObjectsCommands drives an ingest sheet through the CLI on an embedded data dir:
// validate (a bad sheet: exit 1 and its row, field and message), upload (awaiting approval),
// approve (followed here to completed), show a file set's action states, and delete refused
// once approved.
func TestObjectsCommands(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	data, files := filepath.Join(dir, "data"), filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(files, f), []byte("supplement "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head := strings.Join(objects.Headers, ",") + "\n"
	sheet := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := sheet("bad.csv", "IMAGE,w1,f1,a.txt,a description,S,a label,,\nIMAGE,w1,f2,nope.txt,a description,S,a label,,\n")
	code, out, _ := run(t, "objects", "sheet", "validate", bad, "--files", files, "--data", data)
	if code != ExitFailed || !strings.Contains(out, "row_fail") || !strings.Contains(out, "2    filename: File not Found: nope.txt") {
		t.Errorf("validate a bad sheet: exit %d\n%s", code, out)
	}

	good := sheet("good.csv", "IMAGE,w1,f1,a.txt,a description,S,a label,,\nIMAGE,w1,f2,b.txt,a description,S,a label,,\n")
	code, out, errs := run(t, "objects", "sheet", "upload", good, "--files", files, "--data", data)
	if code != ExitOK || !strings.Contains(out, "sheet 1 good.csv: awaiting_approval (file pass, rows pass, overall pass), 2 rows") {
		t.Fatalf("upload: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = run(t, "objects", "sheet", "approve", "1", "--data", data)
	if code != ExitOK || !strings.Contains(out, "completed") || !strings.Contains(out, "file sets 2/2 complete") {
		t.Fatalf("approve: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "objects", "show", "f2", "--data", data, "--json")
	var shown struct {
		FileSet objects.FileSet `json:"file_set"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &shown) != nil || shown.FileSet.State != objects.StateComplete || len(shown.FileSet.ActionStates) != 6 {
		t.Errorf("show f2: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "objects", "show", "w1", "--data", data)
	if code != ExitOK || !strings.Contains(out, "work w1 (IMAGE, sheet 1): complete") || !strings.Contains(out, "CopyFileToPreservation  ok") ||
		!strings.Contains(out, "(role S, text/plain, PRONOM x-fmt/111, row 2)") {
		t.Errorf("show w1: exit %d\n%s", code, out)
	}
	if code, _, errs = run(t, "objects", "sheet", "delete", "1", "--data", data); code != ExitFailed || !strings.Contains(errs, "was approved") {
		t.Errorf("delete an approved sheet: exit %d, %s", code, errs)
	}
}

// TestObjectsApproveAndHistory: approve returns once the sheet is approved and its chains ran as
// far as they can here — a file set waiting for its transcoder, TranscodeComplete `waiting` —
// rather than blocking until the sheet ends; the transcoder's event (inside an SNS envelope)
// resumes it, `sluice resume` finishes it, and `objects show --history` lists every action's
// outcomes in order: waiting, started, ok.
func TestObjectsApproveAndHistory(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	data, files := filepath.Join(dir, "data"), filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "a.txt"), []byte("a supplement"), 0o644); err != nil {
		t.Fatal(err)
	}
	sheet := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(sheet, []byte(strings.Join(objects.Headers, ",")+"\nIMAGE,w1,f1,a.txt,a description,S,a label,,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chain := "GenerateFileSetDigests,CopyFileToPreservation,CreateTranscodeJob,TranscodeComplete,FileSetComplete"
	if code, out, errs := run(t, "objects", "sheet", "upload", sheet, "--files", files, "--custom-actions", chain, "--data", data); code != ExitOK {
		t.Fatalf("upload: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs := run(t, "objects", "sheet", "approve", "1", "--data", data)
	if code != ExitOK || !strings.Contains(out, "sheet 1 t.csv: approved") || !strings.Contains(errs, "waits for outside events") {
		t.Fatalf("approve: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "objects", "show", "f1", "--data", data)
	if code != ExitOK || !regexp.MustCompile(`CreateTranscodeJob\s+ok`).MatchString(out) || !regexp.MustCompile(`TranscodeComplete\s+waiting`).MatchString(out) {
		t.Fatalf("show f1 while it waits for the transcoder: exit %d\n%s", code, out)
	}
	detail, _ := json.Marshal(map[string]any{"status": "COMPLETE", "jobId": "j-1", "userMetadata": map[string]any{"file_set_id": objects.FileSetID("f1")},
		"outputGroupDetails": []any{map[string]any{"playlistFilePaths": []any{"s3://streaming/f1/a.m3u8"}}}})
	event := fmt.Sprintf(`{"detail-type": "MediaConvert Job State Change", "source": "aws.mediaconvert", "detail": %s}`, detail)
	envelope, _ := json.Marshal(map[string]any{"Type": "Notification", "MessageId": "m-1", "TopicArn": "arn:aws:sns:us-east-1:000000000000:mediaconvert",
		"Message": event, "Timestamp": "2026-11-29T00:00:00.000Z", "SignatureVersion": "1", "Signature": "c2ln", "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem"})
	ev := filepath.Join(dir, "event.json")
	if err := os.WriteFile(ev, envelope, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, "objects", "transcoded", ev, "--data", data); code != ExitOK || !strings.Contains(out, "fired on 1 of 1") {
		t.Fatalf("transcoded: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := run(t, "resume", "--data", data); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "objects", "show", "f1", "--history", "--json", "--data", data)
	var h objects.ObjectHistory
	if code != ExitOK || json.Unmarshal([]byte(out), &h) != nil || len(h.FileSets) != 1 || h.FileSets[0].State != objects.StateComplete {
		t.Fatalf("show --history: exit %d\n%s", code, out)
	}
	seen := map[string][]string{}
	var oks []string
	for _, e := range h.FileSets[0].History {
		seen[e.Action] = append(seen[e.Action], e.Outcome)
		if e.Outcome == objects.OutcomeOK {
			oks = append(oks, e.Action)
		}
	}
	want := []string{"IngestFileSet", "ExtractMimeType", "InitializeDispatch", "GenerateFileSetDigests", "CopyFileToPreservation",
		"CreateTranscodeJob", "TranscodeComplete", "FileSetComplete"}
	if !slices.Equal(oks, want) {
		t.Errorf("ok in the order %v, want %v", oks, want)
	}
	for _, a := range want {
		if got := seen[a]; !slices.Equal(got, []string{"waiting", "started", "ok"}) {
			t.Errorf("%s: outcomes %v, want waiting, started, ok", a, got)
		}
	}
	code, out, _ = run(t, "objects", "show", "w1", "--history", "--data", data)
	if code != ExitOK || !strings.Contains(out, "work w1") || !regexp.MustCompile(`TranscodeComplete\s+waiting`).MatchString(out) ||
		!strings.Contains(out, "s3://streaming/f1/a.m3u8") {
		t.Errorf("show w1 --history: exit %d\n%s", code, out)
	}
}
