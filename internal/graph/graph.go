// Package graph is the `graph` workflow's domain (Cartographer 2.0): the traversal of dependency
// graphs by durable tasks, one step per route — register, end-detect, select-sync, select,
// resolve-sync, resolve, traverse, format — with the shared graph of package versions and their
// relationships, and each request's workspace, as tables of the store (see [Domain]).
//
// A request is a job whose root item carries the [Request]; register makes one child item per
// root package, and traverse one child per followed relationship, so recursion is fan-out. A work
// item's statuses (Cartographer's headers: select-status, resolution-result: AVOIDED, …) are
// recorded in its metadata under "status". Select-sync and resolve are keyed claims of the engine:
// within the request on the select key (a module version for gomod, a package for maven), and
// across the installation on the package version, so each version is fetched once however many
// requests ask for it.
package graph

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Config configures [New].
type Config struct {
	// Egress is the policy HTTP sources obey. Nil is egress's default (loopback and private
	// addresses refused).
	Egress *egress.Policy
	// FetchTimeout bounds one metadata fetch over HTTP. Defaults to 30s.
	FetchTimeout time.Duration
	// MaxMetadataBytes bounds one metadata file. Defaults to 4 MiB.
	MaxMetadataBytes int64
	// Types are the package types; nil means gomod and maven.
	Types *Types
	// Roots are the path roots (--path-root) a local source must lie under; see
	// [FetcherConfig.Roots]. Nil opens any directory.
	Roots *pathroot.Roots
}

// Graph holds the graph workflow's actions and what they share: the package types and the
// fetcher. What they read of the engine's records and of the graph's tables comes with each task
// (its read port, [engine.Reads]; see [Domain.ReadQueries]), so they run in process or in a
// remote worker alike. It is safe for concurrent use.
type Graph struct {
	types *Types
	fetch *Fetcher

	mu   sync.RWMutex
	reqs map[int64]*Request // requests by job: immutable once registered
}

// Core is what [Progress] reads of the engine's records: the work items of a request's job.
// [*engine.Engine] satisfies it.
type Core interface {
	// JobItems returns up to limit items of a job in tree order, those after the sort key after.
	JobItems(ctx context.Context, jobID int64, after string, limit int) ([]*record.Item, error)
}

// New returns a graph, whose actions can be registered at once.
func New(cfg Config) *Graph {
	ts := cfg.Types
	if ts == nil {
		ts = &Types{}
		ts.Add(GoMod{}, Maven{})
	}
	return &Graph{types: ts, fetch: NewFetcher(FetcherConfig{Egress: cfg.Egress, Timeout: cfg.FetchTimeout, MaxBytes: cfg.MaxMetadataBytes, Roots: cfg.Roots}),
		reqs: map[int64]*Request{}}
}

// request returns the request of a job, from its workspace.
func (g *Graph) request(ctx context.Context, jobID int64) (*Request, error) {
	g.mu.RLock()
	r := g.reqs[jobID]
	g.mu.RUnlock()
	if r != nil {
		return r, nil
	}
	r, err := engine.Query[*Request](ctx, DomainName, readWorkspace, struct{}{})
	if errors.Is(err, store.ErrNotFound) {
		return nil, action.Permanent(fmt.Errorf("job %d has no graph workspace (deleted, or not registered)", jobID))
	}
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if len(g.reqs) > 1000 {
		clear(g.reqs) // a cache, not a registry: requests are read again when needed
	}
	g.reqs[jobID] = r
	g.mu.Unlock()
	return r, nil
}

// Metadata keys of a work item. The engine keeps the first value an item's metadata key gets
// (a later task's value for it is ignored, at every depth), and a child starts with its parent's
// keys; so a work item's own state lives in two objects every work item is created with, empty —
// "work" (what its routes decided) and "status" (their statuses) — each of whose keys one route
// writes once.
const (
	keyRequest    = "request"    // on the request item: the Request
	keyType       = "type"       // package type
	keyPkg        = "pkg"        // the target package
	keyAdvice     = "advice"     // the version advice of the relationship (or the root's version)
	keyScope      = "scope"      // the traverse scope
	keyExclusions = "exclusions" // accumulated along the path
	keyKind       = "kind"       // the relationship's kind
	keySelectKey  = "select_key" // what select-sync claims in the request
	keyMaxDepth   = "max_depth"  // the request's, for end-detect
	keyWork       = "work"       // the work item's decisions, below
	keyStatus     = "status"     // the route statuses, below

	workVersion        = "version"     // the selected version
	workSelected       = "selected"    // the selected package, when a relocation or override changed it
	workResolveKey     = "resolve_key" // what resolve claims in the installation
	workSelectClaimer  = "select_claimer"
	workResolveClaimer = "resolve_claimer"
)

// Statuses recorded under a work item's "status" metadata, with Cartographer's names and values.
const (
	StatusEndDetectResult  = "end-detect-result" // IN_PROGRESS or DONE
	StatusEndDetectReason  = "end-detect-reason" // MAX_DEPTH_REACHED or TRAVERSE_COMPLETE
	StatusSelectStatus     = "select-status"     // UNKNOWN or DONE
	StatusSelectionResult  = "selection-result"  // DONE, AVOIDED or FAILED
	StatusResolveStatus    = "resolve-status"    // UNRESOLVED or DONE
	StatusResolutionResult = "resolution-result" // DONE, AVOIDED, FAILED or ERROR
	StatusTraversalResult  = "traversal-result"  // TRAVERSAL_DONE
	StatusError            = "error"             // the node error of FAILED or ERROR
)

// setStatus records statuses on the work item (once per task: a second call replaces the first's).
func setStatus(out action.Output, kv ...string) {
	out.SetMetadata(map[string]any{keyStatus: pairs(kv)})
}

// setWork records decisions on the work item (once per task, as setStatus).
func setWork(out action.Output, kv ...any) {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	out.SetMetadata(map[string]any{keyWork: m})
}

func pairs(kv []string) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// work returns a work item's decisions.
func work(md map[string]any) map[string]any {
	w, _ := md[keyWork].(map[string]any)
	return w
}

func str(md map[string]any, k string) string {
	s, _ := md[k].(string)
	return s
}

func strs(md map[string]any, k string) []string {
	var out []string
	if l, ok := md[k].([]any); ok {
		for _, v := range l {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// intOf reads a JSON number of metadata as an int64.
func intOf(md map[string]any, k string) int64 {
	if f, ok := metadata.Float(md[k]); ok {
		return int64(f)
	}
	return 0
}

// TypeNames lists the graph's package types, sorted.
func (g *Graph) TypeNames() []string { return g.types.Names() }
