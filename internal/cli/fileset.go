package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
)

// addFilesetFlags adds the fileset workflow's settings: where the platforms are and the limits.
func (c *common) addFilesetFlags(fs *flag.FlagSet) {
	fs.Func("platform", "NAME=URL: a platform ("+strings.Join(fileset.PlatformNames, ", ")+") served at URL, a mirror or a test server; repeatable", func(s string) error {
		name, raw, ok := strings.Cut(s, "=")
		u, err := url.Parse(raw)
		if !ok || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--platform must be NAME=http(s)://HOST[:PORT], not %q", s)
		}
		if err := c.fileset.Platforms.Serve(name, u); err != nil {
			return usagef("--platform %q: %v", name, err)
		}
		return nil
	})
	c.fileset.HostDelay = fileset.DefaultHostDelay
	if v := os.Getenv("SLUICE_HOST_DELAY"); v != "" {
		if err := (hostDelayFlag{&c.fileset.HostDelay}).Set(v); err != nil {
			c.envErr = usagef("SLUICE_HOST_DELAY=%q: %v", v, err)
		}
	}
	fs.Var(hostDelayFlag{&c.fileset.HostDelay}, "host-delay", "the fileset workflow's politeness delay: the least `duration` between two downloads' starts from one host, "+
		"across every process sharing the database, in the jobs this process creates; 0: none (default "+fileset.DefaultHostDelay.String()+", or $SLUICE_HOST_DELAY)")
	fs.Var((*byteSize)(&c.fileset.Limits.MaxTotalSize), "max-total-size", withDefault("max-total-size", "the `size` a dataset may total, such as 64GiB: over it, too-large-size"))
	fs.IntVar(&c.fileset.Limits.MaxFileCount, "max-file-count", 0, withDefault("max-file-count", "files a dataset may have: over it, too-many-files"))
}

// hostDelayFlag is --host-delay: a duration, 0 for none (fileset.Config's negative).
type hostDelayFlag struct{ d *time.Duration }

func (f hostDelayFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return fileset.DefaultHostDelay.String()
	}
	return max(*f.d, 0).String()
}

func (f hostDelayFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration of 0 or more (1s, 250ms), not %q", s)
	}
	if d == 0 {
		d = -1 // none
	}
	*f.d = d
	return nil
}

func runFileset(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "results" {
		return runFilesetResults(ctx, e, args[1:])
	}
	fs, c := newFlags(e, "fileset", "fileset URL… | --requests FILE.jsonl [--results FILE.jsonl] [--platform NAME=URL]")
	requests := fs.String("requests", "", "a JSON-lines file of dataset requests (Sandcrawler's: ingest_type, base_url, link_source, …)")
	results := fs.String("results", "", "write one result JSON per line here (default: stdout)")
	force := fs.Bool("force-recrawl", false, "ingest again requests that already have a success")
	c.addEgressFlags(fs)
	c.addFilesetFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if (*requests == "") == (len(pos) == 0) {
		return usagef("give dataset URLs or --requests FILE, not both or neither")
	}
	var src requestSource
	if *requests != "" {
		src, err = fileRequests(*requests)
		if err != nil {
			return err
		}
	} else {
		src = urlRequests(pos)
	}
	src.force = *force
	n, err := c.open(ctx, e, true)
	if err != nil {
		return err
	}
	defer n.Close()
	version, err := n.Fileset.ApplyWorkflow(ctx, n.Engine)
	if err != nil {
		return err
	}
	start := time.Now()
	job, total, bad, err := startFilesetJob(ctx, e, n, src, version)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "job %d: %s\n", job.ID, plural(total, "request"))
	n.Start(ctx)
	final, err := func() (*record.Job, error) {
		defer n.Stop(n.Drain())
		return watchJob(ctx, e, n, job.ID, func(p *engine.Progress, _ *record.Job) string {
			return filesetLine(p, total, n.Fileset.Downloaded())
		}, nil)
	}()
	if err != nil {
		return err
	}
	out := e.stdout
	if *results != "" {
		f, err := os.Create(*results)
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		defer f.Close()
		out = f
	}
	tally, err := writeFilesetResults(ctx, n, job.ID, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "%d requests in %s, %s downloaded:", total, time.Since(start).Round(time.Millisecond), formatBytes(float64(n.Fileset.Downloaded())))
	for _, st := range slices.Sorted(mapsKeys(tally)) {
		fmt.Fprintf(e.stderr, " %s %d", st, tally[st])
	}
	fmt.Fprintln(e.stderr)
	if final.State != record.JobComplete {
		return jobEnded(final)
	}
	if bad > 0 {
		return fmt.Errorf("%s skipped (named above)", plural(bad, "bad request line"))
	}
	return nil
}

// requestSource is where a fileset command's requests come from: a file's lines or URLs.
type requestSource struct {
	path  string   // a JSON-lines file, read twice (its hash keys the job; then its lines)
	urls  []string // or URLs given as arguments
	force bool
}

func fileRequests(path string) (requestSource, error) {
	if _, err := os.Stat(path); err != nil {
		return requestSource{}, fmt.Errorf("requests: %w", err)
	}
	return requestSource{path: path}, nil
}

func urlRequests(urls []string) requestSource { return requestSource{urls: urls} }

// each calls fn with each request line and its 1-based line number.
func (s requestSource) each(fn func(line int, b []byte) error) error {
	if s.path == "" {
		for i, u := range s.urls {
			b, _ := json.Marshal(map[string]any{"ingest_type": "dataset", "base_url": u, "ingest_request_source": "sluice-cli"})
			if err := fn(i+1, b); err != nil {
				return err
			}
		}
		return nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("requests: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if err := fn(line, sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", s.path, err)
	}
	return nil
}

// key identifies "the same command": the same requests and settings resume the same job.
func (s requestSource) key() (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, "fileset", s.force)
	err := s.each(func(_ int, b []byte) error {
		h.Write(b)
		h.Write([]byte{'\n'})
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// startFilesetJob creates the job (or finds the one an interrupted run of the same command
// made, still running), adds a root per request line not yet added, and seals it. A bad line is reported with
// its file and line number and skipped; the others go on.
func startFilesetJob(ctx context.Context, e *env, n *node.Node, src requestSource, version int) (*record.Job, int, int, error) {
	key, err := src.key()
	if err != nil {
		return nil, 0, 0, err
	}
	// The same command resumes its job while it runs; once it has ended, the command is a new
	// run (whose successes are success-existing): the next key of the series.
	var sub *engine.Submission
	for run := 1; ; run++ {
		k := "fileset:" + key
		if run > 1 {
			k += fmt.Sprintf("#%d", run)
		}
		sub, err = n.Engine.Submit(ctx, engine.SubmitParams{Workflow: fileset.WorkflowName, Version: version, Key: k})
		if err != nil {
			return nil, 0, 0, err
		}
		if sub.Created() || sub.Job().State == record.JobRunning {
			break
		}
	}
	total, bad := 0, 0
	where := src.path
	if where == "" {
		where = "argument"
	}
	err = src.each(func(line int, b []byte) error {
		if len(strings.TrimSpace(string(b))) == 0 {
			return nil
		}
		r, err := fileset.ParseRequest(b)
		if err != nil {
			bad++
			fmt.Fprintf(e.stderr, "%s:%d: %v\n", where, line, err)
			return nil
		}
		total++
		if src.force {
			r.Metadata["request"].(map[string]any)["force_recrawl"] = true
		}
		r.Ordinal = line - 1
		return sub.Add(ctx, r)
	})
	if err != nil {
		return nil, 0, 0, err
	}
	if err := sub.Seal(ctx); err != nil {
		return nil, 0, 0, err
	}
	return sub.Job(), total, bad, nil
}

// filesetLine is the progress line of a fileset job: requests with a result out of all, and
// the bytes this process downloaded.
func filesetLine(p *engine.Progress, total int, downloaded int64) string {
	done := 0
	for _, c := range p.Counts {
		if c.Action == "fileset-result" && (c.State == record.TaskComplete || c.State == record.TaskFailed) {
			done += c.Tasks
		}
	}
	const width = 30
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	filled := min(width, int(frac*width))
	eta := ""
	if done > 0 && done < total {
		eta = ", ETA " + (time.Duration(float64(p.Elapsed) / frac * (1 - frac))).Round(time.Second).String()
	}
	return fmt.Sprintf("%s %5.1f%%  %d/%d requests, %s downloaded, %s%s", strings.Repeat("█", filled)+strings.Repeat("░", width-filled),
		frac*100, done, total, formatBytes(float64(downloaded)), p.Elapsed.Round(100*time.Millisecond), eta)
}

// writeFilesetResults writes each request's result as a JSON line (in the order the requests
// were recorded) and returns the count per status.
func writeFilesetResults(ctx context.Context, n *node.Node, jobID int64, w io.Writer) (map[string]int, error) {
	bw := bufio.NewWriter(w)
	tally := map[string]int{}
	err := eachOutput(ctx, n, jobID, func(o *record.Output) error {
		if o.Kind != fileset.KindResult {
			return nil
		}
		var r struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(o.Value, &r)
		tally[r.Status]++
		bw.Write(o.Value)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("write results: %w", err)
	}
	return tally, nil
}

func runFilesetResults(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "fileset results", "fileset results [--status S] [--output table|json] [--limit N]")
	status := fs.String("status", "", "only results of this status (success, platform-404, …)")
	limit := fs.Int("limit", 0, "at most this many results (default: all)")
	o := addOutputFlag(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if !o.json() {
		fmt.Fprintln(tw, "STATUS\tPLATFORM\tSTRATEGY\tFILES\tUPDATED\tBASE URL")
	}
	// JSON is an array streamed row by row: the table may hold millions.
	sep := "[\n"
	end := func() error {
		if o.json() {
			if sep == "[\n" {
				_, err := fmt.Fprintln(e.stdout, "[]")
				return err
			}
			_, err := fmt.Fprintln(e.stdout, "\n]")
			return err
		}
		return tw.Flush()
	}
	p := fileset.ListParams{Status: *status, Limit: 1000}
	results := fileset.NewResultStore(n.Store)
	count := 0
	for {
		rows, err := results.List(ctx, p)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if *limit > 0 && count == *limit {
				return end()
			}
			count++
			if o.json() {
				b, _ := json.MarshalIndent(r, "  ", "  ")
				fmt.Fprintf(e.stdout, "%s  %s", sep, b)
				sep = ",\n"
				continue
			}
			files := "-"
			if r.Result.FileCount != nil {
				files = fmt.Sprint(*r.Result.FileCount)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Status, r.Result.PlatformName, r.Result.IngestStrategy, files,
				r.Updated.Format(time.RFC3339), r.BaseURL)
		}
		if len(rows) < p.Limit {
			return end()
		}
		last := rows[len(rows)-1]
		p.AfterIngestType, p.AfterBaseURL = last.IngestType, last.BaseURL
	}
}
