package action_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/sluice-project/sluice"
	"github.com/sluice-project/sluice/action"
)

// splitLines fans out: each line of an item becomes a child item. A setting of the step's
// `with:` chooses a prefix for the children's names.
type splitLines struct{}

func (splitLines) Spec() action.Spec {
	return action.Spec{
		Name:     "split-lines",
		Doc:      "one child item per line",
		Settings: []action.Setting{{Name: "prefix", Type: action.TypeString, Doc: "the children's name prefix"}},
	}
}

func (splitLines) Run(ctx context.Context, t *action.Task, out action.Output) error {
	prefix, _ := t.With["prefix"].(string)
	r, err := t.OpenBlob(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	// Children are keyed by their order: after a crash, a replay skips the ones that exist.
	for i := 0; sc.Scan(); i++ {
		line := sc.Text()
		err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s%d", prefix, i), ContentType: "text/plain",
			Blob: strings.NewReader(line), Text: &line})
		if err != nil {
			return err
		}
	}
	return sc.Err()
}

// An action that creates child items, run by an embedded engine.
func Example_children() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	e, err := sluice.Open(ctx, sluice.Config{DataDir: dir, Actions: []action.Action{splitLines{}}})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.ApplyWorkflow(ctx, []byte(`
name: lines
steps:
  split: {action: split-lines, needs: [start], when: root, with: {prefix: line-}}
`)); err != nil {
		log.Fatal(err)
	}
	job, err := e.StartJob(ctx, sluice.JobParams{Workflow: "lines",
		Files: []sluice.File{{Name: "poem.txt", Content: strings.NewReader("so much depends\nupon\n")}}})
	if err != nil {
		log.Fatal(err)
	}
	job, _ = e.Wait(ctx, job.ID)
	roots, _ := e.Items(ctx, job.ID, 0)
	children, _ := e.Items(ctx, job.ID, roots[0].ID)
	for _, c := range children {
		fmt.Printf("%s: %q\n", c.Name, c.Text)
	}
	// Output:
	// line-0: "so much depends"
	// line-1: "upon"
}
