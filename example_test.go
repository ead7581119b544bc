package sluice_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/sluice-project/sluice"
	"github.com/sluice-project/sluice/action"
)

// wordCount is an action of one's own: it counts the words of an item's bytes and records the
// count as the item's "words" output. It implements the same contract as the built-in actions.
type wordCount struct{}

func (wordCount) Spec() action.Spec {
	return action.Spec{Name: "wordcount", Doc: "counts the words of a text file", Outcomes: []string{"counted.many"}}
}

func (wordCount) Run(ctx context.Context, t *action.Task, out action.Output) error {
	r, err := t.OpenBlob(ctx)
	if err != nil {
		return err // transient: retried with backoff
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	n := len(strings.Fields(string(b)))
	if n == 0 {
		return action.Permanentf("%s has no words", t.Item.Name) // bad input: not retried
	}
	if n > 3 {
		out.Emit("counted.many") // an outcome event other steps may need
	}
	return out.SetOutput(ctx, "words", fmt.Appendf(nil, `{"words": %d}`, n))
}

// Embed the engine on SQLite with one action of one's own, run a workflow over two files and
// read what it recorded.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)

	e, err := sluice.Open(ctx, sluice.Config{DataDir: dir, Actions: []action.Action{wordCount{}}})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	_, _, err = e.ApplyWorkflow(ctx, []byte(`
name: words
steps:
  count: {action: wordcount, needs: [start]}
  shout: {action: noop, needs: [counted.many]}
`))
	if err != nil {
		log.Fatal(err)
	}
	job, err := e.StartJob(ctx, sluice.JobParams{Workflow: "words", Files: []sluice.File{
		{Name: "short.txt", Content: strings.NewReader("two words")},
		{Name: "long.txt", Content: strings.NewReader("rather more than three words")},
		{Name: "empty.txt", Content: strings.NewReader("")},
	}})
	if err != nil {
		log.Fatal(err)
	}
	job, err = e.Wait(ctx, job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job", job.State)
	items, _ := e.Items(ctx, job.ID, 0)
	outs, _ := e.Outputs(ctx, job.ID, "words")
	for _, o := range outs {
		for _, it := range items {
			if it.ID == o.ItemID {
				fmt.Println(it.Name, string(o.Value))
			}
		}
	}
	for _, it := range items {
		if it.Error != "" {
			fmt.Println(it.Name, "error:", it.Error)
		}
	}
	// Output:
	// job complete
	// short.txt {"words": 2}
	// long.txt {"words": 5}
	// empty.txt error: empty.txt has no words
}

// A workflow that does not validate is a *WorkflowError naming each problem.
func ExampleEngine_ApplyWorkflow() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	e, err := sluice.Open(ctx, sluice.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	_, _, err = e.ApplyWorkflow(ctx, []byte("name: broken\nsteps:\n  a: {action: no-such-action, needs: [start]}\n"))
	if werr, ok := err.(*sluice.WorkflowError); ok {
		for _, d := range werr.Diagnostics {
			fmt.Printf("line %d: step %s: %s\n", d.Line, d.Step, d.Message)
		}
	}
	// Output:
	// line 3: step a: unknown action "no-such-action"
}
