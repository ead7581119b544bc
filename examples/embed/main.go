// Command embed is a sample program that embeds Sluice: it opens an engine on a data directory
// (SQLite, or PostgreSQL with -database), registers one action of its own, "top-words", and runs
// a workflow of it over the files named on the command line, printing each file's most frequent
// words. Run it twice with the same files and -data: the second run finds the job by its key
// and prints the same results without doing the work again.
//
//	go run ./examples/embed -data /tmp/embed-data README.md docs/*.md
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-project/sluice"
	"github.com/sluice-project/sluice/action"
)

// workflow runs top-words on every file; a file that is not text gets an error, which does not
// fail the job.
const workflow = `
name: top-words
steps:
  count:  {action: top-words, needs: [start], with: {n: 3}, }
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	data := flag.String("data", "embed-data", "data directory")
	database := flag.String("database", "", "a postgres:// URL (default: SQLite in the data directory)")
	flag.Parse()
	if err := run(ctx, os.Stdout, os.Stderr, *data, *database, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// run runs the workflow over the files and prints "NAME: w1 w2 w3" per file, or its error, on
// stdout; "job N started" on stderr once the job runs.
func run(ctx context.Context, stdout, stderr io.Writer, data, database string, files []string) error {
	e, err := sluice.Open(ctx, sluice.Config{DataDir: data, DatabaseURL: database, Actions: []action.Action{topWords{}}})
	if err != nil {
		return err
	}
	defer e.Close()
	if _, _, err := e.ApplyWorkflow(ctx, []byte(workflow)); err != nil {
		return err
	}
	p := sluice.JobParams{Workflow: "top-words", Key: "embed:" + strings.Join(files, "\x00")}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		p.Files = append(p.Files, sluice.File{Name: filepath.Base(name), Content: f})
	}
	job, err := e.StartJob(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "job %d started\n", job.ID)
	if job, err = e.Wait(ctx, job.ID); err != nil {
		return err
	}
	items, err := e.Items(ctx, job.ID, 0)
	if err != nil {
		return err
	}
	outs, err := e.Outputs(ctx, job.ID, "top-words")
	if err != nil {
		return err
	}
	top := map[int64][]string{}
	for _, o := range outs {
		var words []string
		if err := json.Unmarshal(o.Value, &words); err != nil {
			return err
		}
		top[o.ItemID] = words
	}
	for _, it := range items {
		if it.Error != "" {
			fmt.Fprintf(stdout, "%s: error: %s\n", it.Name, it.Error)
		} else {
			fmt.Fprintf(stdout, "%s: %s\n", it.Name, strings.Join(top[it.ID], " "))
		}
	}
	fmt.Fprintf(stdout, "job %d %s\n", job.ID, job.State)
	return nil
}

// topWords records an item's n most frequent words (ties in alphabetical order) as its
// "top-words" output. A file that is not UTF-8 text is bad input: a permanent error.
type topWords struct{}

func (topWords) Spec() action.Spec {
	return action.Spec{Name: "top-words", Doc: "the most frequent words of a text file",
		Settings: []action.Setting{{Name: "n", Type: action.TypeInt, Required: true, Doc: "how many words"}}}
}

func (topWords) Run(ctx context.Context, t *action.Task, out action.Output) error {
	// A workflow's YAML gives an int, a JSON body a float64.
	var n int
	switch v := t.With["n"].(type) {
	case int:
		n = v
	case float64:
		n = int(v)
	}
	r, err := t.OpenBlob(ctx)
	if err != nil {
		return err // transient: retried with backoff
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if !utf8.Valid(b) {
		return action.Permanent(errors.New("not UTF-8 text")) // bad input: not retried
	}
	counts := map[string]int{}
	for _, f := range strings.Fields(string(b)) {
		if w := strings.ToLower(strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) })); w != "" {
			counts[w]++
		}
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool {
		if counts[words[i]] != counts[words[j]] {
			return counts[words[i]] > counts[words[j]]
		}
		return words[i] < words[j]
	})
	words = words[:min(len(words), n)]
	top, _ := json.Marshal(words)
	return out.SetOutput(ctx, "top-words", top)
}
