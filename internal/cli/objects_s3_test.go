package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/blob/blobtest"
	"github.com/sluice-project/sluice/internal/objects"
)

// TestObjectsCommandsS3 drives a sheet whose files are in a bucket of a real S3 server
// (versitygw) through the CLI, with endpoint and keys from the AWS_* variables as for --blobs:
// validate names a missing key, upload --files s3://… awaits approval, approve follows it to
// completed, and an unknown bucket fails the upload at once.
func TestObjectsCommandsS3(t *testing.T) {
	clearEnv(t)
	endpoint, _ := blobtest.VersityGW(t, "clikey", "clisecret")
	t.Setenv("AWS_ACCESS_KEY_ID", "clikey")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "clisecret")
	t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
	blobtest.PutObjects(t, blobtest.S3Client(endpoint, "clikey", "clisecret"), "ingest",
		map[string]string{"batch-8/a.txt": "supplement a.txt", "batch-8/b.txt": "supplement b.txt"})
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	sheet := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(objects.Headers, ",")+"\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := sheet("bad.csv", "IMAGE,w1,f1,a.txt,a description,S,a label,,\nIMAGE,w1,f2,nope.txt,a description,S,a label,,\n")
	code, out, _ := run(t, "objects", "sheet", "validate", bad, "--files", "s3://ingest/batch-8", "--data", data)
	if code != ExitFailed || !strings.Contains(out, "File not Found: s3://ingest/batch-8/nope.txt") {
		t.Errorf("validate a bad sheet: exit %d\n%s", code, out)
	}
	good := sheet("good.csv", "IMAGE,w1,f1,a.txt,a description,S,a label,,\nIMAGE,w1,f2,b.txt,a description,S,a label,,\n")
	if code, _, errs := run(t, "objects", "sheet", "upload", good, "--files", "s3://no-such-bucket/batch-8", "--data", data); code != ExitFailed || !strings.Contains(errs, "no-such-bucket") {
		t.Errorf("upload from a bucket that does not exist: exit %d\n%s", code, errs)
	}
	code, out, errs := run(t, "objects", "sheet", "upload", good, "--files", "s3://ingest/batch-8", "--data", data)
	if code != ExitOK || !strings.Contains(out, "good.csv: awaiting_approval (file pass, rows pass, overall pass), 2 rows") {
		t.Fatalf("upload: exit %d\n%s\n%s", code, out, errs)
	}
	id := strings.Fields(out)[1]
	code, out, errs = run(t, "objects", "sheet", "approve", id, "--data", data)
	if code != ExitOK || !strings.Contains(out, "completed") || !strings.Contains(out, "file sets 2/2 complete") {
		t.Fatalf("approve: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "objects", "show", "f2", "--data", data, "--json")
	if code != ExitOK || !strings.Contains(out, `"location": "s3://ingest/batch-8/b.txt"`) {
		t.Errorf("show f2: exit %d\n%s", code, out)
	}
}
