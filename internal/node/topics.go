package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/outbox"
	"github.com/sluice-project/sluice/internal/sink"
	"github.com/sluice-project/sluice/internal/source"
	"github.com/sluice-project/sluice/internal/watch"
)

// Topics configures a node's outbox sinks and sources (docs/topics.md).
type Topics struct {
	// Sinks are the sinks this node relays outbox messages to: name → URL (see sink.Open).
	Sinks map[string]string
	// Sources are the sources this node consumes: name → URL (see source.Parse).
	Sources map[string]string
	// MaxPending bounds each sink's undelivered messages; see outbox.Config. Defaults to 1,000,000.
	MaxPending int
	// AckWait is the JetStream sources' acknowledgement wait; see source.ConsumerConfig.
	AckWait time.Duration
	// SinkTimeout bounds one delivery; see sink.Options. Defaults to 10s.
	SinkTimeout time.Duration
	// RelayBackoff is the outbox's first wait after a failed delivery; see outbox.Config.
	RelayBackoff time.Duration
}

// topics is a node's outbox and sources.
type topics struct {
	outbox    *outbox.Outbox
	consumers []*source.Consumer
	// watchers are the sources that watch a folder or an S3 prefix (file://, s3://).
	watchers []*watch.Watcher
	webhooks *source.Set
	// fed are the workflows the sources create jobs of.
	fed map[string]bool
}

// openTopics registers the outbox with the engine (every node: any process may commit a task
// whose workflow publishes) and, for engine processes, opens the sinks and parses the sources.
func (n *Node) openTopics(ctx context.Context, cfg Config) error {
	t := &topics{}
	sinks := map[string]sink.Sink{}
	closeSinks := func() {
		for _, s := range sinks {
			_ = s.Close()
		}
	}
	if cfg.Engine {
		for _, name := range sortedKeys(cfg.Topics.Sinks) {
			s, err := sink.Open(ctx, cfg.Topics.Sinks[name], sink.Options{Timeout: cfg.Topics.SinkTimeout, Logger: cfg.Logger})
			if err != nil {
				closeSinks()
				return fmt.Errorf("sink %s: %w", name, err)
			}
			sinks[name] = s
		}
	}
	t.outbox = outbox.New(outbox.Config{Store: n.Store, Logger: cfg.Logger, Sinks: sinks, MaxPending: cfg.Topics.MaxPending, Now: n.Engine.Now,
		MinBackoff: cfg.Topics.RelayBackoff, Exclusive: n.lock != nil})
	if err := t.outbox.Register(ctx, n.Engine); err != nil {
		closeSinks()
		return err
	}
	h := &source.Handler{Engine: n.Engine, Records: n.Store, Blobs: n.Blobs, Logger: cfg.Logger}
	t.webhooks = &source.Set{Handler: h, Specs: map[string]*source.Spec{}}
	for _, name := range sortedKeys(cfg.Topics.Sources) {
		if raw := cfg.Topics.Sources[name]; watch.IsURL(raw) {
			w, err := n.openWatcher(ctx, cfg, name, raw)
			if err != nil {
				closeSinks()
				return err
			}
			if w != nil {
				t.watchers = append(t.watchers, w)
			}
			continue
		}
		spec, err := source.Parse(name, cfg.Topics.Sources[name])
		if err != nil {
			closeSinks()
			return err
		}
		if t.fed == nil {
			t.fed = map[string]bool{}
		}
		t.fed[spec.Workflow] = true
		if spec.Server == nil {
			t.webhooks.Specs[name] = spec
		} else if cfg.Engine {
			t.consumers = append(t.consumers, source.NewConsumer(source.ConsumerConfig{Spec: spec, Handler: h, Logger: cfg.Logger, AckWait: cfg.Topics.AckWait}))
		}
	}
	n.topics = t
	return nil
}

// openWatcher makes the watcher of a file:// or s3:// source; only engine processes watch (nil
// otherwise). Its workflow, when a built-in one not stored yet, is stored.
func (n *Node) openWatcher(ctx context.Context, cfg Config, name, raw string) (*watch.Watcher, error) {
	wc, err := watch.Parse(name, raw)
	if err != nil {
		return nil, err
	}
	if !cfg.Engine {
		return nil, nil
	}
	if _, _, err := n.Engine.Definition(ctx, wc.Workflow, 0); err != nil {
		if _, ok := builtin.Source(wc.Workflow); !ok {
			return nil, fmt.Errorf("source %s: workflow %q: %w", name, wc.Workflow, err)
		}
		if err := builtin.Apply(ctx, n.Engine, wc.Workflow); err != nil {
			return nil, err
		}
	}
	wc.Engine, wc.Blobs, wc.Records, wc.DB, wc.Logger = n.Engine, n.Blobs, n.Store, n.Store, cfg.Logger
	if watch.IsS3(wc.Location) {
		if cfg.OpenS3 == nil {
			return nil, fmt.Errorf("source %s: this process opens no S3 locations", name)
		}
		if wc.Bucket, err = cfg.OpenS3(ctx, wc.Location); err != nil {
			return nil, fmt.Errorf("source %s: %w", name, err)
		}
	}
	w, err := watch.New(wc)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", name, err)
	}
	return w, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Outbox returns the node's outbox.
func (n *Node) Outbox() *outbox.Outbox { return n.topics.outbox }

// Sources returns the node's webhook sources, for POST /v1/sources/{name}.
func (n *Node) Sources() *source.Set { return n.topics.webhooks }

func (n *Node) startTopics(ctx context.Context) {
	if n.Worker == nil || n.topics == nil {
		return
	}
	n.topics.outbox.Start(ctx)
	for _, c := range n.topics.consumers {
		c.Start(ctx)
	}
	for _, w := range n.topics.watchers {
		w.Start(ctx)
	}
}

// stopSources stops the sources: no new jobs or events.
func (n *Node) stopSources() {
	if n.topics == nil {
		return
	}
	for _, c := range n.topics.consumers {
		c.Stop()
	}
	for _, w := range n.topics.watchers {
		w.Stop()
	}
}

// stopRelays lets the relays deliver what is pending for up to grace, while they make progress,
// then stops them. What is left is delivered by the next process.
func (n *Node) stopRelays(grace time.Duration) {
	if n.topics == nil {
		return
	}
	if grace > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		n.topics.outbox.Drain(ctx, 2*time.Second)
		cancel()
	}
	n.topics.outbox.Stop()
}
