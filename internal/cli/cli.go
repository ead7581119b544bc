// Package cli implements the sluice command's subcommands. It is the composition root: the only
// package (with tests) that chooses a store driver and a blob store.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/tracing"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
	// subs are the subcommands of a command of subcommands (job list, job show, …).
	subs []string
}

// env carries the process's streams to commands.
type env struct {
	stdout, stderr io.Writer
	// onFlags, when set, is called with each flag set a command makes (completion scripts
	// read the flags from them).
	onFlags func(*flag.FlagSet)
}

// usageError is an error in the command line: printed with a hint, exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func commands() []command {
	return []command{
		{"ingest", "ingest files, folders and archives into documents (the main job)", runIngest, nil},
		{"documents", "list, show, export or search ingested documents", runDocuments, []string{"list", "show", "export", "search", "reindex"}},
		{"doctor", "show which converters are installed and what is degraded without them", runDoctor, nil},
		{"fileset", "ingest datasets (Sandcrawler's fileset ingest): fileset URL… | --requests FILE.jsonl; fileset results", runFileset, nil},
		{"run", "run a workflow over files and follow the job: run WORKFLOW [FILES…]", runRun, nil},
		{"graph", "traverse a dependency graph (Go modules, Maven POMs) and print it: graph ROOT…", runGraph, nil},
		{"watch", "make a job of each file dropped into a folder or an S3 prefix: watch DIR|s3://bucket/prefix --workflow W", runWatch, nil},
		{"resume", "resume the unfinished jobs of the data dir and wait for them", runResume, nil},
		{"job", "list, show, cancel or retry jobs", runJob, []string{"list", "show", "cancel", "retry"}},
		{"event", "fire an external event on an item", runEvent, []string{"fire"}},
		{"objects", "ingest sheets of works and file sets (Meadow): upload, validate, approve; show a work or file set", runObjects, []string{"sheet", "show", "transcoded"}},
		{"workflow", "validate, graph, apply or list workflows; the action catalog", runWorkflow, []string{"validate", "graph", "apply", "list", "actions"}},
		{"gc", "delete blobs no row references any more", runGC, nil},
		{"serve", "run the web UI, the HTTP API, the remote worker protocol and the workers", runServe, nil},
		{"worker", "serve a remote action by running a local command per task, or run workers on a shared database", runWorker, nil},
		{"migrate", "apply or show PostgreSQL schema migrations, or copy a data dir to PostgreSQL", runMigrate, []string{"up", "status", "copy"}},
		{"outbox", "show the outbox's pending messages per sink", runOutbox, []string{"status"}},
		{"token", "create, list or revoke API tokens", runToken, []string{"create", "list", "revoke"}},
		{"config", "show the effective configuration, secrets masked", runConfig, []string{"show"}},
		{"completion", "print a shell completion script", runCompletion, []string{"bash", "zsh", "fish"}},
		{"version", "print the module version and VCS revision", runVersion, nil},
	}
}

// lookupEnv reads a SLUICE_* variable (the CLI is the only reader of the environment).
func lookupEnv(name string) string { return os.Getenv(name) }

// Main runs the command line and returns the process exit code: [ExitOK], [ExitFailed],
// [ExitUsage] or [ExitLocked].
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	args, err := hoistGlobals(args)
	if err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		usage(stderr)
		return ExitUsage
	}
	if len(args) == 0 || isHelp(args[0]) {
		usage(stdout)
		return ExitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		if len(c.subs) > 0 && (len(args) == 1 || isHelp(args[1])) {
			if len(args) == 1 {
				fmt.Fprintf(stderr, "sluice %s needs a subcommand: %s\n", c.name, strings.Join(c.subs, ", "))
				printCommandHelp(stderr, c)
				return ExitUsage
			}
			printCommandHelp(stdout, c)
			return ExitOK
		}
		if wantsHelp(args[1:]) {
			// Asked for, help is the answer: on stdout, exit 0.
			e = &env{stdout: stdout, stderr: stdout}
		}
		// Traces, when the OTEL_* variables ask for them (docs/tracing.md).
		stopTracing, err := tracing.Setup(ctx, lookupEnv)
		if err != nil {
			fmt.Fprintf(stderr, "sluice: %v\n", err)
			return ExitUsage
		}
		defer stopTracing(context.WithoutCancel(ctx))
		err = c.run(ctx, e, args[1:])
		var ue *usageError
		switch {
		case err == nil:
			return ExitOK
		case errors.Is(err, flag.ErrHelp):
			return ExitOK
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "sluice %s: %v\nRun 'sluice %s -h' for usage.\n", c.name, err, c.name)
			return ExitUsage
		case errors.Is(err, node.ErrLocked):
			fmt.Fprintf(stderr, "sluice %s: %v (wait for it to finish, or stop it)\n", c.name, err)
			return ExitLocked
		default:
			if nf, ok := errors.AsType[*store.NotFoundError](err); ok {
				// The thing named is all there is to say: the wrapping repeats it.
				fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, nf)
				return ExitFailed
			}
			fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
			return ExitFailed
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n", args[0])
	usage(stderr)
	return ExitUsage
}

// wantsHelp reports whether args ask for help (-h, -help, --help) before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "-help" || s == "help" }

// defaultDrain is --drain's default: how long running tasks may finish on SIGTERM.
const defaultDrain = 30 * time.Second

// globalFlags are the flags every command takes, with whether each takes a value: they may come
// before the command and between a command and its subcommand too (`sluice --data D token
// create`, `sluice token --data D create`).
var globalFlags = map[string]bool{"data": true, "database": true, "blobs": true, "lease": true, "drain": true, "v": false,
	"max-item-depth": true, "max-job-items": true, "max-backlog": true, "config": true, "log-format": true}

// hoistGlobals moves global flags written before the command name, or between a command and its
// subcommand, to just after the subcommand, where the command's own flag set parses them.
func hoistGlobals(args []string) ([]string, error) {
	var hoisted []string
	take := func() error {
		for len(args) > 0 && strings.HasPrefix(args[0], "-") && !isHelp(args[0]) && args[0] != "--" {
			name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
			takes, ok := globalFlags[name]
			if !ok {
				return fmt.Errorf("unknown flag %s before the command (global flags: --data, --database, --blobs, --lease, --drain, -v, --log-format, --config, --max-item-depth, --max-job-items, --max-backlog)", args[0])
			}
			n := 1
			if takes && !hasValue {
				n = 2
			}
			if len(args) < n {
				return fmt.Errorf("flag %s needs a value", args[0])
			}
			hoisted, args = append(hoisted, args[:n]...), args[n:]
		}
		return nil
	}
	if err := take(); err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return hoisted, nil
	}
	out := []string{args[0]}
	args = args[1:]
	for _, c := range commands() {
		if c.name == out[0] && len(c.subs) > 0 {
			// A command of subcommands parses its flags after the subcommand.
			if err := take(); err != nil {
				return nil, err
			}
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				out, args = append(out, args[0]), args[1:]
			}
		}
	}
	return append(append(out, hoisted...), args...), nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Sluice: a durable, crash-safe pipeline engine for ingesting files and data.")
	fmt.Fprintln(w, "\nUsage: sluice [global flags] COMMAND [SUBCOMMAND] [flags] [args]\n\nCommands:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, c := range commands() {
		name := c.name
		if len(c.subs) > 0 {
			name += " " + strings.Join(c.subs, "|")
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Global flags (before or after the command):
  --data DIR          data directory (default ./sluice-data; env SLUICE_DATA)
  --database URL      a postgres:// URL shared by several processes (env SLUICE_DATABASE)
  --blobs URL         s3://bucket/prefix for blobs (env SLUICE_BLOBS)
  --config FILE       configuration file (default: sluice.yaml in the data dir)
  --log-format F      text or json (default: text on a terminal, json otherwise; env SLUICE_LOG_FORMAT)
  -v                  log engine events, debug included
  --lease D, --max-item-depth N, --max-job-items N, --max-backlog N

Settings come from flags, then SLUICE_* variables, then the configuration file
('sluice config show' prints them, secrets masked).

`+exitCodes+`

Run 'sluice COMMAND -h' for a command's flags and examples.
`)
}

// flags returns a FlagSet with the common flags.
type common struct {
	data     string
	database string
	blobs    string
	lease    time.Duration
	// drain is how long running tasks may finish on SIGTERM/SIGINT (--drain, SLUICE_DRAIN).
	drain   time.Duration
	verbose bool
	// egressAllow and egressDeny are the egress policy's rules: SLUICE_EGRESS_ALLOW and
	// SLUICE_EGRESS_DENY for every command, replaced by --egress-allow and --egress-deny on the
	// commands that run workflows (addEgressFlags).
	egressAllow, egressDeny listFlag
	// maxDepth and maxItems bound every job's item tree (engine.Config).
	maxDepth int
	maxItems int64
	// maxBacklog bounds a job's unprocessed items below a step that creates children.
	maxBacklog int
	topics     *topicFlags
	// config is the configuration file (--config); logFormat is text or json (--log-format).
	config    string
	logFormat string
	// fileset configures the fileset workflow's actions (addFilesetFlags).
	fileset fileset.Config
	// sources says where each setting came from (flag, env, file), for config show.
	sources map[string]string
	// envErr is an environment variable's bad value, reported when the node is configured.
	envErr error
}

// listFlag is a flag of comma-separated values, repeatable; the first use replaces the default
// (from the environment).
type listFlag struct {
	values []string
	set    bool
}

func newListFlag(s string) listFlag { return listFlag{values: splitList(s)} }

func (l *listFlag) String() string { return strings.Join(l.values, ",") }

func (l *listFlag) Set(s string) error {
	if !l.set {
		l.values, l.set = nil, true
	}
	l.values = append(l.values, splitList(s)...)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// addEgressFlags adds --egress-allow and --egress-deny, for the commands that run workflows.
func (c *common) addEgressFlags(fs *flag.FlagSet) {
	fs.Var(&c.egressAllow, "egress-allow", "addresses actions may connect to that are refused by default (loopback, private, link-local): "+
		"CIDR prefixes, addresses, host names or *.domain, comma-separated or repeated (default $SLUICE_EGRESS_ALLOW)")
	fs.Var(&c.egressDeny, "egress-deny", "addresses actions may never connect to, in the same forms; deny wins over allow (default $SLUICE_EGRESS_DENY)")
}

// egress returns the egress policy of the flags and environment.
func (c *common) egress() (*egress.Policy, error) {
	p, err := egress.New(c.egressAllow.values, c.egressDeny.values)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return p, nil
}

func newFlags(e *env, name, usageLine string) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if e.onFlags != nil {
		e.onFlags(fs)
	}
	c := &common{egressAllow: newListFlag(os.Getenv("SLUICE_EGRESS_ALLOW")), egressDeny: newListFlag(os.Getenv("SLUICE_EGRESS_DENY"))}
	def := os.Getenv("SLUICE_DATA")
	if def == "" {
		def = "sluice-data"
	}
	fs.StringVar(&c.data, "data", def, "data directory")
	fs.BoolVar(&c.verbose, "v", false, "log engine events to stderr")
	fs.StringVar(&c.database, "database", os.Getenv("SLUICE_DATABASE"), "a postgres:// URL to share state between processes (default: the data dir's SQLite file)")
	fs.DurationVar(&c.lease, "lease", 0, withDefault("lease", "task lease duration: how soon a dead process's tasks are taken over"))
	c.drain = defaultDrain
	if v := os.Getenv("SLUICE_DRAIN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			c.envErr = usagef("SLUICE_DRAIN=%q: want a positive duration such as 30s", v)
		} else {
			c.drain = d
		}
	}
	fs.DurationVar(&c.drain, "drain", c.drain, "on SIGTERM or SIGINT, how long running tasks may finish before they are canceled and their leases released for another process")
	fs.IntVar(&c.maxDepth, "max-item-depth", 0, withDefault("max-item-depth", "the deepest a job's item tree may grow; a child deeper fails its task with a named error"))
	fs.Int64Var(&c.maxItems, "max-job-items", 0, withDefault("max-job-items", "how many items a job may make (per process); past it a child fails its task with a named error"))
	fs.IntVar(&c.maxBacklog, "max-backlog", 0, withDefault("max-backlog", "how many of a job's items may wait unprocessed below a step that creates children; past it the step waits for them (-1: no bound)"))
	fs.StringVar(&c.blobs, "blobs", os.Getenv("SLUICE_BLOBS"), "s3://bucket/prefix for blobs (endpoint, region and keys from AWS_* variables; default: the data dir)")
	c.topics = addTopicFlags(fs)
	fs.StringVar(&c.config, "config", os.Getenv("SLUICE_CONFIG"), "configuration file (default: sluice.yaml in the data dir, if there)")
	fs.StringVar(&c.logFormat, "log-format", os.Getenv("SLUICE_LOG_FORMAT"), "log format: text or json (default: text on a terminal, json otherwise); logs are on with -v or this flag")
	global := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { global[f.Name] = true })
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: sluice %s\n", usageLine)
		if h, ok := helpTexts()[name]; ok {
			fmt.Fprintf(w, "\n%s\n\nExamples:\n", h.about)
			for _, ex := range h.examples {
				fmt.Fprintf(w, "  %s\n", ex)
			}
		}
		printFlags(w, fs, global, engineCommands[name])
	}
	return fs, c
}

// engineCommands are the commands that run the engine, or show its settings (config show),
// whose -h describes every global flag; the others describe their own flags and where the data
// is (--data, --database, --blobs, --config), and name the rest.
var engineCommands = map[string]bool{"serve": true, "run": true, "ingest": true, "resume": true, "worker": true, "config show": true}

// printFlags prints the command's own flags, then the global ones: all described for an engine
// command (all), else the data's (--data, --database, --blobs, --config) described and the
// others named.
func printFlags(w io.Writer, fs *flag.FlagSet, global map[string]bool, all bool) {
	own, described := flag.NewFlagSet("", flag.ContinueOnError), flag.NewFlagSet("", flag.ContinueOnError)
	var named []string
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case !global[f.Name]:
			own.Var(f.Value, f.Name, f.Usage)
		case all || f.Name == "data" || f.Name == "database" || f.Name == "blobs" || f.Name == "config":
			described.Var(f.Value, f.Name, f.Usage)
		default:
			named = append(named, "-"+f.Name)
		}
	})
	for _, set := range []struct {
		title string
		fs    *flag.FlagSet
	}{{"Flags:", own}, {"Global flags:", described}} {
		n := 0
		set.fs.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			continue
		}
		fmt.Fprintln(w, "\n"+set.title)
		set.fs.SetOutput(w)
		set.fs.PrintDefaults()
	}
	if len(named) > 0 {
		fmt.Fprintf(w, "  and %s (the engine's: sluice serve -h describes them)\n", strings.Join(named, ", "))
	}
}

// parse parses flags that may be interleaved with positional arguments, then applies the
// configuration file to the flags neither the command line nor the environment set.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	if !wantsHelp(args) {
		// A bad flag is a usage error: Main prints it with a hint to -h, not the whole usage.
		out := fs.Output()
		fs.SetOutput(io.Discard)
		defer fs.SetOutput(out)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			if strings.HasPrefix(err.Error(), "flag provided but not defined: -") {
				return nil, usagef("%v (an argument that starts with - goes after --: sluice %s -- -word)", err, fs.Name())
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		// fs.Parse consumes the "--" that ends the flags: everything after it is an argument,
		// even one that looks like a flag (a search for -word).
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), applyConfigFile(fs)
		}
		args = rest
		if len(args) == 0 {
			return pos, applyConfigFile(fs)
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), applyConfigFile(fs)
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// logger returns the logger of -v and --log-format: none without either; at info level with
// --log-format alone, debug with -v; text on a terminal and JSON otherwise unless --log-format
// says. Attributes are snake_case (job_id, item_id, task_id, action, attempt, error).
func (c *common) logger(e *env) *slog.Logger {
	if !c.verbose && c.logFormat == "" {
		return slog.New(slog.DiscardHandler)
	}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if c.verbose {
		opts.Level = slog.LevelDebug
	}
	format := c.logFormat
	if format == "" {
		format = "json"
		if isTTY(e.stderr) {
			format = "text"
		}
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(e.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(e.stderr, opts))
}

// open opens the data dir; engine processes also lock it and get workers.
func (c *common) open(ctx context.Context, e *env, engineProc bool) (*node.Node, error) {
	cfg, err := c.nodeConfig(ctx, e)
	if err != nil {
		return nil, err
	}
	cfg.Engine = engineProc
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return nil, diskFullError(cfg.DataDir, err)
	}
	return n, nil
}

// nodeConfig turns --data, --database and --blobs into a node configuration.
func (c *common) nodeConfig(ctx context.Context, e *env) (node.Config, error) {
	if c.envErr != nil {
		return node.Config{}, c.envErr
	}
	if !oneOf(c.logFormat, "", "text", "json") {
		return node.Config{}, usagef("--log-format must be text or json, not %q", c.logFormat)
	}
	if c.drain <= 0 {
		return node.Config{}, usagef("--drain must be positive, not %s", c.drain)
	}
	cfg := node.Config{DataDir: c.data, Logger: c.logger(e), LeaseDuration: c.lease, Drain: c.drain, MaxItemDepth: c.maxDepth, MaxJobItems: c.maxItems, MaxBacklog: c.maxBacklog,
		Fileset: c.fileset, OpenS3: openFilesS3}
	pol, err := c.egress()
	if err != nil {
		return cfg, err
	}
	cfg.Egress = pol
	topics, err := c.topics.config()
	if err != nil {
		return cfg, err
	}
	cfg.Topics = topics
	if c.database != "" {
		pcfg, err := postgresConfig("--database", c.database)
		if err != nil {
			return cfg, err
		}
		cfg.OpenStore = func(ctx context.Context) (store.Store, error) {
			return postgres.Open(ctx, pcfg)
		}
	}
	if c.blobs != "" {
		b, err := openS3(ctx, "--blobs", c.blobs)
		if err != nil {
			return cfg, err
		}
		cfg.Blobs = b
	}
	return cfg, nil
}

// postgresConfig turns a postgres:// URL given to flag into the driver's configuration:
// sluice_schema=NAME in the URL selects a schema (one database, several installations).
func postgresConfig(flag, raw string) (postgres.Config, error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return postgres.Config{}, usagef("%s must be a postgres:// URL", flag)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return postgres.Config{}, usagef("%s: %v", flag, err)
	}
	q := u.Query()
	schema := q.Get("sluice_schema")
	q.Del("sluice_schema")
	u.RawQuery = q.Encode()
	return postgres.Config{URL: u.String(), Schema: schema}, nil
}

// openS3 opens the s3://bucket/prefix URL given to flag; endpoint, region and keys come from
// the AWS_* variables.
func openS3(ctx context.Context, flag, raw string) (*blob.S3, error) {
	s3cfg := blob.S3ConfigFromEnv(os.Getenv)
	bucket, prefix, err := blob.ParseURL(raw)
	if err != nil {
		return nil, usagef("%s: %v", flag, err)
	}
	s3cfg.Bucket, s3cfg.Prefix = bucket, prefix
	s3cfg.SpoolDir = os.TempDir()
	return blob.NewS3(ctx, s3cfg)
}

// openFilesS3 opens an ingest sheet's s3://bucket/prefix files location as --blobs is opened.
func openFilesS3(ctx context.Context, raw string) (*blob.S3, error) {
	return openS3(ctx, "--files", raw)
}

func oneOf(s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, strings.TrimSuffix(word, "s"))
}

// jobEnded is the error of a job that ended other than complete: "job 3 failed: <its error>",
// or "job 3 canceled" when the error says no more than the state.
func jobEnded(j *record.Job) error {
	if j.Error == "" || j.Error == string(j.State) {
		return fmt.Errorf("job %d %s", j.ID, j.State)
	}
	return fmt.Errorf("job %d %s: %s", j.ID, j.State, j.Error)
}
