package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

func runJob(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("job needs a subcommand: list, show, history, cancel, retry")
	}
	sub := args[0]
	usage, ok := map[string]string{
		"list":    "job list [--state S] [--workflow W] [--search TEXT] [--from DAY] [--until DAY] [--meta KEY=VALUE]… [--limit N] [--output table|json]",
		"show":    "job show ID [--output table|json]",
		"history": "job history ID [--limit N] [--output table|json]",
		"cancel":  "job cancel ID",
		"retry":   "job retry ID [--follow]",
	}[sub]
	if !ok {
		return usagef("unknown job subcommand %q (want list, show, history, cancel, retry)", sub)
	}
	// Each subcommand has only its own flags (and the global ones), so -h shows what it takes.
	fs, c := newFlags(e, "job "+sub, usage)
	var (
		state, workflowF, search, from, until = new(string), new(string), new(string), new(string), new(string)
		meta                                  stringsFlag
		limit                                 = new(int)
		out                                   *outputFlag
		followJob                             = new(bool)
	)
	switch sub {
	case "list":
		state = fs.String("state", "", "only jobs in this state (running, complete, failed, canceled)")
		workflowF = fs.String("workflow", "", "only jobs of this workflow")
		search = fs.String("search", "", "only jobs whose id this is, or whose workflow, key, error or metadata contains it")
		from = fs.String("from", "", "only jobs started on or after this day (YYYY-MM-DD, UTC) or time (RFC 3339)")
		until = fs.String("until", "", "only jobs started on or before this day (YYYY-MM-DD, UTC) or before this time (RFC 3339)")
		fs.Var(&meta, "meta", "only jobs whose metadata has KEY=VALUE (repeatable)")
		limit = fs.Int("limit", 50, "at most this many jobs")
	case "history":
		limit = fs.Int("limit", 50, "at most this many tasks (0: all)")
	case "retry":
		followJob = fs.Bool("follow", false, "run the job's tasks in this process and wait for it to end, like sluice run")
	}
	if sub == "list" || sub == "show" || sub == "history" {
		out = addOutputFlag(fs)
	}
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	// Following runs workers here, so it needs the engine's hold on the data dir.
	n, err := c.open(ctx, e, sub == "retry" && *followJob)
	if err != nil {
		return err
	}
	defer n.Close()
	switch sub {
	case "list":
		if *state != "" {
			if _, err := record.ParseJobState(*state); err != nil {
				return usagef("--state: %v", err)
			}
		}
		p, err := api.JobFilter(url.Values{"state": {*state}, "workflow": {*workflowF}, "q": {*search},
			"created_from": {*from}, "created_until": {*until}, "meta": meta})
		if err != nil {
			return usagef("%s", strings.NewReplacer("created_from", "--from", "created_until", "--until", "meta ", "--meta ", "q and workflow", "--search and --workflow").Replace(err.Error()))
		}
		if *limit <= 0 {
			return usagef("--limit must be positive for job list")
		}
		p.Limit = *limit + 1 // one more tells whether there are more
		jobs, err := n.Store.JobList(ctx, p)
		if err != nil {
			return err
		}
		more := len(jobs) > *limit
		jobs = jobs[:min(len(jobs), *limit)]
		if out.json() {
			list := []jobJSON{}
			for _, j := range jobs {
				p, err := n.Engine.Progress(ctx, j.ID)
				if err != nil {
					return err
				}
				list = append(list, newJobJSON(j, p))
			}
			return writeJSON(e.stdout, list)
		}
		tb := newTable([]int{7}, "ID", "WORKFLOW", "STATE", "PROGRESS", "STARTED", "FINISHED", "TOOK", "ERROR")
		now := n.Engine.Now()
		for _, j := range jobs {
			p, _ := n.Engine.Progress(ctx, j.ID)
			frac := 0.0
			if p != nil {
				frac = p.Fraction
			}
			finished, took := "-", now.Sub(j.CreatedAt)
			if !j.FinishedAt.IsZero() {
				finished, took = j.FinishedAt.Local().Format(time.DateTime), j.FinishedAt.Sub(j.CreatedAt)
			}
			errText := j.Error
			if errText == string(j.State) {
				errText = ""
			}
			tb.add(strconv.FormatInt(j.ID, 10), fmt.Sprintf("%s v%d", j.WorkflowName, j.WorkflowVersion), string(j.State), fmt.Sprintf("%.1f%%", frac*100),
				j.CreatedAt.Local().Format(time.DateTime), finished, took.Round(time.Second).String(), errText)
		}
		if err := tb.write(e.stdout, width(e.stdout)); err != nil {
			return err
		}
		if more {
			fmt.Fprintf(e.stderr, "more jobs match than the %d shown: --limit N shows more; --state, --workflow, --search, --from, --until and --meta narrow the list\n", *limit)
		}
		return nil
	case "show":
		id, err := jobID(pos)
		if err != nil {
			return err
		}
		return showJob(ctx, e, n, id, out.json())
	case "history":
		id, err := jobID(pos)
		if err != nil {
			return err
		}
		return jobHistory(ctx, e, n, id, *limit, out.json())
	case "cancel":
		id, err := jobID(pos)
		if err != nil {
			return err
		}
		if err := n.Engine.Cancel(audit.Note(ctx, audit.Entry{Who: audit.LocalUser(), Action: "cancel", JobID: id}), id); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "job %d canceled\n", id)
		return nil
	case "retry":
		id, err := jobID(pos)
		if err != nil {
			return err
		}
		if _, err := n.Engine.Retry(audit.Note(ctx, audit.Entry{Who: audit.LocalUser(), Action: "retry", JobID: id}), id); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "job %d retried: its failed and canceled tasks are ready again\n", id)
		if !*followJob {
			fmt.Fprintf(e.stderr, "they run in `sluice serve`, or here with `sluice resume`; watch with `sluice job show %d`\n", id)
			return nil
		}
		final, err := follow(ctx, e, n, id)
		if err != nil {
			return err
		}
		if final.State != record.JobComplete {
			return jobEnded(final)
		}
		return nil
	default:
		return usagef("unknown job subcommand %q (want list, show, history, cancel, retry)", sub)
	}
}

func jobID(pos []string) (int64, error) {
	if len(pos) != 1 {
		return 0, usagef("want one job ID")
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("job ID %q is not a positive number", pos[0])
	}
	return id, nil
}

// maxShownItems bounds the items `job show` prints.
const maxShownItems = 200

func showJob(ctx context.Context, e *env, n *node.Node, id int64, asJSON bool) error {
	j, err := n.Store.JobGet(ctx, id)
	if err != nil {
		return err
	}
	p, err := n.Engine.Progress(ctx, id)
	if err != nil {
		return err
	}
	items, err := n.Store.ItemList(ctx, store.ItemListParams{JobID: id, Limit: maxShownItems + 1})
	if err != nil {
		return err
	}
	if len(items) > maxShownItems {
		items = items[:maxShownItems]
		defer fmt.Fprintf(e.stderr, "job %d has more than the %d items shown (the first in tree order): sluice documents list --job %d lists its documents, sluice job history %d its tasks\n",
			id, maxShownItems, id, id)
	}
	waits, err := n.Store.WaitListByJob(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		return showJobJSON(ctx, e, n, j, p, items, waits)
	}
	states, err := n.Engine.StepStatesOf(ctx, id, items)
	if err != nil {
		return err
	}
	// Steps waiting for an external event with a deadline wait until it, by item and step.
	until := map[int64]map[string]time.Time{}
	for _, w := range waits {
		if until[w.ItemID] == nil {
			until[w.ItemID] = map[string]time.Time{}
		}
		until[w.ItemID][w.Step] = w.Due
	}
	fmt.Fprintf(e.stdout, "job %d: %s v%d, %s", j.ID, j.WorkflowName, j.WorkflowVersion, j.State)
	if j.Error != "" && j.Error != string(j.State) {
		fmt.Fprintf(e.stdout, " (%s)", j.Error)
	}
	fmt.Fprintf(e.stdout, "\nprogress %.1f%%%s, elapsed %s; items: %s; tasks: %s\n\n", p.Fraction*100, downstreamNote(p, ", "), p.Elapsed.Round(time.Millisecond), stateCounts(p.Items), stateCounts(p.Tasks))
	// Statuses a workflow records on its items (metadata "status", such as the graph's
	// resolution-result) get a column of their own when there are any.
	statuses := map[int64]string{}
	for _, it := range items {
		statuses[it.ID] = itemStatus(it.Metadata)
	}
	col := ""
	for _, s := range statuses {
		if s != "" {
			col = "\tSTATUS"
		}
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tSTATE\tNAME\tSTEPS"+col+"\tERROR")
	for _, it := range items {
		var ts []string
		for _, st := range states[it.ID] {
			ts = append(ts, stepWords(st, until[it.ID][st.Step]))
		}
		st := ""
		if col != "" {
			st = "\t" + statuses[it.ID]
		}
		fmt.Fprintf(tw, "%d\t%s\t%s%s\t%s%s\t%s\n", it.ID, it.State, strings.Repeat("  ", it.Depth), it.Name, strings.Join(ts, " "), st, it.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return showHistory(ctx, e, n, items)
}

// showHistory prints the attempts of the items that did not simply succeed at once (a failed or
// canceled attempt, or a task run more than once): what happened, retries included.
func showHistory(ctx context.Context, e *env, n *node.Node, items []*record.Item) error {
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	header := false
	for _, it := range items {
		atts, err := n.Engine.ItemHistory(ctx, it.ID)
		if err != nil {
			return err
		}
		eventful := false
		for _, a := range atts {
			eventful = eventful || a.State != record.TaskComplete || a.Attempt > 1
		}
		if !eventful {
			continue
		}
		if !header {
			fmt.Fprintln(e.stdout, "\nattempts of the items that failed, were canceled or ran again:")
			fmt.Fprintln(tw, "ITEM\tSTEP\tATTEMPT\tSTATE\tSTARTED\tTOOK\tWORKER\tERROR")
			header = true
		}
		for _, a := range atts {
			took := "-"
			if !a.FinishedAt.IsZero() {
				took = a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
			}
			worker := a.Worker
			if worker == "" {
				worker = "-"
			}
			msg, _, _ := strings.Cut(a.Error, "\n")
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", it.ID, a.Step, a.Attempt, a.State,
				a.StartedAt.Local().Format(time.DateTime), took, worker, msg)
		}
	}
	return tw.Flush()
}

// historyJSON is an attempt of `sluice job history --output json` (docs/cli.md).
type historyJSON struct {
	TaskID      int64            `json:"task_id"`
	ItemID      int64            `json:"item_id"`
	Step        string           `json:"step"`
	Action      string           `json:"action"`
	Attempt     int              `json:"attempt"`
	State       record.TaskState `json:"state"`
	Worker      string           `json:"worker"`
	QueuedAt    time.Time        `json:"queued_at"`
	StartedAt   time.Time        `json:"started_at"`
	FinishedAt  *time.Time       `json:"finished_at"`
	DurationSec *float64         `json:"duration_seconds"`
	Error       string           `json:"error"`
}

// jobHistory prints every attempt of the job's tasks, task by task: the item, the step, when it
// was queued, how long it waited and ran, its worker and error. limit bounds the tasks read
// (0: all); a history cut short says so on stderr.
func jobHistory(ctx context.Context, e *env, n *node.Node, id int64, limit int, asJSON bool) error {
	if _, err := n.Store.JobGet(ctx, id); err != nil {
		return err
	}
	var atts []engine.Attempt
	var after int64
	truncated := false
	for read := 0; ; {
		page := 500
		if limit > 0 && limit-read < page {
			page = limit - read
		}
		got, last, err := n.Engine.JobHistory(ctx, id, after, page)
		if err != nil {
			return err
		}
		atts = append(atts, got...)
		read += page
		if last == 0 {
			break
		}
		if limit > 0 && read >= limit {
			truncated = true
			break
		}
		after = last
	}
	if asJSON {
		list := []historyJSON{}
		for _, a := range atts {
			j := historyJSON{TaskID: a.TaskID, ItemID: a.ItemID, Step: a.Step, Action: a.Action, Attempt: a.Attempt, State: a.State,
				Worker: a.Worker, QueuedAt: a.QueuedAt.UTC(), StartedAt: a.StartedAt.UTC(), Error: a.Error}
			if !a.FinishedAt.IsZero() {
				f, d := a.FinishedAt.UTC(), a.FinishedAt.Sub(a.StartedAt).Seconds()
				j.FinishedAt, j.DurationSec = &f, &d
			}
			list = append(list, j)
		}
		if err := writeJSON(e.stdout, list); err != nil {
			return err
		}
	} else {
		tb := newTable([]int{8}, "ITEM", "STEP", "ATTEMPT", "STATE", "STARTED", "WAITED", "TOOK", "WORKER", "ERROR")
		for _, a := range atts {
			waited, took := "-", "-"
			if a.Attempt == 1 && !a.QueuedAt.IsZero() {
				waited = a.StartedAt.Sub(a.QueuedAt).Round(time.Millisecond).String()
			}
			if !a.FinishedAt.IsZero() {
				took = a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
			}
			tb.add(strconv.FormatInt(a.ItemID, 10), a.Step, strconv.Itoa(a.Attempt), string(a.State),
				a.StartedAt.Local().Format(time.DateTime), waited, took, dash(a.Worker), a.Error)
		}
		if err := tb.write(e.stdout, width(e.stdout)); err != nil {
			return err
		}
	}
	if truncated {
		fmt.Fprintf(e.stderr, "job %d has more tasks than the %d shown: --limit N shows more, --limit 0 all\n", id, limit)
	}
	return nil
}

// dash is s, or "-" for an empty s (an empty column of a table).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runEvent(ctx context.Context, e *env, args []string) error {
	const usage = "event fire (--item ID | --job ID --key NAME=VALUE | --job ID --body FILE) [--body FILE] EVENT"
	if len(args) == 0 || args[0] != "fire" {
		return usagef("usage: %s", usage)
	}
	fs, c := newFlags(e, "event fire", usage)
	itemID := fs.Int64("item", 0, "item id")
	jobIDf := fs.Int64("job", 0, "job id (with --key or --body)")
	key := fs.String("key", "", "correlate by a metadata key: NAME=VALUE")
	bodyFile := fs.String("body", "", "a file holding the event's JSON payload: correlated by the workflow's correlate: declarations")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one EVENT")
	}
	var body []byte
	if *bodyFile != "" {
		if body, err = os.ReadFile(*bodyFile); err != nil {
			return fmt.Errorf("read the event body: %w", err)
		}
		if !json.Valid(body) {
			return usagef("--body %s is not JSON", *bodyFile)
		}
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	p := engine.FireParams{Event: pos[0], Body: body}
	// An event fired goes in the audit log, in the transaction that fires it.
	fire := func(q engine.FireParams) (*engine.Fired, error) {
		detail := fmt.Sprintf("%s to item %d", q.Event, q.ItemID)
		if q.Key != "" {
			detail = fmt.Sprintf("%s to %s=%s", q.Event, q.Key, q.Value)
		} else if q.ItemID == 0 {
			detail = q.Event + " with a body"
		}
		return n.Engine.Fire(audit.Note(ctx, audit.Entry{Who: audit.LocalUser(), Action: "event", JobID: q.JobID, Detail: detail}), q)
	}
	switch {
	case *itemID > 0:
		it, err := n.Store.ItemGet(ctx, *itemID)
		if err != nil {
			return err
		}
		p.JobID, p.ItemID = it.JobID, it.ID
	case *jobIDf > 0 && *key != "":
		k, v, ok := strings.Cut(*key, "=")
		if !ok {
			return usagef("--key must be NAME=VALUE")
		}
		str, _ := json.Marshal(v)
		p.JobID, p.Key, p.Value = *jobIDf, k, str
		// A value that reads as a number or a boolean matches one too, as well as the string;
		// one that is a quoted JSON string matches that string.
		var alt []byte
		var x any
		if metadata.Unmarshal([]byte(v), &x) == nil {
			switch x.(type) {
			case json.Number, bool:
				alt = []byte(v)
			case string:
				p.Value = []byte(v)
			}
		}
		if alt != nil {
			q := p
			q.Value = alt
			f, err := fire(q)
			if _, none := errors.AsType[*engine.NoMatchError](err); err != nil && !none {
				return err
			}
			if err == nil {
				// Matched as typed: the string form fires too where it matches, and need not.
				if g, err := fire(p); err == nil {
					f.Items, f.Fired = append(f.Items, g.Items...), f.Fired+g.Fired
				} else if _, none := errors.AsType[*engine.NoMatchError](err); !none {
					return err
				}
				return printFired(e, pos[0], f)
			}
		}
	case *jobIDf > 0 && body != nil:
		p.JobID = *jobIDf
	default:
		return usagef("give --item ID, or --job ID with --key NAME=VALUE or --body FILE")
	}
	f, err := fire(p)
	if err != nil {
		return err
	}
	return printFired(e, pos[0], f)
}

// printFired says what an event fire did.
func printFired(e *env, event string, f *engine.Fired) error {
	fmt.Fprintf(e.stdout, "fired %s on %d of %d items %v (the others had it already)\n", event, f.Fired, len(f.Items), f.Items)
	return nil
}

func runWorkflow(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("workflow needs a subcommand: validate, graph, apply, list, actions")
	}
	sub := args[0]
	usage, ok := map[string]string{
		"validate": "workflow validate FILE…",
		"graph":    "workflow graph FILE|NAME [--format svg|dot] [-o FILE]",
		"apply":    "workflow apply FILE",
		"list":     "workflow list [--output table|json]",
		"actions":  "workflow actions [--all]",
	}[sub]
	if !ok {
		return usagef("unknown workflow subcommand %q (want validate, graph, apply, list, actions)", sub)
	}
	// Each subcommand has only its own flags (and the global ones), so -h shows what it takes.
	fs, c := newFlags(e, "workflow "+sub, usage)
	var (
		format, out = new(string), new(string)
		output      *outputFlag
		allActions  = new(bool)
	)
	switch sub {
	case "graph":
		format = fs.String("format", "svg", "svg or dot")
		out = fs.String("o", "", "write to this file instead of stdout")
	case "list":
		output = addOutputFlag(fs)
	case "actions":
		allActions = fs.Bool("all", false, "the built-in workflows' own actions too")
	}
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	cat := node.Catalog()
	switch sub {
	case "validate":
		if len(pos) == 0 {
			return usagef("want one or more workflow files")
		}
		bad := 0
		for _, p := range pos {
			def, err := readDefinition(p)
			if err == nil {
				var warnings []workflow.Diagnostic
				warnings, err = workflow.Validate(def, cat.Spec, cat.Names()...)
				printDiagnostics(e, warnings)
			}
			if err != nil {
				fmt.Fprintln(e.stderr, err)
				bad++
				continue
			}
			fmt.Fprintf(e.stdout, "%s: workflow %q is valid (%s)\n", p, def.Name, plural(len(def.Steps), "step"))
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d workflows invalid", bad, len(pos))
		}
		return nil
	case "graph":
		if len(pos) != 1 {
			return usagef("want one workflow file or name")
		}
		if !oneOf(*format, "svg", "dot") {
			return usagef("--format must be svg or dot")
		}
		def, err := readDefinition(pos[0])
		if err != nil {
			n, oerr := c.open(ctx, e, false)
			if oerr != nil {
				return err
			}
			defer n.Close()
			if src, ok := builtin.Source(pos[0]); ok {
				def, err = workflow.Parse(src, pos[0]+".yaml")
			} else if def, _, err = n.Engine.Definition(ctx, pos[0], 0); err != nil {
				return err
			}
			if err != nil {
				return err
			}
		}
		g := workflow.NewGraph(def, cat.Spec)
		var b []byte
		if *format == "dot" {
			b = []byte(g.DOT())
		} else {
			b = g.SVG()
		}
		if *out != "" {
			return writeFileAtomic(*out, b)
		}
		_, err = e.stdout.Write(b)
		return err
	case "apply":
		if len(pos) == 0 {
			return usagef("want one or more workflow files")
		}
		n, err := c.open(ctx, e, false)
		if err != nil {
			return err
		}
		defer n.Close()
		for _, p := range pos {
			src, err := readSource(p)
			if err != nil {
				return err
			}
			wf, warnings, err := n.Engine.ApplyWorkflow(audit.Note(ctx, audit.Entry{Who: audit.LocalUser(), Action: "workflow", Detail: "saved"}), src, p)
			printDiagnostics(e, warnings)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "workflow %s v%d (digest %.12s)\n", wf.Name, wf.Version, wf.Digest)
		}
		return nil
	case "list":
		n, err := c.open(ctx, e, false)
		if err != nil {
			return err
		}
		defer n.Close()
		wfs, err := n.Store.WorkflowList(ctx)
		if err != nil {
			return err
		}
		if output.json() {
			list := []workflowJSON{}
			for _, wf := range wfs {
				created := wf.CreatedAt.UTC()
				list = append(list, workflowJSON{Name: wf.Name, Version: wf.Version, Digest: wf.Digest, CreatedAt: &created})
			}
			for _, name := range builtin.Names() {
				list = append(list, workflowJSON{Name: name, BuiltIn: true})
			}
			return writeJSON(e.stdout, list)
		}
		tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tVERSION\tDIGEST\tCREATED")
		for _, wf := range wfs {
			fmt.Fprintf(tw, "%s\t%d\t%.12s\t%s\n", wf.Name, wf.Version, wf.Digest, wf.CreatedAt.Local().Format(time.DateTime))
		}
		stored := map[string]bool{}
		for _, wf := range wfs {
			stored[wf.Name] = true
		}
		for _, name := range builtin.Names() {
			// A built-in workflow is stored once a job uses it: its stored versions stand for it.
			if !stored[name] {
				fmt.Fprintf(tw, "%s\t(built in)\t\t\n", name)
			}
		}
		return tw.Flush()
	case "actions":
		// The actions any workflow may use first; then, with --all, each built-in workflow's
		// own, under its name.
		groups := map[string][]string{}
		for _, name := range cat.Names() {
			owner := builtin.Owner(name)
			groups[owner] = append(groups[owner], name)
		}
		owners := slices.Sorted(maps.Keys(groups))
		hidden := 0
		for i, owner := range owners {
			if owner != "" && !*allActions {
				hidden += len(groups[owner])
				continue
			}
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			if owner != "" {
				fmt.Fprintf(e.stdout, "the %s workflow's own actions:\n", owner)
			}
			tb := newTable([]int{1, 2, 3}, "ACTION", "SETTINGS", "OUTCOMES", "DESCRIPTION")
			for _, name := range groups[owner] {
				spec, _ := cat.Spec(name)
				var settings []string
				for _, s := range spec.Settings {
					settings = append(settings, s.Name)
				}
				tb.add(name, dash(strings.Join(settings, ",")), dash(strings.Join(spec.Outcomes, ",")), spec.Doc)
			}
			if err := tb.write(e.stdout, width(e.stdout)); err != nil {
				return err
			}
		}
		if hidden > 0 {
			fmt.Fprintf(e.stderr, "%d actions of the built-in workflows are not shown: --all lists them\n", hidden)
		}
		return nil
	default:
		return usagef("unknown workflow subcommand %q", sub)
	}
}

func readSource(path string) ([]byte, error) {
	src, err := readFileLimited(path, workflow.MaxSourceBytes+1)
	if err != nil {
		return nil, fmt.Errorf("read workflow: %w", err)
	}
	return src, nil
}

func readDefinition(path string) (*workflow.Definition, error) {
	src, err := readSource(path)
	if err != nil {
		return nil, err
	}
	return workflow.Parse(src, path)
}

func printDiagnostics(e *env, ds []workflow.Diagnostic) {
	for _, d := range ds {
		loc := ""
		if d.Line > 0 {
			loc = fmt.Sprintf("line %d: ", d.Line)
		}
		if d.Step != "" {
			loc += fmt.Sprintf("step %q: ", d.Step)
		}
		fmt.Fprintf(e.stderr, "%s: %s%s\n", d.Severity, loc, d.Message)
	}
}

func applyBuiltin(ctx context.Context, n *node.Node, name string) error {
	if name == fileset.WorkflowName {
		// With this process's politeness delay and publishing (docs/fileset.md).
		_, err := n.Fileset.ApplyWorkflow(ctx, n.Engine)
		return err
	}
	return builtin.Apply(ctx, n.Engine, name)
}

// itemStatus renders an item's metadata "status" object as sorted key=value pairs ("" without one).
func itemStatus(md []byte) string {
	var m struct {
		Status map[string]any `json:"status"`
	}
	if metadata.Unmarshal(md, &m) != nil || len(m.Status) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m.Status))
	for k := range m.Status {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m.Status[k])
	}
	return strings.Join(parts, " ")
}

// stateCounts prints counts by state in plain words, largest first: "16 complete, 2 failed".
func stateCounts[S ~string](m map[S]int) string {
	if len(m) == 0 {
		return "none"
	}
	states := slices.Collect(maps.Keys(m))
	slices.SortFunc(states, func(a, b S) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return strings.Compare(string(a), string(b))
	})
	parts := make([]string, len(states))
	for i, st := range states {
		parts[i] = strconv.Itoa(m[st]) + " " + string(st)
	}
	return strings.Join(parts, ", ")
}

// stepWords is a step instance as `job show` prints it: step:state, with what a blocked step
// still needs (and until when, for one with a deadline).
func stepWords(st engine.StepState, until time.Time) string {
	w := st.Step + ":" + string(st.State)
	var more []string
	if st.State == record.TaskBlocked && len(st.Needs) > 0 {
		more = append(more, strings.Join(st.Needs, "+"))
	}
	if !until.IsZero() && st.State == record.TaskBlocked {
		more = append(more, "until "+until.UTC().Format(time.RFC3339))
	}
	if len(more) > 0 {
		w += "(" + strings.Join(more, ", ") + ")"
	}
	return w
}
