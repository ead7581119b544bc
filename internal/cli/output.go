package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// outputFlag is --output table|json of a listing or show command; --json is its older spelling.
type outputFlag struct{ format string }

// addOutputFlag adds --output (and --json) to fs.
func addOutputFlag(fs *flag.FlagSet) *outputFlag {
	o := &outputFlag{format: "table"}
	fs.Func("output", "output format: table or json (JSON fields are documented in docs/cli.md)", func(s string) error {
		if !oneOf(s, "table", "json") {
			return usagef("--output must be table or json, not %q", s)
		}
		o.format = s
		return nil
	})
	fs.BoolFunc("json", "the same as --output json", func(string) error { o.format = "json"; return nil })
	return o
}

// json reports whether JSON was asked for.
func (o *outputFlag) json() bool { return o != nil && o.format == "json" }

// writeJSON prints v as indented JSON and a newline: the stable, documented output of
// --output json.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jobJSON is a job in `sluice job list|show --output json` (docs/cli.md).
type jobJSON struct {
	ID              int64           `json:"id"`
	Workflow        string          `json:"workflow"`
	WorkflowVersion int             `json:"workflow_version"`
	State           record.JobState `json:"state"`
	Error           string          `json:"error"`
	Progress        float64         `json:"progress"`
	// WaitingForDownstream is set while a step of the job that creates children waits for
	// them to be processed (the job's backlog is at --max-backlog).
	WaitingForDownstream bool            `json:"waiting_for_downstream,omitempty"`
	Metadata             json.RawMessage `json:"metadata"`
	CreatedAt            time.Time       `json:"created_at"`
	FinishedAt           *time.Time      `json:"finished_at"`
}

func newJobJSON(j *record.Job, p *engine.Progress) jobJSON {
	out := jobJSON{ID: j.ID, Workflow: j.WorkflowName, WorkflowVersion: j.WorkflowVersion, State: j.State, Error: j.Error,
		Metadata: json.RawMessage(j.Metadata), CreatedAt: j.CreatedAt.UTC()}
	if len(out.Metadata) == 0 || !json.Valid(out.Metadata) {
		out.Metadata = json.RawMessage("{}")
	}
	if p != nil {
		out.Progress, out.WaitingForDownstream = p.Fraction, p.Downstream
	}
	if !j.FinishedAt.IsZero() {
		t := j.FinishedAt.UTC()
		out.FinishedAt = &t
	}
	return out
}

// itemJSON is an item of `sluice job show --output json`.
type itemJSON struct {
	ID       int64            `json:"id"`
	ParentID int64            `json:"parent_id"`
	Depth    int              `json:"depth"`
	Name     string           `json:"name"`
	State    record.ItemState `json:"state"`
	Error    string           `json:"error"`
	Tasks    []taskJSON       `json:"tasks"`
	// Steps is every step of the workflow, in its order, with its state on the item.
	Steps []stepJSON `json:"steps"`
	// Attempts is every run of the item's tasks, kept across retries.
	Attempts []attemptJSON `json:"attempts"`
}

// attemptJSON is one run of a task of an item of `sluice job show --output json`.
type attemptJSON struct {
	Step       string           `json:"step"`
	Attempt    int              `json:"attempt"`
	State      record.TaskState `json:"state"`
	Worker     string           `json:"worker,omitempty"`
	StartedAt  time.Time        `json:"started_at"`
	FinishedAt *time.Time       `json:"finished_at,omitempty"`
	Error      string           `json:"error,omitempty"`
}

// taskJSON is a task of an item of `sluice job show --output json`; Until is set for a step
// waiting for an external event with a deadline.
type taskJSON struct {
	Step    string     `json:"step"`
	State   string     `json:"state"`
	Attempt int        `json:"attempt"`
	Error   string     `json:"error,omitempty"`
	Until   *time.Time `json:"until,omitempty"`
}

// jobShowJSON is `sluice job show --output json`.
type jobShowJSON struct {
	Job   jobJSON    `json:"job"`
	Items []itemJSON `json:"items"`
}

func showJobJSON(ctx context.Context, e *env, n *node.Node, j *record.Job, p *engine.Progress, items []*record.Item, waits []store.Wait) error {
	out := jobShowJSON{Job: newJobJSON(j, p), Items: []itemJSON{}}
	states, err := n.Engine.StepStatesOf(ctx, j.ID, items)
	if err != nil {
		return err
	}
	for _, it := range items {
		tasks, err := n.Store.TaskListByItem(ctx, it.ID)
		if err != nil {
			return err
		}
		ij := itemJSON{ID: it.ID, ParentID: it.ParentID, Depth: it.Depth, Name: it.Name, State: it.State, Error: it.Error, Tasks: []taskJSON{}, Steps: []stepJSON{}, Attempts: []attemptJSON{}}
		atts, err := n.Engine.ItemHistory(ctx, it.ID)
		if err != nil {
			return err
		}
		for _, a := range atts {
			aj := attemptJSON{Step: a.Step, Attempt: a.Attempt, State: a.State, Worker: a.Worker, StartedAt: a.StartedAt.UTC(), Error: a.Error}
			if !a.FinishedAt.IsZero() {
				f := a.FinishedAt.UTC()
				aj.FinishedAt = &f
			}
			ij.Attempts = append(ij.Attempts, aj)
		}
		for _, t := range tasks {
			ij.Tasks = append(ij.Tasks, taskJSON{Step: t.Step, State: string(t.State), Attempt: t.Attempt, Error: t.Error})
		}
		for _, w := range waits {
			if w.ItemID == it.ID {
				due := w.Due.UTC()
				ij.Tasks = append(ij.Tasks, taskJSON{Step: w.Step, State: "waiting", Until: &due})
			}
		}
		for _, st := range states[it.ID] {
			sj := stepJSON{Step: st.Step, State: st.State, Needs: st.Needs, Reason: st.Reason, Attempts: st.Attempts, Error: st.Error}
			if !st.StartedAt.IsZero() {
				t := st.StartedAt.UTC()
				sj.StartedAt = &t
			}
			if !st.FinishedAt.IsZero() {
				t := st.FinishedAt.UTC()
				sj.FinishedAt = &t
			}
			ij.Steps = append(ij.Steps, sj)
		}
		out.Items = append(out.Items, ij)
	}
	return writeJSON(e.stdout, out)
}

// stepJSON is a step instance of an item of `sluice job show --output json`: every step of the
// workflow, with its state on the item (blocked with what it Needs, ready, running, complete,
// failed, skipped with its Reason).
type stepJSON struct {
	Step       string           `json:"step"`
	State      record.TaskState `json:"state"`
	Needs      []string         `json:"needs,omitempty"`
	Reason     string           `json:"reason,omitempty"`
	Attempts   int              `json:"attempts"`
	StartedAt  *time.Time       `json:"started_at,omitempty"`
	FinishedAt *time.Time       `json:"finished_at,omitempty"`
	Error      string           `json:"error,omitempty"`
}

// workflowJSON is a workflow of `sluice workflow list --output json`; built-in workflows have
// version 0, no digest and no creation time.
type workflowJSON struct {
	Name      string     `json:"name"`
	Version   int        `json:"version"`
	Digest    string     `json:"digest"`
	BuiltIn   bool       `json:"built_in"`
	CreatedAt *time.Time `json:"created_at"`
}

// tokenJSON is a token of `sluice token list --output json` (never its hash).
type tokenJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// documentJSON is an entry of `sluice documents list --output json`: a document, or an error
// (kind "error", with its message).
type documentJSON struct {
	ID         int64  `json:"id"`
	JobID      int64  `json:"job_id"`
	Kind       string `json:"kind"`
	Title      string `json:"title"`
	PageNumber int    `json:"page_number,omitempty"`
	IsFromOCR  bool   `json:"is_from_ocr,omitempty"`
	HasText    bool   `json:"has_text"`
	Message    string `json:"message,omitempty"`
}

// listDocumentsJSON prints the jobs' documents and errors as a JSON array, all of them.
func listDocumentsJSON(ctx context.Context, e *env, n *node.Node, jobIDs []int64) error {
	out := []documentJSON{}
	for _, jobID := range jobIDs {
		err := eachEntry(ctx, n, jobID, func(en entry) error {
			if en.doc != nil {
				out = append(out, documentJSON{ID: en.item.ID, JobID: jobID, Kind: "document", Title: en.doc.Title, PageNumber: en.doc.PageNumber,
					IsFromOCR: en.doc.IsFromOCR, HasText: en.item.HasText})
			}
			if en.err != nil {
				out = append(out, documentJSON{ID: en.item.ID, JobID: jobID, Kind: "error", Title: en.err.Name, Message: en.err.Message})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return writeJSON(e.stdout, out)
}

// documentShowJSON is `sluice documents show ID --output json`: the document's index entry (as in
// index.jsonl) and text, or its error.
type documentShowJSON struct {
	Document *indexEntry `json:"document"`
	Text     string      `json:"text"`
	Error    *errorEntry `json:"error"`
}

// showDocumentJSON prints one document or error as JSON.
func showDocumentJSON(ctx context.Context, e *env, n *node.Node, id int64) error {
	it, err := n.Store.ItemGet(ctx, id)
	if err != nil {
		return store.NotFound(err, "document", id)
	}
	var out documentShowJSON
	err = eachOutputOfItem(ctx, n, it, func(o *record.Output) error {
		switch o.Kind {
		case ingest.KindDocument:
			var doc ingest.Document
			if err := metadata.Unmarshal(o.Value, &doc); err != nil {
				return err
			}
			ie := indexFor(it, &doc, it.Text)
			out.Document, out.Text = &ie, it.Text
		case ingest.KindError:
			var de ingest.Error
			if err := json.Unmarshal(o.Value, &de); err != nil {
				return err
			}
			out.Error = &errorEntry{Name: de.Name, Message: de.Message}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if out.Document == nil && out.Error == nil {
		return fmt.Errorf("item %d (%s) is neither a document nor an error (it has children, or is not ingested yet)", id, printable(it.Name))
	}
	return writeJSON(e.stdout, out)
}
