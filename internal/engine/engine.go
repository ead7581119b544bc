// Package engine is Sluice's scheduler: it turns events into ready tasks (the AND-join of a step's
// needs), applies finished tasks' effects, fans in with children.done, settles items through
// written → processed → ingested bottom-up, and ends jobs — all inside store transactions, so
// everything it knows is derived from the database and survives a crash at any instant (DESIGN §3–4).
//
// The engine runs no action itself except inline ones ([action.Policy.Inline]: quick steps that read
// only their item, run inside the transaction that makes them ready); package worker leases the
// other tasks, runs them and hands their results to [Engine.Apply] in batches.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/queue"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// ErrNondeterministic is returned when a replayed task creates a child that differs from the one
// recorded at the same ordinal (DESIGN §4.2).
var ErrNondeterministic = errors.New("nondeterministic action")

// Config configures an [Engine].
type Config struct {
	Store   store.Store
	Catalog *action.Catalog
	Logger  *slog.Logger
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// OnReady is called (without blocking) after a transaction made tasks ready, to wake workers,
	// with the queues of those tasks; nil means any queue may have ready tasks.
	OnReady func(queues []string)
	// OnCancel is called with the ids of running tasks whose job was canceled or failed.
	OnCancel func(taskIDs []int64)
	// OnJobEnd is called after a job reached a final state.
	OnJobEnd func(jobID int64, state record.JobState)
	// Remote lists actions whose tasks go to the queue "remote:<name>" for remote workers. Keys
	// match action names case-insensitively and are used as written ("Pdf" → "remote:Pdf").
	Remote map[string]bool
	// MaxItemDepth bounds how deep a job's item tree may grow (roots are depth 0). Defaults to
	// [DefaultMaxItemDepth].
	MaxItemDepth int
	// MaxJobItems bounds how many children a job may make in one process. Defaults to
	// [DefaultMaxJobItems].
	MaxJobItems int64
	// MaxBacklog bounds a job's unprocessed items below a step that creates children: past it
	// the step waits for them to be processed (see [Backlog]). Negative means no bound. Defaults
	// to [DefaultMaxBacklog].
	MaxBacklog int
	// UnavailableBackoff is how long a task whose attempt failed because the blob store did
	// not answer waits before it runs again. Defaults to [UnavailableBackoff]; tests of
	// outages shorten it.
	UnavailableBackoff time.Duration
	// Owner names this process in the records of the attempts it runs itself (inline steps):
	// the worker of each such attempt in an item's history. A node gives its worker the same
	// name for its leases. Defaults to "<host>-<pid>-<random>".
	Owner string
	// TempDir is where a task's domain writes past a megabyte wait for its commit, in a file of
	// its own (see [Effects.AddWrite]); put it on a disk, not in memory (tmpfs). Defaults to the
	// system's temp directory ($TMPDIR).
	TempDir string
}

// Engine applies workflow semantics to the store. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	store store.Store
	log   *slog.Logger
	mu    sync.RWMutex
	defs  map[defKey]*workflow.Definition
	plans map[*workflow.Definition]*plan
	// remote maps a lowercased action name to the name remote workers poll for ("pdf" → "Pdf").
	remote map[string]string
	// writer is the attached writer (see AttachWriter), guarded by mu.
	writer Writer
	// domains are the registered domains by name (see RegisterDomain), guarded by mu.
	domains map[string]Domain
	// queries are the registered domains' read queries ([DomainReader]), by domain.
	queries map[string]map[string]ReadQuery
	counts  itemCounts
	pace    pacer
	backlog backlogs
	live    liveProgress
	shown   shownFractions
	// publisher records publications (see SetPublisher), guarded by mu.
	publisher Publisher
}

type defKey struct {
	name    string
	version int
}

// New returns an engine.
func New(cfg Config) *Engine {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxItemDepth <= 0 {
		cfg.MaxItemDepth = DefaultMaxItemDepth
	}
	if cfg.MaxBacklog == 0 {
		cfg.MaxBacklog = DefaultMaxBacklog
	}
	if cfg.UnavailableBackoff <= 0 {
		cfg.UnavailableBackoff = UnavailableBackoff
	}
	if cfg.MaxJobItems <= 0 {
		cfg.MaxJobItems = DefaultMaxJobItems
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Owner == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if cfg.OnReady == nil {
		cfg.OnReady = func([]string) {}
	}
	if cfg.OnCancel == nil {
		cfg.OnCancel = func([]int64) {}
	}
	if cfg.OnJobEnd == nil {
		cfg.OnJobEnd = func(int64, record.JobState) {}
	}
	if cfg.Catalog == nil {
		cfg.Catalog = &action.Catalog{}
	}
	remote := map[string]string{}
	for name, on := range cfg.Remote {
		if on {
			remote[strings.ToLower(name)] = name
		}
	}
	return &Engine{cfg: cfg, store: cfg.Store, log: cfg.Logger, defs: map[defKey]*workflow.Definition{}, plans: map[*workflow.Definition]*plan{}, remote: remote}
}

// Catalog returns the engine's action catalog.
func (e *Engine) Catalog() *action.Catalog { return e.cfg.Catalog }

// Owner returns the name of this process in the records of the attempts it runs (see
// [Config.Owner]).
func (e *Engine) Owner() string { return e.cfg.Owner }

// Now returns the engine's clock time in UTC.
func (e *Engine) Now() time.Time { return e.cfg.Now().UTC() }

// ApplyWorkflow validates and stores a workflow definition, returning the stored version (an existing
// one when the definition is unchanged) and validation warnings.
func (e *Engine) ApplyWorkflow(ctx context.Context, src []byte, filename string) (*record.Workflow, []workflow.Diagnostic, error) {
	def, err := workflow.Parse(src, filename)
	if err != nil {
		return nil, nil, err
	}
	warnings, err := workflow.Validate(def, e.cfg.Catalog.Spec, e.cfg.Catalog.Names()...)
	if err != nil {
		return nil, warnings, err
	}
	canon, err := workflow.Marshal(def)
	if err != nil {
		return nil, warnings, err
	}
	var wf *record.Workflow
	err = e.inTxNoted(ctx, func(x store.Executor) (string, error) {
		var err error
		wf, err = x.WorkflowInsert(ctx, store.WorkflowInsertParams{
			Name: def.Name, Digest: workflow.Digest(def), Definition: canon, Source: src, Now: e.Now(),
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s v%d", wf.Name, wf.Version), nil
	})
	if err != nil {
		return nil, warnings, err
	}
	return wf, warnings, nil
}

// workflowNotFoundError says how to fix a lookup of a workflow never applied, and wraps the
// store's [store.ErrNotFound] so callers (the API's 404) match it with errors.Is.
type workflowNotFoundError struct {
	name string
	err  error
}

func (e *workflowNotFoundError) Error() string {
	return fmt.Sprintf("workflow %q not found: apply it first with `sluice workflow apply`", e.name)
}

func (e *workflowNotFoundError) Unwrap() error { return e.err }

// Definition returns the parsed definition of a stored workflow version (0: the latest). For
// a workflow or version never applied, the error wraps [store.ErrNotFound].
func (e *Engine) Definition(ctx context.Context, name string, version int) (*workflow.Definition, int, error) {
	if version != 0 {
		e.mu.RLock()
		d := e.defs[defKey{name, version}]
		e.mu.RUnlock()
		if d != nil {
			return d, version, nil
		}
	}
	wf, err := e.store.WorkflowGet(ctx, name, version)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, 0, &workflowNotFoundError{name: name, err: err}
		}
		return nil, 0, err
	}
	d, err := workflow.Parse(wf.Definition, fmt.Sprintf("%s v%d", name, wf.Version))
	if err != nil {
		return nil, 0, fmt.Errorf("decode workflow %q v%d: %w", name, wf.Version, err)
	}
	e.mu.Lock()
	e.defs[defKey{name, wf.Version}] = d
	e.mu.Unlock()
	return d, wf.Version, nil
}

// Queue returns the queue a step's tasks go to. A step with its own concurrency limit gets its own
// queue so the limit applies to it alone.
func (e *Engine) Queue(def *workflow.Definition, s *workflow.Step) string {
	if name, ok := e.remote[strings.ToLower(s.Action)]; ok {
		return queue.Remote(name).String()
	}
	if s.Action == "remote" {
		if n, ok := s.With["name"].(string); ok {
			return queue.Remote(n).String()
		}
	}
	if s.Concurrency > 0 || s.Claim != nil || s.Limit != nil {
		// A claim or a limit is checked by the worker before the action runs: never in a
		// held batch or inline (see worker.queues).
		return queue.Step(s.Action, def.Name, s.Name).String()
	}
	return queue.Action(s.Action).String()
}

// weight returns the step's progress weight, Overview's rule: a task colors that fraction of its
// item's range (never more than the part its children do not cover) when it completes, and the
// rest, 1-weight, is handed to the children it creates, sliced by the progress it reported
// before each. An item's steps share its own part: what one colored another does not color
// again, and whatever is left is colored when the item is ingested.
func (e *Engine) weight(s *workflow.Step) float64 {
	if s.ProgressWeight != nil {
		return *s.ProgressWeight
	}
	if spec, ok := e.cfg.Catalog.Spec(s.Action); ok && spec.ProgressWeight != nil {
		return *spec.ProgressWeight
	}
	return 1
}
