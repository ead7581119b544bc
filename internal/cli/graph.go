package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Default sources per package type, when --source is not given.
var graphSources = map[string]string{"gomod": "https://proxy.golang.org", "maven": "https://repo1.maven.org/maven2"}

const graphUsage = "graph ROOT… [--type gomod|maven] [--source URL|DIR] [--scope runtime|build] [--max-depth N] [--override PKG=VERSION|PKG=OTHER@VERSION …] [--exclude PKG …] [--format node|path|dot|json]"

func runGraph(ctx context.Context, e *env, args []string) error {
	all, c := newFlags(e, "graph", graphUsage)
	// --source is the graph's metadata source here, not a source of jobs (the topics' flag).
	fs := flag.NewFlagSet(all.Name(), flag.ContinueOnError)
	fs.SetOutput(all.Output())
	all.VisitAll(func(f *flag.Flag) {
		if f.Name != "source" {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: sluice %s\n\n%s\n\nExamples:\n", graphUsage, helpTexts()["graph"].about)
		for _, ex := range helpTexts()["graph"].examples {
			fmt.Fprintf(w, "  %s\n", ex)
		}
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	typ := fs.String("type", "gomod", "package type of the roots: gomod or maven")
	source := fs.String("source", "", "where metadata comes from: a GOPROXY or Maven repository URL (http, https, file) or a directory (default: proxy.golang.org, Maven Central)")
	scope := fs.String("scope", "runtime", "traverse scope of the roots: runtime or build")
	maxDepth := fs.Int("max-depth", 0, "stop below this depth (the roots are depth 0; default: no limit)")
	var overrides, excludes listFlag
	fs.Var(&overrides, "override", "PKG=VERSION, or PKG=OTHERPKG@VERSION to relocate; repeated or comma-separated")
	fs.Var(&excludes, "exclude", "a package never traversed; repeated or comma-separated")
	format := fs.String("format", "node", "output: node (one package version a line), path (each path from a root), dot or json")
	c.addEgressFlags(fs)
	roots, err := parse(fs, args)
	if err != nil {
		return err
	}
	req := graph.Request{Type: *typ, Source: *source, Roots: roots, Scope: *scope, MaxDepth: *maxDepth, Excludes: excludes.values, Format: *format}
	if req.Source == "" {
		req.Source = graphSources[req.Type]
	}
	if u, err := url.Parse(req.Source); err == nil && u.Scheme == "" {
		// A directory: absolute, so that any worker process finds it.
		if abs, err := filepath.Abs(req.Source); err == nil {
			req.Source = abs
		}
	}
	for _, o := range overrides.values {
		pkg, to, ok := strings.Cut(o, "=")
		if !ok {
			return usagef("--override %q: want PKG=VERSION or PKG=OTHERPKG@VERSION", o)
		}
		if req.Overrides == nil {
			req.Overrides = map[string]string{}
		}
		req.Overrides[pkg] = to
	}
	if err := req.Normalize(); err != nil {
		return usagef("%v", err)
	}
	n, err := c.open(ctx, e, true)
	if err != nil {
		return err
	}
	defer n.Close()
	job, err := graph.Start(ctx, n.Engine, req, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "graph job %d: %s %s from %s\n", job.ID, req.Type, strings.Join(req.Roots, " "), req.Source)
	n.Start(ctx)
	defer n.Stop(n.Drain())
	// The graph's counts are read with the job's progress, in the background (see watchJob).
	var counts atomic.Pointer[graph.Counts]
	final, err := watchJob(ctx, e, n, job.ID, func(p *engine.Progress, _ *record.Job) string {
		c := counts.Load()
		if c == nil {
			return fmt.Sprintf("graph job %d: %s", job.ID, p.Elapsed.Round(100*time.Millisecond))
		}
		return fmt.Sprintf("graph job %d: %d resolved, %d queued, %d avoided, %d failed, %s", job.ID,
			c.Resolved, c.Queued, c.Avoided, c.Failed, p.Elapsed.Round(100*time.Millisecond))
	}, func(ctx context.Context) error {
		c, err := graph.Progress(ctx, n.Engine, job.ID)
		if err == nil {
			counts.Store(&c)
		}
		return err
	})
	if err != nil {
		return err
	}
	if final.State != record.JobComplete {
		return fmt.Errorf("graph %w", jobEnded(final))
	}
	res, err := graph.LoadResult(ctx, n.Store, job.ID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("graph job %d ended without a result (see sluice job show %d)", job.ID, job.ID)
	}
	if err != nil {
		return err
	}
	out, err := graph.Render(res, req.Format)
	if err != nil {
		return err
	}
	fmt.Fprint(e.stdout, out)
	for _, ne := range res.Errors {
		fmt.Fprintf(e.stderr, "node error: %s: %s: %s\n", ne.Node, ne.Status, ne.Error)
	}
	fmt.Fprintf(e.stderr, "%d nodes, %d edges (%s); %d work items: %d resolved, %d avoided, %d failed\n", len(res.Nodes), len(res.Edges),
		res.EndDetectReason, res.Counts.Items, res.Counts.Resolved, res.Counts.Avoided, res.Counts.Failed)
	return nil
}
