package remote_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/sluice-project/sluice"
	"github.com/sluice-project/sluice/remote"
)

// A remote worker for the action Upper: it polls the server for a task, reads the task's
// input and answers with one child item, the input in capitals, then done.
// Here the server is an embedded engine; against `sluice serve` only the URL and the token
// (`sluice token create --role worker`) change.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	e, err := sluice.Open(ctx, sluice.Config{DataDir: dir, Remote: []string{"Upper"}})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	token, _ := e.CreateToken("worker")
	if _, _, err := e.ApplyWorkflow(ctx, []byte("name: upper\nsteps:\n  up: {action: remote, with: {name: Upper}, needs: [start], when: root}\n")); err != nil {
		log.Fatal(err)
	}
	job, err := e.StartJob(ctx, sluice.JobParams{Workflow: "upper", Files: []sluice.File{{Name: "a.txt", Content: strings.NewReader("hello")}}})
	if err != nil {
		log.Fatal(err)
	}

	// The worker.
	c := &remote.Client{Server: srv.URL + "/v1/workers", Token: token}
	var t *remote.TaskHandle
	for t == nil { // nil: the long poll ended without a task; poll again
		if t, err = c.Poll(ctx, "Upper"); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("task for", t.Filename)
	r, err := t.OpenBlob(ctx)
	if err != nil {
		log.Fatal(err)
	}
	in, _ := io.ReadAll(r)
	r.Close()
	err = t.PostJSON(ctx, "0.json", remote.File{Filename: t.Filename + ".upper", ContentType: "text/plain",
		LanguageCode: "en", Metadata: map[string]any{}})
	upper := strings.ToUpper(string(in))
	if err == nil {
		err = t.Post(ctx, "0.blob", strings.NewReader(upper)) // the child's bytes
	}
	if err == nil {
		err = t.Post(ctx, "0.txt", strings.NewReader(upper)) // and its text
	}
	if err == nil {
		err = t.Post(ctx, "done", nil)
	}
	if err != nil {
		log.Fatal(err)
	}

	job, _ = e.Wait(ctx, job.ID)
	roots, _ := e.Items(ctx, job.ID, 0)
	children, _ := e.Items(ctx, job.ID, roots[0].ID)
	fmt.Println("job", job.State)
	fmt.Println(children[0].Name, children[0].Text)
	// Output:
	// task for a.txt
	// job complete
	// a.txt.upper HELLO
}
