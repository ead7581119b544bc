package web_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
)

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

func engineParams(workflow string) engine.CreateJobParams {
	return engine.CreateJobParams{Workflow: workflow, Open: true}
}

// addRoot adds a text file to an open job.
func addRoot(t *testing.T, b *bundle, job *record.Job, name, content string) {
	t.Helper()
	sha, size, err := b.n.Blobs.Put(t.Context(), strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.n.Engine.AddRoots(t.Context(), job, []engine.Root{{Name: name, BlobSHA256: sha, Size: size, ContentType: "text/plain"}}); err != nil {
		t.Fatal(err)
	}
}
