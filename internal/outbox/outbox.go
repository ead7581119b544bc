// Package outbox is Sluice's transactional outbox: the messages that workflows' publish rules
// select ([workflow.PublishRule]) are written as rows in the transaction that commits what they
// report — a task's end, an event fired on an item — and a relay per sink delivers them, in
// order per subject, retrying with backoff, deleting each row only once the sink acknowledged
// it. A message's id is derived from what it reports (installation, job, item, step, outcome,
// attempt, rule), so a redelivery after a crash carries the same id and is dropped by the
// broker (JetStream's duplicates window) or the consumer.
//
// A sink that stays down never blocks a commit: its messages accumulate, up to
// [Config.MaxPending] per sink, beyond which new ones are dropped, counted and alerted.
package outbox

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/sink"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// DomainName is the name the outbox's tables are registered under ([engine.Engine.RegisterDomain]).
const DomainName = "outbox"

//go:embed migrations
var migrations embed.FS

// DefaultMaxPending is the bound on a sink's undelivered messages of a [Config] that sets none.
const DefaultMaxPending = 1_000_000

// Config configures an [Outbox].
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	// Sinks are the sinks this process relays, by name. A rule may name a sink no process here
	// relays: its messages wait in the outbox (and count towards MaxPending).
	Sinks map[string]sink.Sink
	// MaxPending bounds the undelivered messages of a sink; beyond it new messages are dropped
	// and counted (sluice_outbox_dropped_total), with an error logged. Defaults to
	// [DefaultMaxPending].
	MaxPending int
	// BatchSize is how many messages the relay sends at once. Defaults to 500.
	BatchSize int
	// PollInterval is how often an idle relay looks for messages committed by other
	// processes; this process's commits wake it at once. Defaults to 250ms.
	PollInterval time.Duration
	// MinBackoff and MaxBackoff bound the relay's wait after a failed delivery, doubling
	// from the first to the second. Default to 100ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// LeaseDuration is how long a relay's claim on a sink lasts without renewal; another
	// process takes over a sink whose relay died after it. Defaults to 15s.
	LeaseDuration time.Duration
	// Exclusive says no other process relays from this store (the embedded store's data-dir
	// lock): the relay takes the sinks' leases at once.
	Exclusive bool
	// CheckInterval is how often the pending counts are checked against MaxPending. Defaults to 2s.
	CheckInterval time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Outbox records publications and relays them to sinks. Register it with an engine, then Start
// it. It is safe for concurrent use.
type Outbox struct {
	cfg   Config
	log   *slog.Logger
	db    store.Store
	inst  string
	owner string

	mu      sync.Mutex
	wakes   []chan struct{}  // one per relay
	full    map[string]bool  // sinks at MaxPending: new messages are dropped
	dropped map[string]int64 // dropped since last added to outbox_relays
	drops   map[string]int64 // dropped by this process in total (metrics)
	// dropMu orders settle's move of dropped counts to outbox_relays with Status's reading of
	// both.
	dropMu sync.Mutex

	startOnce sync.Once
	stopOnce  sync.Once
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// New returns an outbox; Register it before use.
func New(cfg Config) *Outbox {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	host, _ := os.Hostname()
	return &Outbox{cfg: cfg, log: cfg.Logger, db: cfg.Store,
		owner: fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano()),
		full:  map[string]bool{}, dropped: map[string]int64{}, drops: map[string]int64{}}
}

// Register creates the outbox's tables (a domain's migrations) and makes the outbox the
// engine's publisher.
func (o *Outbox) Register(ctx context.Context, e *engine.Engine) error {
	if err := e.RegisterDomain(ctx, DomainName, domain{}); err != nil {
		return err
	}
	if err := o.Open(ctx); err != nil {
		return err
	}
	e.SetPublisher(o)
	return nil
}

// Open reads the installation id; Register calls it. It is enough for a process that only
// reads the outbox's status, once the tables exist.
func (o *Outbox) Open(ctx context.Context) error {
	id, err := messagesIn(o.db).installation(ctx)
	if err != nil {
		return fmt.Errorf("outbox: read installation id: %w", err)
	}
	if id == "" {
		return errors.New("outbox: no installation id")
	}
	o.inst = id
	return nil
}

// Installation returns the installation id that prefixes message ids.
func (o *Outbox) Installation() string { return o.inst }

// domain gives the outbox's tables to the engine's domain registry; it takes no writes.
type domain struct{}

func (domain) Migrations(d store.Dialect) []store.DomainMigration { return Migrations(d) }

// Migrations returns the outbox tables' migrations in the dialect.
func Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

func (domain) Apply(context.Context, store.DomainSQL, []engine.DomainWrite) error {
	return errors.New("the outbox takes no domain writes: declare publish: rules instead")
}

// Body is the JSON body of a published message.
type Body struct {
	ID              string                     `json:"id"`
	Subject         string                     `json:"subject"`
	Status          string                     `json:"status"` // ok or error
	Workflow        string                     `json:"workflow"`
	WorkflowVersion int                        `json:"workflow_version"`
	JobID           int64                      `json:"job_id"`
	JobKey          string                     `json:"job_key,omitempty"`
	ItemID          int64                      `json:"item_id"`
	ItemName        string                     `json:"item_name"`
	Step            string                     `json:"step,omitempty"`
	Action          string                     `json:"action,omitempty"`
	Outcome         string                     `json:"outcome,omitempty"` // complete or failed
	Event           string                     `json:"event,omitempty"`
	Attempt         int                        `json:"attempt,omitempty"`
	Error           string                     `json:"error,omitempty"`
	Attributes      map[string]string          `json:"attributes"`
	Metadata        map[string]any             `json:"metadata"`
	Outputs         map[string]json.RawMessage `json:"outputs,omitempty"`
	Time            time.Time                  `json:"time"`
}

// message builds the row of a publication.
func (o *Outbox) message(p engine.Publication, now time.Time) (sink.Message, error) {
	r := p.Rule
	b := Body{Workflow: p.Workflow, WorkflowVersion: p.WorkflowVersion, JobID: p.JobID, JobKey: p.JobKey,
		ItemID: p.ItemID, ItemName: p.ItemName, Error: p.Error, Metadata: p.Metadata, Outputs: p.Outputs, Time: now}
	attrs := map[string]string{"workflow": p.Workflow, "job": strconv.FormatInt(p.JobID, 10), "item": strconv.FormatInt(p.ItemID, 10)}
	if p.Event {
		b.Event = p.Outcome
		b.Status = "ok"
		if p.Outcome == "fail" || p.Error != "" {
			b.Status = "error"
		}
		b.Subject = r.Subject
		if b.Subject == "" {
			b.Subject = p.Workflow + "." + p.Outcome
		}
		b.ID = fmt.Sprintf("%s/j%d/i%d/@%s/r%d", o.inst, p.JobID, p.ItemID, p.Outcome, p.RuleIndex)
		attrs["event"] = p.Outcome
	} else {
		b.Step, b.Action, b.Outcome, b.Attempt = p.Step, p.Action, p.Outcome, p.Attempt
		b.Status = "ok"
		if p.Outcome != "complete" {
			b.Status = "error"
		}
		b.Subject = r.Subject
		if b.Subject == "" {
			b.Subject = p.Workflow + "." + p.Step
		}
		b.ID = fmt.Sprintf("%s/j%d/i%d/%s/%s/a%d/r%d", o.inst, p.JobID, p.ItemID, p.Step, p.Outcome, p.Attempt, p.RuleIndex)
		attrs["step"], attrs["action"], attrs["outcome"] = p.Step, p.Action, p.Outcome
	}
	attrs["status"] = b.Status
	if r.Context != "" {
		attrs["context"] = r.Context
	}
	for k, v := range r.Attributes {
		attrs[k] = v
	}
	for _, k := range r.Keys {
		if v, ok := p.Metadata[k]; ok {
			switch v := v.(type) {
			case string:
				attrs[k] = v
			default:
				raw, _ := json.Marshal(v)
				attrs[k] = string(raw)
			}
		}
	}
	b.Attributes = attrs
	if r.Body != "" {
		body, err := bareBody(r.Body, p)
		if err != nil {
			return sink.Message{}, fmt.Errorf("publish %s: %w", b.ID, err)
		}
		return sink.Message{ID: b.ID, Subject: b.Subject, Attributes: attrs, Body: body}, nil
	}
	body, err := json.Marshal(b)
	if err != nil {
		return sink.Message{}, fmt.Errorf("publish %s: %w", b.ID, err)
	}
	return sink.Message{ID: b.ID, Subject: b.Subject, Attributes: attrs, Body: body}, nil
}

// bareBody is the value a rule's body: names (workflow.PublishRule.Body), as it is.
func bareBody(spec string, p engine.Publication) ([]byte, error) {
	if kind, ok := strings.CutPrefix(spec, workflow.BodyOutput); ok {
		if v, ok := p.Outputs[kind]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("body %s: the task has no output of that kind", spec)
	}
	key, _ := strings.CutPrefix(spec, workflow.BodyMetadata)
	v, ok := p.Metadata[key]
	if !ok {
		return nil, fmt.Errorf("body %s: the item has no metadata of that key", spec)
	}
	return json.Marshal(v)
}

// Publish implements [engine.Publisher]: one keyed insert of the messages' rows, in the task's
// transaction. A message for a full sink is dropped and counted instead.
func (o *Outbox) Publish(ctx context.Context, x store.DomainSQL, ps []engine.Publication) error {
	now := o.cfg.Now().UTC()
	ms := make([]newMessage, 0, len(ps))
	for _, p := range ps {
		if o.isFull(p.Rule.Sink) {
			o.drop(p.Rule.Sink)
			continue
		}
		m, err := o.message(p, now)
		if err != nil {
			return err
		}
		ms = append(ms, newMessage{sink: p.Rule.Sink, msg: m, createdAt: now.UnixNano()})
	}
	if len(ms) == 0 {
		return nil
	}
	if err := messagesOn(x).insert(ctx, ms); err != nil {
		return fmt.Errorf("outbox: insert %d messages: %w", len(ms), err)
	}
	return nil
}

// Committed implements [engine.Publisher]: it wakes the relays.
func (o *Outbox) Committed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range o.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (o *Outbox) isFull(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.full[name]
}

func (o *Outbox) drop(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dropped[name]++
	o.drops[name]++
}
