package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/redact"
)

// namedURLs is a repeatable NAME=URL flag.
type namedURLs map[string]string

// String returns the NAME=URL pairs, space-separated, each URL's secrets masked (redact.URL):
// what `config show` and -h print.
func (m namedURLs) String() string {
	pairs := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, name+"="+redact.URL(m[name]))
	}
	return strings.Join(pairs, " ")
}

func (m namedURLs) Set(v string) error {
	name, u, ok := strings.Cut(v, "=")
	if !ok || name == "" || u == "" {
		return fmt.Errorf("want NAME=URL, got %q", redact.URL(v))
	}
	if _, dup := m[name]; dup {
		return fmt.Errorf("%q given twice", name)
	}
	m[name] = u
	return nil
}

// topicFlags are the outbox's and the sources' flags, common to every command.
type topicFlags struct {
	sinks, sources namedURLs
	maxPending     int
	ackWait        time.Duration
}

func addTopicFlags(fs *flag.FlagSet) *topicFlags {
	t := &topicFlags{sinks: namedURLs{}, sources: namedURLs{}}
	fs.Var(t.sinks, "sink", "NAME=URL: a sink publish: rules name (nats://host:4222/PREFIX?stream=S, https://…, file:PATH); repeatable (env SLUICE_SINKS, space-separated)")
	fs.Var(t.sources, "source", "NAME=URL: a source of jobs or events (nats://host:4222/SUBJECT?stream=S&workflow=W, webhook:?workflow=W, a watched folder file:///DIR?workflow=W or S3 prefix s3://bucket/prefix?workflow=W); repeatable (env SLUICE_SOURCES)")
	fs.IntVar(&t.maxPending, "outbox-max", 0, withDefault("outbox-max", "undelivered messages per sink before new ones are dropped, with an alert"))
	fs.DurationVar(&t.ackWait, "source-ack-wait", 0, withDefault("source-ack-wait", "how long JetStream waits for a source's acknowledgement before redelivering"))
	return t
}

// config returns the node's topics, the flags over the environment.
func (t *topicFlags) config() (node.Topics, error) {
	for env, m := range map[string]namedURLs{"SLUICE_SINKS": t.sinks, "SLUICE_SOURCES": t.sources} {
		for _, f := range strings.Fields(lookupEnv(env)) {
			name, _, _ := strings.Cut(f, "=")
			if _, set := m[name]; set {
				continue // the flag wins
			}
			if err := m.Set(f); err != nil {
				return node.Topics{}, usagef("%s: %v", env, err)
			}
		}
	}
	return node.Topics{Sinks: t.sinks, Sources: t.sources, MaxPending: t.maxPending, AckWait: t.ackWait}, nil
}

// runOutbox shows the outbox: sluice outbox status [--json].
func runOutbox(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "status" {
		return usagef("usage: outbox status [--json]")
	}
	fs, c := newFlags(e, "outbox status", "outbox status [--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args[1:]); err != nil {
		return err
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	st, err := n.Outbox().Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		return enc.Encode(st)
	}
	if len(st) == 0 {
		fmt.Fprintln(e.stdout, "the outbox is empty and no sink was relayed yet")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK\tPENDING\tOLDEST\tDELIVERED\tFAILURES\tDROPPED\tRELAYED\tLAST ERROR")
	for _, s := range st {
		oldest := "-"
		if s.Pending > 0 {
			oldest = s.OldestAge.Round(time.Second).String()
		}
		relayed := "no"
		if s.Relayed {
			relayed = "yes"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", s.Sink, s.Pending, oldest, s.Delivered, s.Failures, s.Dropped, relayed, s.LastError)
	}
	return tw.Flush()
}
