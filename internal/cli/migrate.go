package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-project/sluice/internal/migrate"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// runMigrateCopy copies an embedded installation (a data dir) to PostgreSQL and, with --blobs,
// its blobs to S3: `sluice migrate copy --from sluice-data --to postgres://… [--blobs s3://…]`.
func runMigrateCopy(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("migrate copy", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if e.onFlags != nil {
		e.onFlags(fs)
	}
	def := os.Getenv("SLUICE_DATA")
	if def == "" {
		def = "sluice-data"
	}
	from := fs.String("from", def, "the data dir to copy (its engine must be stopped)")
	to := fs.String("to", "", "the target postgres:// URL (sluice_schema=NAME selects a schema); its schema is migrated and must hold no rows")
	blobs := fs.String("blobs", "", "s3://bucket/prefix to copy the blobs to (endpoint, region and keys from AWS_* variables); without it they stay in the data dir")
	parallel := fs.Int("parallel", 8, "blobs copied at once")
	// The global flags, which every command takes before or after it (sluice --data D migrate
	// copy --to URL): --data names the data dir to copy, as --from does, and --database the
	// target, as --to does; the others change nothing in a copy.
	data := fs.String("data", def, "the data dir to copy: the same as --from")
	database := fs.String("database", "", "the target postgres:// URL: the same as --to")
	fs.String("config", os.Getenv("SLUICE_CONFIG"), "configuration file (default: sluice.yaml in the data dir, if there)")
	fs.Bool("v", false, "a global flag; a copy does not use it")
	for _, name := range []string{"lease", "max-item-depth", "max-job-items", "max-backlog", "log-format"} {
		fs.String(name, "", "a global flag; a copy does not use it")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice migrate copy --from DIR --to postgres://… [--blobs s3://…]\n\n"+
			"Copies every row of the data dir's database to an empty PostgreSQL schema in one transaction,\n"+
			"ids kept, and every blob to --blobs (verified; re-running skips blobs already there).\n"+
			"The data dir is only read, then marked MIGRATED so that sluice stops using its stale database\n"+
			"(see docs/scale-out.md).\n\nExamples:\n  %s\n\nFlags:\n", strings.Join(helpTexts()["migrate copy"].examples, "\n  "))
		fs.PrintDefaults()
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, alias := range []struct {
		global, own string
		value, dst  *string
	}{{"data", "from", data, from}, {"database", "to", database, to}} {
		if !set[alias.global] {
			continue
		}
		if set[alias.own] && *alias.value != *alias.dst {
			return usagef("--%s %s and --%s %s differ: give one", alias.global, *alias.value, alias.own, *alias.dst)
		}
		*alias.dst = *alias.value
	}
	if *to == "" {
		return usagef("--to postgres://… is required")
	}
	pcfg, err := postgresConfig("--to", *to)
	if err != nil {
		return err
	}
	// Before connecting, which creates and migrates the target schema.
	if _, err := os.Stat(filepath.Join(*from, node.DatabaseFile)); err != nil {
		return fmt.Errorf("no embedded installation in %s: %w", *from, err)
	}
	cfg := migrate.Config{DataDir: *from, Parallel: *parallel, Out: e.stdout}
	if *blobs != "" {
		b, err := openS3(ctx, "--blobs", *blobs)
		if err != nil {
			return err
		}
		cfg.Blobs = b
	}
	db, err := postgres.Open(ctx, pcfg)
	if err != nil {
		return err
	}
	defer db.Close()
	cfg.To = db
	if _, err := migrate.Copy(ctx, cfg); err != nil {
		return err
	}
	// The URL is not repeated: it may hold a password.
	if *blobs == "" {
		fmt.Fprintf(e.stdout, "done: start nodes with --data %s and --database set to the --to URL\n", *from)
	} else {
		fmt.Fprintf(e.stdout, "done: start nodes with --blobs %s and --database set to the --to URL\n", *blobs)
	}
	return nil
}
