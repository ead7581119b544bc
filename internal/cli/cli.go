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
	"sort"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env carries the process's streams to commands.
type env struct {
	stdout, stderr io.Writer
}

// usageError is an error in the command line: printed with a hint, exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func commands() []command {
	return []command{
		{"ingest", "ingest files, folders and archives into documents (the main job)", runIngest},
		{"documents", "list, show, export or search ingested documents: documents list|show|export|search|reindex", runDocuments},
		{"doctor", "show which converters are installed and what is degraded without them", runDoctor},
		{"run", "run a workflow over files and follow the job: run WORKFLOW [FILES…]", runRun},
		{"resume", "resume the unfinished jobs of the data dir and wait for them", runResume},
		{"job", "list, show, cancel or retry jobs: job list|show|cancel|retry", runJob},
		{"event", "fire an external event on an item: event fire", runEvent},
		{"workflow", "validate, graph, apply or list workflows: workflow validate|graph|apply|list|actions", runWorkflow},
		{"bench", "measure the engine: bench engine|ingest", runBench},
		{"gc", "delete blobs no row references any more", runGC},
		{"serve", "run the HTTP API, the remote worker protocol and the workers", runServe},
		{"worker", "serve a remote action by running a local command per task", runWorker},
		{"migrate", "apply or show PostgreSQL schema migrations, or copy a data dir to PostgreSQL: migrate up|status|copy", runMigrate},
		{"outbox", "show the outbox's pending messages per sink: outbox status", runOutbox},
		{"token", "create, list or revoke API tokens: token create --role admin|worker|reader", runToken},
		{"version", "print the version", func(ctx context.Context, e *env, args []string) error {
			fmt.Fprintln(e.stdout, "sluice", version)
			return nil
		}},
	}
}

var version = "0.1.0-dev"

// lookupEnv reads a SLUICE_* variable (the CLI is the only reader of the environment).
func lookupEnv(name string) string { return os.Getenv(name) }

// Main runs the command line and returns the process exit code: 0 on success, 1 when the
// command failed, 2 for a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	args, err := hoistGlobals(args)
	if err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		usage(stderr)
		return 2
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			if len(args) > 1 && isHelp(args[1]) && strings.Contains(c.summary, "|") {
				// A command of subcommands: say what they are (each has its own -h).
				fmt.Fprintf(stdout, "Usage: sluice %s\n\n%s\nRun 'sluice %s SUBCOMMAND -h' for a subcommand's flags.\n",
					c.summary[strings.LastIndex(c.summary, ": ")+2:], c.summary, c.name)
				return 0
			}
			err := c.run(ctx, e, args[1:])
			var ue *usageError
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.As(err, &ue):
				fmt.Fprintf(stderr, "sluice %s: %v\nRun 'sluice %s -h' for usage.\n", c.name, err, c.name)
				return 2
			case errors.Is(err, node.ErrLocked):
				fmt.Fprintf(stderr, "sluice %s: %v (wait for it to finish, or stop it)\n", c.name, err)
				return 1
			default:
				fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "-help" || s == "help" }

// globalFlags are the flags every command takes, with whether each takes a value: they may come
// before the command too (`sluice --data D token create`).
var globalFlags = map[string]bool{"data": true, "database": true, "blobs": true, "lease": true, "v": false,
	"max-item-depth": true, "max-job-items": true}

// hoistGlobals moves global flags written before the command name to just after it, where the
// command's own flag set parses them.
func hoistGlobals(args []string) ([]string, error) {
	var hoisted []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		takes, ok := globalFlags[name]
		if !ok {
			return nil, fmt.Errorf("unknown flag %s before the command (global flags: --data, --database, --blobs, --lease, -v, --max-item-depth, --max-job-items)", args[0])
		}
		n := 1
		if takes && !hasValue {
			n = 2
		}
		if len(args) < n {
			return nil, fmt.Errorf("flag %s needs a value", args[0])
		}
		hoisted, args = append(hoisted, args[:n]...), args[n:]
	}
	if len(hoisted) == 0 || len(args) == 0 {
		return append(hoisted, args...), nil
	}
	out := []string{args[0]}
	rest := args[1:]
	// A command of subcommands parses its flags after the subcommand.
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		for _, c := range commands() {
			if c.name == args[0] && strings.Contains(c.summary, "|") {
				out, rest = append(out, rest[0]), rest[1:]
			}
		}
	}
	return append(append(out, hoisted...), rest...), nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Sluice: a durable, crash-safe pipeline engine for ingesting files and data.")
	fmt.Fprintln(w, "\nUsage: sluice COMMAND [flags] [args]\n\nCommands:")
	cs := commands()
	sort.SliceStable(cs, func(i, j int) bool { return false })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --data DIR (default ./sluice-data; env SLUICE_DATA).")
}

// flags returns a FlagSet with the common flags.
type common struct {
	data     string
	database string
	blobs    string
	lease    time.Duration
	verbose  bool
	// egressAllow and egressDeny are the egress policy's rules: SLUICE_EGRESS_ALLOW and
	// SLUICE_EGRESS_DENY for every command, replaced by --egress-allow and --egress-deny on the
	// commands that run workflows (addEgressFlags).
	egressAllow, egressDeny listFlag
	// maxDepth and maxItems bound every job's item tree (engine.Config).
	maxDepth int
	maxItems int64
	topics   *topicFlags
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
	c := &common{egressAllow: newListFlag(os.Getenv("SLUICE_EGRESS_ALLOW")), egressDeny: newListFlag(os.Getenv("SLUICE_EGRESS_DENY"))}
	def := os.Getenv("SLUICE_DATA")
	if def == "" {
		def = "sluice-data"
	}
	fs.StringVar(&c.data, "data", def, "data directory")
	fs.BoolVar(&c.verbose, "v", false, "log engine events to stderr")
	fs.StringVar(&c.database, "database", os.Getenv("SLUICE_DATABASE"), "a postgres:// URL to share state between processes (default: the data dir's SQLite file)")
	fs.DurationVar(&c.lease, "lease", 0, "task lease duration: how soon a dead process's tasks are taken over (default 30s)")
	fs.IntVar(&c.maxDepth, "max-item-depth", 0, "the deepest a job's item tree may grow; a child deeper fails its task with a named error (default 64)")
	fs.Int64Var(&c.maxItems, "max-job-items", 0, "how many items a job may make (per process); past it a child fails its task with a named error (default 10,000,000)")
	fs.StringVar(&c.blobs, "blobs", os.Getenv("SLUICE_BLOBS"), "s3://bucket/prefix for blobs (endpoint, region and keys from AWS_* variables; default: the data dir)")
	c.topics = addTopicFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: sluice %s\n\nFlags:\n", usageLine)
		fs.PrintDefaults()
	}
	return fs, c
}

// parse parses flags that may be interleaved with positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func (c *common) logger(e *env) *slog.Logger {
	if !c.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// open opens the data dir; engine processes also lock it and get workers.
func (c *common) open(ctx context.Context, e *env, engineProc bool) (*node.Node, error) {
	cfg, err := c.nodeConfig(ctx, e)
	if err != nil {
		return nil, err
	}
	cfg.Engine = engineProc
	return node.Open(ctx, cfg)
}

// nodeConfig turns --data, --database and --blobs into a node configuration.
func (c *common) nodeConfig(ctx context.Context, e *env) (node.Config, error) {
	cfg := node.Config{DataDir: c.data, Logger: c.logger(e), LeaseDuration: c.lease, MaxItemDepth: c.maxDepth, MaxJobItems: c.maxItems}
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
