package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// documentsWorkflow is the built-in workflow `sluice ingest` runs.
const documentsWorkflow = "documents"

func runIngest(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "ingest", "ingest PATH… [--ocr] [--split-by-page] [--lang xx] [--metadata JSON] [--data DIR]")
	ocr := fs.Bool("ocr", false, "run OCR on PDF pages without text and on images")
	split := fs.Bool("split-by-page", false, "make one document per PDF page")
	lang := fs.String("lang", "", "ISO-639-1 language of the documents (selects the OCR language)")
	meta := fs.String("metadata", "", "metadata for every document, as a JSON object")
	c.addEgressFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing PATH (files, folders or archives to ingest)")
	}
	if *lang != "" && (len(*lang) != 2 || strings.ToLower(*lang) != *lang) {
		return usagef("--lang must be a two-letter ISO-639-1 code such as en or fr, not %q", *lang)
	}
	md, err := jsonObject("--metadata", *meta)
	if err != nil {
		return err
	}
	inputs, skipped := collectInputs(pos)
	bad := reportSkipped(e, "ingest", skipped)
	if bad > 0 && len(inputs) == 0 {
		return errors.New("no input could be read (named above)")
	}
	opts := map[string]any{"ocr": *ocr, "split_by_page": *split}
	if *lang != "" {
		opts["lang"] = *lang
	}
	n, err := c.open(ctx, e, true)
	if err != nil {
		return err
	}
	defer n.Close()
	if err := builtin.Apply(ctx, n.Engine, documentsWorkflow); err != nil {
		return err
	}
	start := time.Now()
	job, err := startJob(ctx, n, documentsWorkflow, inputs, md, opts)
	if err != nil {
		return err
	}
	var total int64
	for _, in := range inputs {
		total += in.size
	}
	fmt.Fprintf(e.stderr, "job %d: ingesting %s (%s)\n", job.ID, plural(len(inputs), "file"), formatBytes(float64(total)))
	final, err := followIngest(ctx, e, n, job.ID)
	if err != nil {
		return err
	}
	sum, err := summarize(ctx, n, final.ID)
	if err != nil {
		return err
	}
	sum.print(e.stdout, time.Since(start))
	if final.State != record.JobComplete {
		return jobEnded(final)
	}
	return skippedError(bad)
}

// followIngest starts the workers and waits for the job like [follow], with a progress line that
// speaks of inputs, documents and bytes.
func followIngest(ctx context.Context, e *env, n *node.Node, jobID int64) (*record.Job, error) {
	n.Start(ctx)
	defer n.Stop(n.Drain())
	c := &ingestCounts{n: n, jobID: jobID}
	return watchJob(ctx, e, n, jobID, func(p *engine.Progress, job *record.Job) string {
		return ingestLine(p, job.TotalBytes, c.get())
	}, c.count)
}

// ingestProgress is what the ingest line shows besides the job's progress.
type ingestProgress struct {
	InputsDone, Inputs int // the job's roots: ingested, all
	Documents          int // documents made so far
}

// ingestCounts counts an ingest job's inputs and documents for its progress line. Documents are
// counted as they are added, from where the last count stopped. Safe for concurrent use.
type ingestCounts struct {
	n     *node.Node
	jobID int64
	mu    sync.Mutex
	c     ingestProgress
	after int64 // the item of the last document counted
}

func (c *ingestCounts) get() ingestProgress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}

// count updates the counts from the store.
func (c *ingestCounts) count(ctx context.Context) error {
	const page = 10_000
	zero := int64(0)
	var done, all int
	for after := ""; ; {
		roots, err := c.n.Store.ItemList(ctx, store.ItemListParams{JobID: c.jobID, ParentID: &zero, AfterSort: after, Limit: page})
		if err != nil {
			return err
		}
		for _, r := range roots {
			all++
			if r.State == record.ItemIngested {
				done++
			}
		}
		if len(roots) < page {
			break
		}
		after = roots[len(roots)-1].SortKey
	}
	c.mu.Lock()
	docs, last := c.c.Documents, c.after
	c.mu.Unlock()
	for {
		outs, err := c.n.Store.OutputList(ctx, store.OutputListParams{JobID: c.jobID, Kind: store.OutputDocument, AfterItem: last, Limit: page})
		if err != nil {
			return err
		}
		docs += len(outs)
		if len(outs) > 0 {
			last = outs[len(outs)-1].ItemID
		}
		if len(outs) < page {
			break
		}
	}
	c.mu.Lock()
	c.c = ingestProgress{InputsDone: done, Inputs: all, Documents: docs}
	c.after = last
	c.mu.Unlock()
	return nil
}

// ingestLine is one progress line: a bar, the inputs done (the files and archives given, their
// entries aside) out of all, the documents made so far, the bytes done (the weighted progress
// applied to the inputs' total size) and the ETA.
func ingestLine(p *engine.Progress, totalBytes float64, c ingestProgress) string {
	const width = 30
	filled := min(width, int(p.Fraction*width))
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	eta := ""
	switch {
	case p.Waiting:
		eta = ", ETA unknown (waiting for an external event)"
	case p.ETA > 0:
		eta = ", ETA " + p.ETA.Round(time.Second).String()
	}
	eta += downstreamNote(p, ", ")
	return fmt.Sprintf("%s %5.1f%%  %d/%s done, %s, %s/%s, %s%s", bar, p.Fraction*100,
		c.InputsDone, plural(c.Inputs, "input"), plural(c.Documents, "document"),
		formatBytes(p.Fraction*totalBytes), formatBytes(totalBytes), p.Elapsed.Round(100*time.Millisecond), eta)
}

// downstreamNote is "waiting for downstream" after sep while a step of the job waits for the
// items it made to be processed (engine.Progress.Downstream), else "".
func downstreamNote(p *engine.Progress, sep string) string {
	if !p.Downstream {
		return ""
	}
	return sep + "waiting for downstream"
}

func formatBytes(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%d B", int64(b))
	}
}

// summary is what a finished ingest job produced.
type summary struct {
	JobID     int64
	State     record.JobState
	Documents int
	Errors    int
	Reasons   map[string]int // error messages, generalised, by count
}

// summarize counts a job's documents and errors from its outputs.
func summarize(ctx context.Context, n *node.Node, jobID int64) (*summary, error) {
	job, err := n.Store.JobGet(ctx, jobID)
	if err != nil {
		return nil, err
	}
	s := &summary{JobID: jobID, State: job.State, Reasons: map[string]int{}}
	err = eachOutput(ctx, n, jobID, func(o *record.Output) error {
		switch o.Kind {
		case ingest.KindDocument:
			s.Documents++
		case ingest.KindError:
			s.Errors++
			var ev ingest.Error
			_ = json.Unmarshal(o.Value, &ev)
			s.Reasons[errorReason(ev.Message)]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// eachOutput calls fn with every output of a job, in item id order.
func eachOutput(ctx context.Context, n *node.Node, jobID int64, fn func(o *record.Output) error) error {
	const page = 5000
	var after int64
	for {
		outs, err := n.Store.OutputList(ctx, store.OutputListParams{JobID: jobID, AfterItem: after, Limit: page})
		if err != nil {
			return err
		}
		full := len(outs) == page
		if full {
			// Pages restart after an item id: leave the last item's outputs to the next page so
			// none of its kinds is skipped.
			last := outs[len(outs)-1].ItemID
			for len(outs) > 0 && outs[len(outs)-1].ItemID == last {
				outs = outs[:len(outs)-1]
			}
		}
		for _, o := range outs {
			if err := fn(o); err != nil {
				return err
			}
		}
		if !full || len(outs) == 0 {
			return nil
		}
		after = outs[len(outs)-1].ItemID
	}
}

// errorReason shortens an error message to the reason it shares with similar errors: the
// message's first line, cut at 120 characters.
func errorReason(msg string) string {
	msg, _, _ = strings.Cut(msg, "\n")
	msg = strings.TrimSpace(msg)
	if r := []rune(msg); len(r) > 120 {
		msg = string(r[:119]) + "…"
	}
	if msg == "" {
		msg = "(no message)"
	}
	return msg
}

func (s *summary) print(w io.Writer, took time.Duration) {
	fmt.Fprintf(w, "job %d %s in %s: %s, %s\n", s.JobID, s.State, took.Round(100*time.Millisecond),
		plural(s.Documents, "document"), plural(s.Errors, "error"))
	if len(s.Reasons) == 0 {
		return
	}
	type reason struct {
		msg string
		n   int
	}
	rs := make([]reason, 0, len(s.Reasons))
	for m, k := range s.Reasons {
		rs = append(rs, reason{m, k})
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].n != rs[j].n {
			return rs[i].n > rs[j].n
		}
		return rs[i].msg < rs[j].msg
	})
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  COUNT\tERROR")
	for i, r := range rs {
		if i == 20 {
			fmt.Fprintf(tw, "  …\t%d more reasons (sluice documents export writes errors.jsonl)\n", len(rs)-i)
			break
		}
		fmt.Fprintf(tw, "  %d\t%s\n", r.n, r.msg)
	}
	tw.Flush()
}
