package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/blob/blobtest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestSheetsAPIFromS3 uploads sheets through /v1/sheets with files_dir s3://bucket/prefix on a
// real S3 server (versitygw): a missing key is its row's "File not Found" naming the key, a
// valid sheet is approved and completes with its file sets read from the bucket, a key deleted
// after validation fails its file set naming it, and a bucket that does not exist is a 400 at
// upload. Every answer must match the OpenAPI document.
func TestSheetsAPIFromS3(t *testing.T) {
	t.Parallel()
	endpoint, _ := blobtest.VersityGW(t, "apikey", "apisecret")
	c := blobtest.S3Client(endpoint, "apikey", "apisecret")
	blobtest.PutObjects(t, c, "ingest", map[string]string{
		"batch/notes-1.txt": "notes of notes-1.txt", "batch/notes-2.txt": "notes of notes-2.txt", "batch/notes-3.txt": "notes of notes-3.txt"})
	ctx := t.Context()
	open := blobtest.S3Opener(endpoint, "apikey", "apisecret")
	b := setupFull(t, drivertest.OpenSQLite, func(c *api.Config) {
		c.OpenS3 = open
		c.PathRoots = append(c.PathRoots, "s3://ingest/batch", "s3://no-such-bucket")
	}, &objects.Service{S3: open})
	b.matchDoc = true
	head := strings.Join(objects.Headers, ",") + "\n"
	post := func(files, sheet string, want int) int64 {
		t.Helper()
		code, data := b.do(t, "POST", "/v1/sheets?name=batch.csv&files_dir="+url.QueryEscape(files), b.admin, "text/csv", strings.NewReader(sheet))
		if code != want {
			t.Fatalf("POST /v1/sheets files_dir=%s = %d, want %d: %s", files, code, want, data)
		}
		var out objects.Sheet
		if want == http.StatusCreated {
			if err := json.Unmarshal(data, &out); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
		}
		return out.JobID
	}
	wait := func(id int64, statuses ...string) string {
		var s objects.Sheet
		poll.Until(t, 30*time.Second, fmt.Sprintf("sheet %d to be %v", id, statuses), func() (bool, string) {
			b.json(t, "GET", fmt.Sprintf("/v1/sheets/%d", id), nil, 200, &s)
			for _, st := range statuses {
				if s.Status == st {
					return true, ""
				}
			}
			return false, s.Status
		})
		return s.Status
	}

	post("s3://no-such-bucket/batch", head+"IMAGE,w0,f0,notes-1.txt,a description,S,a label,,\n", http.StatusBadRequest)
	// Outside the s3:// path roots: refused before any request reaches the bucket.
	post("s3://ingest/other", head+"IMAGE,w0,f0,notes-1.txt,a description,S,a label,,\n", http.StatusBadRequest)
	post("s3://ingest/batchx", head+"IMAGE,w0,f0,notes-1.txt,a description,S,a label,,\n", http.StatusBadRequest)
	bad := post("s3://ingest/batch", head+"IMAGE,w9,f9,missing.txt,a description,S,a label,,\n", http.StatusCreated)
	wait(bad, objects.StatusRowFail)
	var rows struct{ Rows []objects.Row }
	b.json(t, "GET", fmt.Sprintf("/v1/sheets/%d/rows?failed=true", bad), nil, 200, &rows)
	if len(rows.Rows) != 1 || rows.Rows[0].Row != 1 || rows.Rows[0].Errors[0] != (objects.FieldError{Field: "filename", Message: "filename: File not Found: s3://ingest/batch/missing.txt"}) {
		t.Errorf("failed rows %+v", rows.Rows)
	}

	id := post("s3://ingest/batch", head+"IMAGE,w1,f1,notes-1.txt,a description,S,a label,,\nIMAGE,w1,f2,notes-2.txt,a description,S,a label,,\n", http.StatusCreated)
	wait(id, objects.StatusAwaitingApproval)
	b.json(t, "POST", fmt.Sprintf("/v1/sheets/%d/approve", id), nil, http.StatusAccepted, nil)
	if st := wait(id, objects.StatusCompleted, objects.StatusCompletedError); st != objects.StatusCompleted {
		t.Fatalf("sheet %s", st)
	}
	var obj struct {
		FileSet objects.FileSet `json:"file_set"`
	}
	b.json(t, "GET", "/v1/objects/f2", nil, 200, &obj)
	if obj.FileSet.Location != "s3://ingest/batch/notes-2.txt" || obj.FileSet.State != objects.StateComplete || obj.FileSet.Core["preservation_sha256"] == nil {
		t.Errorf("f2 %+v", obj.FileSet)
	}

	// A key deleted after validation fails its file set, naming it; the sheet ends completed_error.
	gone := post("s3://ingest/batch", head+"IMAGE,w3,f3,notes-3.txt,a description,S,a label,,\n", http.StatusCreated)
	wait(gone, objects.StatusAwaitingApproval)
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("ingest"), Key: aws.String("batch/notes-3.txt")}); err != nil {
		t.Fatal(err)
	}
	b.json(t, "POST", fmt.Sprintf("/v1/sheets/%d/approve", gone), nil, http.StatusAccepted, nil)
	if st := wait(gone, objects.StatusCompleted, objects.StatusCompletedError); st != objects.StatusCompletedError {
		t.Fatalf("sheet whose key was deleted: %s", st)
	}
	b.json(t, "GET", "/v1/objects/f3", nil, 200, &obj)
	var mime objects.ActionState
	for _, a := range obj.FileSet.ActionStates {
		if a.Action == "ExtractMimeType" {
			mime = a
		}
	}
	if obj.FileSet.State != objects.StateError || mime.Outcome != objects.OutcomeError || !strings.Contains(mime.Notes, "File not Found: s3://ingest/batch/notes-3.txt") {
		t.Errorf("f3: state %s, ExtractMimeType %+v", obj.FileSet.State, mime)
	}
}
