// Package bench implements the sluice-bench command: end-to-end measurements of the engine
// (throughput, pickup latency and CPU per task of no-op jobs, on SQLite or PostgreSQL) and of
// ingestion (documents per second of a zip of small files, against the same conversions without
// the engine). Each measurement prints one JSON object on stdout, the shape bench/rounds.sh and
// docs/performance.md read. It is a command of its own so that the product binary, sluice, holds
// no benchmark code.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Exit codes of [Main].
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// env carries the process's streams to the subcommands.
type env struct {
	stdout, stderr io.Writer
}

// subcommand is one measurement.
type subcommand struct {
	name, summary string
	run           func(ctx context.Context, e *env, args []string) error
}

func subcommands() []subcommand {
	return []subcommand{
		{"engine", "no-op jobs: tasks/s, pickup latency and CPU per task (SQLite, or PostgreSQL with --database)", runEngine},
		{"ingest", "documents/s of a zip of small text files, against the same conversions without the engine", runIngest},
	}
}

// usageError is an error in the command line: printed with a hint, exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// Main runs the command line of sluice-bench and returns the process exit code: 0 when the
// measurement ran, 1 when it failed, 2 for a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		usage(stdout)
		return exitOK
	}
	subs := subcommands()
	i := slices.IndexFunc(subs, func(s subcommand) bool { return s.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "sluice-bench: unknown measurement %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	err := subs[i].run(ctx, &env{stdout: stdout, stderr: stderr}, args[1:])
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(stderr, "sluice-bench %s: %v\n", args[0], err)
	if errors.As(err, new(*usageError)) {
		fmt.Fprintf(stderr, "Run 'sluice-bench %s -h' for usage.\n", args[0])
		return exitUsage
	}
	return exitFailed
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "-help" || s == "help" }

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice-bench measures Sluice end to end and prints one JSON object per measurement.")
	fmt.Fprintln(w, "\nUsage: sluice-bench engine|ingest [flags]")
	fmt.Fprintln(w)
	for _, s := range subcommands() {
		fmt.Fprintf(w, "  %-7s %s\n", s.name, s.summary)
	}
	fmt.Fprintln(w, "\nRun 'sluice-bench engine -h' for a measurement's flags. docs/performance.md explains the figures.")
}

// newFlags returns the flag set of a measurement, with -v. Help asked for (-h) is printed on
// stdout; a bad flag is returned as a usage error, which [Main] prints.
func newFlags(e *env, name, usageLine string, args []string) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, a := range args {
		if a == "--" {
			break
		}
		if isHelp(a) {
			fs.SetOutput(e.stdout)
		}
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice-bench %s\n\nFlags:\n", usageLine)
		fs.PrintDefaults()
	}
	return fs, fs.Bool("v", false, "log engine events to stderr")
}

// parse parses args, which must be flags only.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (a measurement takes flags only)", fs.Arg(0))
	}
	return nil
}

// postgresURL checks a --database URL: postgres://, and without sluice_schema, since each
// measurement makes a schema of its own and drops it after.
func postgresURL(raw string) (string, error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return "", usagef("--database must be a postgres:// URL")
	}
	if strings.Contains(raw, "sluice_schema=") {
		return "", usagef("--database: leave out sluice_schema; the bench makes a schema of its own and drops it after")
	}
	return raw, nil
}
