package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/metric"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/scale"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/web"
	"github.com/sluice-project/sluice/internal/workerproto"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "serve", "serve [--listen 127.0.0.1:7080] [--remote Pdf,Office] [--path-root DIR] [--max-upload-bytes SIZE] [--max-parts N] [--max-roots N] [--data DIR]")
	listen := fs.String("listen", "127.0.0.1:7080", "address to listen on (loopback by default)")
	remote := fs.String("remote", "", "comma-separated actions handed to remote workers instead of running in process (e.g. Pdf,Office)")
	roots := fs.String("path-root", "", "comma-separated directories jobs may name server-side paths under, and s3://bucket/prefix locations sheets' files may be read from")
	limits := limitFlags(fs)
	c.addEgressFlags(fs)
	c.addFilesetFlags(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	rem := map[string]bool{}
	for _, r := range strings.Split(*remote, ",") {
		if r = strings.TrimSpace(r); r != "" {
			rem[r] = true
		}
	}
	pathRoots, err := pathRootList(*roots, c.data)
	if err != nil {
		return err
	}
	log := c.logger(e)
	cfg, err := c.nodeConfig(ctx, e)
	if err != nil {
		return err
	}
	cfg.Engine, cfg.Remote = true, rem
	// The actions hold to the roots too: a location in a job's metadata the API did not check
	// (an admin's files_dir or graph source) is refused when its task runs.
	rs := pathroot.New(pathRoots)
	cfg.PathRoots = &rs
	cfg.Metrics = metric.New()
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	for _, name := range []string{"documents"} {
		if err := applyBuiltin(ctx, n, name); err != nil {
			return err
		}
	}
	tokens, err := api.OpenTokenStore(filepath.Join(c.data, "tokens.json"))
	if err != nil {
		return err
	}
	backend := workerproto.NewBackend(n.Engine, n.Blobs, n.Worker)
	wp := workerproto.New(workerproto.Config{Backend: backend, Auth: tokens.WorkerAuth(), Logger: log})
	n.Fleet.ServeRemotes(wp.Clients)
	a := api.New(api.Config{Backend: backend, Records: n.Store, Tokens: tokens, Workers: wp, Logger: log, PathRoots: pathRoots, OpenS3: openFilesS3, Leader: n.Maintenance.Leader, Egress: n.Egress,
		Limits: limits.get(), Sources: n.Sources(), MoreMetrics: n.WriteMetrics, Problems: n.Problems, Metrics: cfg.Metrics, Fileset: n.Fileset})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// No ReadTimeout/WriteTimeout: task POSTs and progress streams may run for hours.
	// The web UI at / beside the API's /v1/…, /metrics, /healthz and /readyz, on the API's server (its
	// header and idle timeouts).
	ui := web.New(web.Config{Backend: backend, Records: n.Store, Tokens: tokens, API: a.Handler(), Logger: log, Problems: n.Problems})
	srv := a.Server()
	srv.Handler = ui.Handler()
	// On SIGTERM the remote workers may report their tasks through the drain: the HTTP server
	// stops only once the protocol server gave back what they still hold.
	n.Listen(node.Listener{Wake: wp.Wake, Cancel: wp.CancelTasks, Drain: wp.Drain, Stop: func() {
		wp.Stop()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			fmt.Fprintln(e.stderr, "shut down the HTTP server:", err)
		}
	}})
	// Not stopped by ctx: the stop below drains in order (n.Stop), which the worker's own stop
	// on ctx would race.
	n.Start(context.WithoutCancel(ctx))
	wp.Start(context.WithoutCancel(ctx))
	toks, _ := tokens.List()
	fmt.Fprintf(e.stderr, "sluice serving on http://%s (data %s, %d tokens)\n", ln.Addr(), c.data, len(toks))
	if len(toks) == 0 {
		fmt.Fprintln(e.stderr, "no tokens yet: create one with `sluice token create --role admin`")
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(e.stderr, "shutting down: no new leases; running tasks may finish for %s, then are canceled and released\n", n.Drain())
	n.Stop(n.Drain())
	fmt.Fprintln(e.stderr, "stopped")
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serveLimits are the flags of api.Limits.
type serveLimits struct {
	uploadBytes                byteSize
	parts, roots               *int
	bodyRead, readHeader, idle *time.Duration
}

func limitFlags(fs *flag.FlagSet) *serveLimits {
	l := &serveLimits{uploadBytes: api.DefaultMaxUploadBytes}
	fs.Var(&l.uploadBytes, "max-upload-bytes", "cap on the bytes uploaded to create one job, e.g. 10GiB or 512MiB")
	l.parts = fs.Int("max-parts", api.DefaultMaxParts, "cap on the parts of one multipart request")
	l.roots = fs.Int("max-roots", api.DefaultMaxRoots, "cap on the roots (uploaded files and paths) a job is created with")
	l.bodyRead = fs.Duration("body-read-timeout", api.DefaultBodyReadTimeout, "a JSON body must arrive within this; an upload may not stall longer")
	l.readHeader = fs.Duration("read-header-timeout", api.DefaultReadHeaderTimeout, "how long a client may take to send a request's headers")
	l.idle = fs.Duration("idle-timeout", api.DefaultIdleTimeout, "how long an idle keep-alive connection is kept (remote workers want at least 60s)")
	return l
}

func (l *serveLimits) get() api.Limits {
	return api.Limits{MaxUploadBytes: int64(l.uploadBytes), MaxParts: *l.parts, MaxRoots: *l.roots,
		BodyReadTimeout: *l.bodyRead, ReadHeaderTimeout: *l.readHeader, IdleTimeout: *l.idle}
}

// pathRootList turns --path-root into absolute directories. A root may not hold the data dir
// (its tokens, database and blobs would be ingestible) nor lie inside it.
func pathRootList(flagValue, dataDir string) ([]string, error) {
	data, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(flagValue, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if strings.HasPrefix(r, "s3://") {
			// A bucket (and prefix) sheets' files may be read from with the server's credentials.
			out = append(out, strings.TrimSuffix(r, "/"))
			continue
		}
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, err
		}
		if within(data, abs) || within(abs, data) {
			return nil, usagef("--path-root %s overlaps the data dir %s: jobs could ingest its tokens and database; "+
				"choose a root beside it", r, data)
		}
		out = append(out, abs)
	}
	return out, nil
}

// within reports whether path is dir or lies under it (lexically; both absolute and clean).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

func runWorker(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "worker", "worker --server URL --action NAME [--token-file FILE] [-- COMMAND…] (token in SLUICE_TOKEN or the file; no command runs the built-in action NAME) | worker --database URL [--blobs s3://…] [--actions a,b]")
	server := fs.String("server", "http://127.0.0.1:7080", "the sluice server")
	act := fs.String("action", "", "the remote action to serve, e.g. Pdf")
	// --token is refused, not merely deprecated: a token on the command line is visible to every
	// user of the machine in ps and /proc, and stays in shell histories.
	token := fs.String("token", "", "removed: use SLUICE_TOKEN or --token-file (a command-line token shows in ps)")
	tokenFile := fs.String("token-file", "", "a file holding the worker token (default: the SLUICE_TOKEN variable)")
	actions := fs.String("actions", "", "with --database: only run these actions (default: every action whose tools are here)")
	autoscale := fs.String("autoscale", "", "with --database: MIN-MAX, run between MIN and MAX tasks at once per action, following the queues' recommended workers (GET /v1/queues; docs/scale-out.md)")
	roots := fs.String("path-root", "", "with --database or a built-in action: the server's --path-root, which sheets' files_dir and graph sources must lie under when their tasks run here (default: any directory)")
	c.addEgressFlags(fs)
	c.addFilesetFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *token != "" {
		return usagef("--token is no longer accepted (a token on the command line shows in ps): set SLUICE_TOKEN or pass --token-file FILE")
	}
	var rs *pathroot.Roots
	if *roots != "" {
		list, err := pathRootList(*roots, c.data)
		if err != nil {
			return err
		}
		r := pathroot.New(list)
		rs = &r
	}
	if c.database != "" {
		lo, hi, err := parseRange(*autoscale)
		if err != nil {
			return err
		}
		return runDBWorker(ctx, e, c, *actions, rs, lo, hi)
	}
	if *autoscale != "" {
		return usagef("--autoscale is for a worker on a shared database (--database postgres://…)")
	}
	if *act == "" {
		return usagef("need --action: the remote action to serve, with a command after -- (or none, to run the built-in action of that name)")
	}
	tok, err := workerToken(e, *tokenFile)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(*server, "/") + "/v1/workers"
	if len(pos) == 0 {
		// No command: the built-in action of that name runs here, reading through its tasks'
		// read ports on the server.
		cfg, err := c.nodeConfig(ctx, e)
		if err != nil {
			return err
		}
		cfg.PathRoots = rs
		fmt.Fprintf(e.stderr, "serving %s tasks from %s with the built-in action\n", *act, *server)
		err = workerproto.RunBuiltin(ctx, workerproto.BuiltinConfig{Server: base, Action: *act, Token: tok, Catalog: node.WorkerCatalog(cfg),
			Logger: cfg.Logger})
		if errors.Is(err, workerproto.ErrUnknownAction) {
			return usagef("--action %s with no command after --: %v", *act, err)
		}
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	fmt.Fprintf(e.stderr, "serving %s tasks from %s with %s\n", *act, *server, strings.Join(pos, " "))
	err = workerproto.RunCommand(ctx, workerproto.CommandConfig{Server: base, Action: *act, Token: tok, Argv: pos})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// workerToken returns the token of a remote worker: the first line of file when given, else
// SLUICE_TOKEN.
func workerToken(e *env, file string) (string, error) {
	if file == "" {
		if tok := strings.TrimSpace(lookupEnv("SLUICE_TOKEN")); tok != "" {
			return tok, nil
		}
		return "", usagef("need a worker token: set SLUICE_TOKEN or pass --token-file FILE (create one with `sluice token create --role worker`)")
	}
	b, err := readFileLimited(file, 4096)
	if err != nil {
		return "", fmt.Errorf("read --token-file: %w", err)
	}
	tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", file)
	}
	if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(e.stderr, "warning: %s is readable by other users (mode %v); chmod 600 it\n", file, fi.Mode().Perm())
	}
	return tok, nil
}

func runToken(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("token needs a subcommand: create, list, revoke")
	}
	sub := args[0]
	fs, c := newFlags(e, "token "+sub, "token create --role admin|worker|reader [--name NAME] | list | revoke ID")
	role := fs.String("role", "", "create: admin, worker or reader")
	name := fs.String("name", "", "create: whose token it is (the audit log names it as who did what)")
	out := addOutputFlag(fs)
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	tokens, err := api.OpenTokenStore(filepath.Join(c.data, "tokens.json"))
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		if !oneOf(*role, "admin", "worker", "reader") {
			return usagef("--role must be admin, worker or reader")
		}
		plain, err := tokens.CreateNamed(api.Role(*role), *name)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, plain)
		fmt.Fprintln(e.stderr, "store it now: only its hash is kept")
		return nil
	case "list":
		toks, err := tokens.List()
		if err != nil {
			return err
		}
		if out.json() {
			list := []tokenJSON{}
			for _, t := range toks {
				list = append(list, tokenJSON{ID: t.ID, Name: t.Name, Role: string(t.Role), CreatedAt: t.CreatedAt.UTC()})
			}
			return writeJSON(e.stdout, list)
		}
		for _, t := range toks {
			fmt.Fprintf(e.stdout, "%s\t%s\t%s\t%s\n", t.ID, t.Role, t.CreatedAt.Local().Format(time.DateTime), t.Name)
		}
		return nil
	case "revoke":
		if len(pos) != 1 {
			return usagef("want one token ID")
		}
		ok, err := tokens.Revoke(pos[0])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no token %q", pos[0])
		}
		fmt.Fprintf(e.stdout, "token %s revoked\n", pos[0])
		return nil
	default:
		return usagef("unknown token subcommand %q", sub)
	}
}

// runDBWorker runs in-process workers against a shared PostgreSQL database (and blob store) until
// interrupted: the scale-out worker. Several may run on several machines. Its actions open the
// directories jobs name through roots (nil: any directory).
// parseRange parses --autoscale MIN-MAX; "" is no autoscaling (0, 0).
func parseRange(s string) (lo, hi int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi < lo {
		return 0, 0, usagef("--autoscale %q: want MIN-MAX with 1 ≤ MIN ≤ MAX, such as 1-8", s)
	}
	return lo, hi, nil
}

func runDBWorker(ctx context.Context, e *env, c *common, actions string, roots *pathroot.Roots, lo, hi int) error {
	cfg, err := c.nodeConfig(ctx, e)
	if err != nil {
		return err
	}
	cfg.Engine, cfg.PathRoots = true, roots
	for _, a := range strings.Split(actions, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Queues = append(cfg.Queues, a)
		}
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	n.Start(ctx)
	fmt.Fprintf(e.stderr, "worker %s running (actions: %s)\n", n.Worker.Owner(), orAll(actions))
	if hi > 0 {
		a := scale.NewAutoscaler(scale.AutoscalerConfig{Reader: n.Store, Set: n.Worker.SetConcurrency, Min: lo, Max: hi,
			Actions: cfg.Queues, Logger: cfg.Logger})
		scaled := make(chan struct{})
		go func() { defer close(scaled); a.Run(ctx) }()
		defer func() { <-scaled }()
		fmt.Fprintf(e.stderr, "autoscaling between %d and %d tasks at once per action\n", lo, hi)
	}
	<-ctx.Done()
	n.Stop(n.Drain())
	return nil
}

func orAll(s string) string {
	if s == "" {
		return "all"
	}
	return s
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || !oneOf(args[0], "up", "status", "copy") {
		return usagef("migrate needs a subcommand: up, status, copy")
	}
	if args[0] == "copy" {
		return runMigrateCopy(ctx, e, args[1:])
	}
	fs, c := newFlags(e, "migrate "+args[0], "migrate up|status --database postgres://…")
	if _, err := parse(fs, args[1:]); err != nil {
		return err
	}
	if c.database == "" {
		return usagef("--database is required (the embedded SQLite store migrates itself on open)")
	}
	pcfg, err := postgresConfig("--database", c.database)
	if err != nil {
		return err
	}
	pcfg.SkipMigrate = true
	db, err := postgres.Open(ctx, pcfg)
	if err != nil {
		return err
	}
	defer db.Close()
	var ms []postgres.Migration
	if args[0] == "up" {
		ms, err = db.Migrate(ctx)
		if err == nil && len(ms) == 0 {
			fmt.Fprintln(e.stdout, "schema is up to date")
		}
	} else {
		ms, err = db.MigrationStatus(ctx)
	}
	if err != nil {
		return err
	}
	for _, m := range ms {
		state := "pending"
		if !m.AppliedAt.IsZero() {
			state = "applied " + m.AppliedAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(e.stdout, "%03d %s %s\n", m.Version, m.Name, state)
	}
	return nil
}
