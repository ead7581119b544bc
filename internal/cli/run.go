package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

func runRun(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "run", "run WORKFLOW [FILES…] [--meta JSON] [--data DIR]")
	meta := fs.String("meta", "", "job metadata as a JSON object")
	opts := fs.String("options", "", "job options as a JSON object")
	c.addEgressFlags(fs)
	c.addFilesetFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("missing WORKFLOW (a workflow file or the name of a stored workflow)")
	}
	md, err := jsonObject("--meta", *meta)
	if err != nil {
		return err
	}
	op, err := jsonObject("--options", *opts)
	if err != nil {
		return err
	}
	n, err := c.open(ctx, e, true)
	if err != nil {
		return err
	}
	defer n.Close()
	name, err := resolveWorkflow(ctx, e, n, pos[0])
	if err != nil {
		return err
	}
	inputs, skipped := collectInputs(pos[1:])
	bad := reportSkipped(e, "run", skipped)
	if bad > 0 && len(inputs) == 0 {
		return errors.New("no input could be read (named above)")
	}
	job, err := startJob(ctx, n, name, inputs, md, op)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "job %d: workflow %s v%d, %s\n", job.ID, job.WorkflowName, job.WorkflowVersion, plural(len(inputs), "input"))
	final, err := follow(ctx, e, n, job.ID)
	if err != nil {
		return err
	}
	if final.State != record.JobComplete {
		return jobEnded(final)
	}
	return skippedError(bad)
}

func runResume(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "resume", "resume [--data DIR]")
	c.addEgressFlags(fs)
	c.addFilesetFlags(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	n, err := c.open(ctx, e, true)
	if err != nil {
		return err
	}
	defer n.Close()
	jobs, err := n.Store.JobListRunning(ctx)
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		fmt.Fprintln(e.stderr, "no unfinished jobs")
		return nil
	}
	n.Start(ctx)
	defer n.Stop(n.Drain())
	for _, j := range jobs {
		fmt.Fprintf(e.stderr, "resuming job %d (%s)\n", j.ID, j.WorkflowName)
		start := time.Now()
		if _, err := waitJob(ctx, e, n, j.ID); err != nil {
			return err
		}
		if j.WorkflowName == documentsWorkflow {
			// As `sluice ingest` ends: the documents and errors the job shows now, from its
			// outputs (a retry keeps an error until a new result replaces it).
			sum, err := summarize(ctx, n, j.ID)
			if err != nil {
				return err
			}
			sum.print(e.stdout, time.Since(start))
		}
	}
	return nil
}

func jsonObject(flagName, s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	m, err := metadata.Decode([]byte(s))
	if err != nil {
		return nil, usagef("%s must be a JSON object, such as '{\"key\": \"value\"}'", flagName)
	}
	return m, nil
}

// resolveWorkflow applies a workflow file, or checks that a stored or built-in workflow exists.
func resolveWorkflow(ctx context.Context, e *env, n *node.Node, arg string) (string, error) {
	if strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") || strings.HasSuffix(arg, ".json") || strings.ContainsRune(arg, os.PathSeparator) {
		src, err := os.ReadFile(arg)
		if err != nil {
			return "", fmt.Errorf("read workflow: %w", err)
		}
		wf, warnings, err := n.Engine.ApplyWorkflow(ctx, src, arg)
		printDiagnostics(e, warnings)
		if err != nil {
			return "", err
		}
		return wf.Name, nil
	}
	if _, _, err := n.Engine.Definition(ctx, arg, 0); err == nil {
		return arg, nil
	}
	if err := applyBuiltin(ctx, n, arg); err != nil {
		return "", fmt.Errorf("workflow %q: not a file, a stored workflow or a built-in one", arg)
	}
	return arg, nil
}

// input is one file to hand to a job.
type input struct {
	path string // on disk
	name string // as shown: relative to the argument's parent for folders
	size int64
}

// inputSkip is a path named or found that is not ingested, and why.
type inputSkip struct {
	path, reason string
	// notice marks a skip that is no error: a symbolic link in a folder, never followed.
	notice bool
}

// collectInputs expands arguments: files as they are, folders walked (sorted, so the same
// command always yields the same roots in the same order). Symlinks in folders are not followed.
// A path that cannot be ingested — missing, unreadable, a symlink loop, a folder the walk cannot
// enter — is skipped with its reason rather than failing the others.
func collectInputs(args []string) ([]input, []inputSkip) {
	var out []input
	var skipped []inputSkip
	skip := func(p string, err error) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		skipped = append(skipped, inputSkip{path: p, reason: err.Error()})
	}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			skip(a, err)
			continue
		}
		if !st.IsDir() {
			if err := readable(a); err != nil {
				skip(a, err)
				continue
			}
			out = append(out, input{path: a, name: filepath.Base(a), size: st.Size()})
			continue
		}
		base := filepath.Dir(filepath.Clean(a))
		var found []input
		_ = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				skip(p, err)
				if d != nil && d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				skipped = append(skipped, inputSkip{path: p, reason: "a symbolic link, not followed", notice: true})
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err == nil {
				err = readable(p)
			}
			if err != nil {
				skip(p, err)
				return nil
			}
			rel, _ := filepath.Rel(base, p)
			found = append(found, input{path: p, name: filepath.ToSlash(rel), size: info.Size()})
			return nil
		})
		sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
		out = append(out, found...)
	}
	return out, skipped
}

// readable reports why a file cannot be opened for reading, if it cannot.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// reportSkipped prints each skipped input on stderr, naming it and the reason, and returns how
// many were errors (notices aside).
func reportSkipped(e *env, cmd string, skipped []inputSkip) int {
	bad := 0
	for _, s := range skipped {
		fmt.Fprintf(e.stderr, "sluice %s: skipped %q: %s\n", cmd, s.path, s.reason)
		if !s.notice {
			bad++
		}
	}
	return bad
}

// skippedError is the command's error when inputs were skipped: the others were ingested, and
// the exit status says not everything was.
func skippedError(bad int) error {
	if bad == 0 {
		return nil
	}
	return fmt.Errorf("%s could not be read (named above); the others were ingested", plural(bad, "input"))
}

// jobKey identifies "the same command": the workflow, the absolute inputs and the settings. Running
// the same command again after a kill finds the job and resumes it instead of starting over.
func jobKey(workflow string, inputs []input, md, opts map[string]any) string {
	h := sha256.New()
	fmt.Fprintln(h, workflow)
	for _, in := range inputs {
		abs, _ := filepath.Abs(in.path)
		fmt.Fprintln(h, abs, in.size)
	}
	b, _ := json.Marshal([]any{md, opts})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// startJob creates the job (or finds the one a previous run of the same command created), stores
// each input's blob and adds the roots. Each step is idempotent, so a kill at any point is
// repaired by running the command again; a database restart or failover meanwhile is waited
// for (see [engine.Submission]), and past that wait the error says to run the command again.
func startJob(ctx context.Context, n *node.Node, wf string, inputs []input, md, opts map[string]any) (*record.Job, error) {
	job, err := submitJob(ctx, n, wf, inputs, md, opts)
	if errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil {
		return nil, fmt.Errorf("%w; the job's inputs are not all recorded: run the same command again to resume it", err)
	}
	return job, err
}

func submitJob(ctx context.Context, n *node.Node, wf string, inputs []input, md, opts map[string]any) (*record.Job, error) {
	sub, err := n.Engine.Submit(ctx, engine.SubmitParams{Workflow: wf, Key: jobKey(wf, inputs, md, opts), Metadata: md, Options: opts})
	if err != nil {
		return nil, err
	}
	if !sub.Open() {
		return sub.Job(), nil
	}
	n.Start(ctx)
	for i, in := range inputs {
		// Roots already recorded by an interrupted run are skipped without reading their files.
		if has, err := sub.Has(ctx, i); err != nil {
			return nil, err
		} else if has {
			continue
		}
		sha, size, err := putFile(ctx, n, in.path)
		if err != nil {
			return nil, err
		}
		if err := sub.Add(ctx, engine.Root{Ordinal: i, Name: in.name, BlobSHA256: sha, Size: size}); err != nil {
			return nil, err
		}
	}
	// Every root is recorded: the job may complete from now on.
	if err := sub.Seal(ctx); err != nil {
		return nil, err
	}
	return sub.Job(), nil
}

func putFile(ctx context.Context, n *node.Node, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("read input: %w", err)
	}
	defer f.Close()
	sha, size, err := n.Blobs.Put(ctx, f)
	if err != nil {
		return "", 0, fmt.Errorf("store %s: %w", path, err)
	}
	return sha, size, nil
}

// follow starts the workers (if not yet) and waits for the job, printing progress.
func follow(ctx context.Context, e *env, n *node.Node, jobID int64) (*record.Job, error) {
	n.Start(ctx)
	defer n.Stop(n.Drain())
	return waitJob(ctx, e, n, jobID)
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// waitJob waits for the job to end, showing its progress: a redrawn bar on a TTY, a plain line
// every few seconds otherwise.
func waitJob(ctx context.Context, e *env, n *node.Node, jobID int64) (*record.Job, error) {
	return watchJob(ctx, e, n, jobID, func(p *engine.Progress, _ *record.Job) string { return progressLine(p) }, nil)
}

// watchJob waits for the job to end, printing line's rendering of its progress: twice a second
// on a TTY, every 5s otherwise, whatever the counting costs. Progress reads every task of the job
// (and count, when set, what else the line shows), so it is counted in the background, one count
// at a time, the next waiting nine times as long as the last took: on a job of millions the
// counts lag, but the line goes on (its elapsed time moving) and the database gives the
// counting at most a tenth of one connection. The end is watched with a cheap JobGet.
func watchJob(ctx context.Context, e *env, n *node.Node, jobID int64, line func(*engine.Progress, *record.Job) string,
	count func(context.Context) error) (*record.Job, error) {
	tty := isTTY(e.stderr)
	printEvery := plainEvery
	if tty {
		printEvery = 500 * time.Millisecond
	}
	var printed time.Time
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	counter := newProgressCounter(n, jobID, count)
	if e.stderr != io.Discard { // nobody reads the lines (bench ingest): spare the counting
		cctx, stop := context.WithCancel(ctx)
		go counter.run(cctx)
		defer func() { stop(); <-counter.done }()
	}
	var away time.Time // since when the database has been unreachable
	for {
		job, err := n.Store.JobGet(ctx, jobID)
		if errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil {
			// A restart or failover: the job goes on (the workers wait for the database too);
			// so does the watch, for a while.
			if away.IsZero() {
				away = time.Now()
				fmt.Fprintf(e.stderr, "\ndatabase unavailable, waiting for it: %v\n", err)
			}
			if time.Since(away) < 2*time.Minute {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-tick.C:
				}
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		away = time.Time{}
		done := job.State != record.JobRunning
		if e.stderr != io.Discard && (done || time.Since(printed) >= printEvery) {
			var p *engine.Progress
			if done {
				// The last line counts what the job ended with.
				if p, err = counter.once(ctx); err != nil {
					return nil, err
				}
			} else if p, err = counter.latest(); err != nil {
				return nil, err
			}
			if p != nil {
				if !done {
					p.Elapsed = max(p.Elapsed, n.Engine.Now().Sub(job.CreatedAt))
				}
				if tty {
					fmt.Fprintf(e.stderr, "\r\033[K%s", line(p, job))
					if done {
						fmt.Fprintln(e.stderr)
					}
				} else {
					fmt.Fprintln(e.stderr, line(p, job))
				}
				printed = time.Now()
			}
		}
		if done {
			return job, nil
		}
		if full := diskFull(n.DataDir); full != nil {
			// Every commit and blob write fails now: stop, rather than let tasks spend their
			// attempts on it. The job resumes where it was once there is space again.
			if tty {
				fmt.Fprintln(e.stderr)
			}
			return nil, fmt.Errorf("%w: stopped; free some space and run the same command again to resume job %d", full, jobID)
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(e.stderr)
			}
			return nil, fmt.Errorf("interrupted; run the same command again to resume job %d", jobID)
		case <-tick.C:
		}
	}
}

// plainEvery is how often watchJob prints its line when stderr is not a terminal.
var plainEvery = 5 * time.Second

func progressLine(p *engine.Progress) string {
	const width = 30
	filled := int(p.Fraction * width)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	total := 0
	for _, v := range p.Items {
		total += v
	}
	eta := ""
	switch {
	case p.Waiting:
		eta = " ETA unknown (waiting for an external event)"
	case p.ETA > 0:
		eta = " ETA " + p.ETA.Round(time.Second).String()
	}
	eta += downstreamNote(p, ", ")
	failed := ""
	if f := p.Tasks[record.TaskFailed]; f > 0 {
		failed = fmt.Sprintf(", %d failed tasks", f)
	}
	return fmt.Sprintf("job %d %s %5.1f%% %s: %d/%d items done%s, %s%s", p.JobID, bar, p.Fraction*100, p.State,
		p.Items[record.ItemIngested], total, failed, p.Elapsed.Round(100*time.Millisecond), eta)
}
