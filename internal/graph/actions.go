package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/pathroot"
)

// Events the graph's actions emit as outcomes, routing a work item to its next route.
const (
	EventInProgress = "end-detect.in-progress"
	EventDone       = "end-detect.done"
	EventSelected   = "selected"
	EventUnresolved = "resolve.unresolved"
	EventResolved   = "resolved"
)

// fn is an action made of a spec, a policy and a function.
type fn struct {
	spec   action.Spec
	policy action.Policy
	run    func(ctx context.Context, t *action.Task, out action.Output) error
}

func (a fn) Spec() action.Spec     { return a.spec }
func (a fn) Policy() action.Policy { return a.policy }
func (a fn) Run(ctx context.Context, t *action.Task, out action.Output) error {
	return a.run(ctx, t, out)
}

// Actions returns the graph's actions, one per route (resolve serves every package type: the
// workflow routes each type to a step of its own with `when:`), and graph-unknown-type, the
// error route of a type no step handles.
func (g *Graph) Actions() []action.Action {
	quick := func(name, doc string, outcomes []string, run func(context.Context, *action.Task, action.Output) error) action.Action {
		return fn{spec: action.Spec{Name: name, Version: "1", Doc: doc, Outcomes: outcomes, Concurrency: 16}, policy: action.Policy{NoTempDir: true}, run: run}
	}

	return []action.Action{
		quick("graph-register", "Registers a graph request: records its workspace and makes a work item per root package.", nil, g.register),
		inlineWorkItems(quick("graph-end-detect", "Decides whether a work item continues (max depth), or on the request item that the traversal is done.",
			[]string{EventInProgress, EventDone}, g.endDetect)),
		quick("graph-select-sync", "Claims the selection of a package (version) in the request; run under a claim, the others wait for it.", nil, g.selectSync),
		quick("graph-select", "Selects the version a work item traverses: the user's override, or the package type's choice.", []string{EventSelected}, g.selectVersion),
		quick("graph-resolve-sync", "Skips resolving a package version the shared graph already holds (AVOIDED).", []string{EventUnresolved, EventResolved}, g.resolveSync),
		quick("graph-resolve", "Fetches a package version's metadata and stores its relationships in the shared graph.", []string{EventResolved}, g.resolve),
		quick("graph-traverse", "Makes a work item per relationship of the selected version that its scope and exclusions follow.", nil, g.traverse),
		quick("graph-format", "Collects the request's work items into its result: nodes, edges, paths and node errors.", nil, g.format),
		quick("graph-unknown-type", "The error route of a work item whose package type no step handles.", nil, g.unknownType),
	}
}

// inlineWorkItems lets the engine run the action inline on work items (not the request item):
// there it reads nothing but the item.
func inlineWorkItems(a action.Action) action.Action {
	f := a.(fn)
	f.policy.Inline = func(it action.Item) bool { return it.ParentID != 0 }
	return f
}

// register records the request's workspace and makes one work item per root package.
func (g *Graph) register(ctx context.Context, t *action.Task, out action.Output) error {
	var r Request
	b, _ := json.Marshal(t.Item.Metadata[keyRequest])
	if err := json.Unmarshal(b, &r); err != nil {
		return action.Permanent(fmt.Errorf("graph request: %w", err))
	}
	if err := r.Normalize(); err != nil {
		return action.Permanent(fmt.Errorf("graph request: %w", err))
	}
	if err := g.checkSource(r.Source); err != nil {
		return err
	}
	if err := out.Write(action.DomainWrite{Domain: DomainName, Key: "workspace", Payload: write{Workspace: &r}}); err != nil {
		return err
	}
	pt, _ := g.types.Lookup(r.Type)
	for _, root := range r.Roots {
		pkg, ver, _ := splitVersion(root)
		if r.excluded(pkg) {
			continue
		}
		if err := out.CreateChild(ctx, workItem(pt, &r, pkg, ver, r.Scope, nil, "root")); err != nil {
			return err
		}
	}
	return nil
}

// checkSource refuses a request whose local source this process may not read (outside its
// path roots, or reached through a link out), however the request was made: the request fails
// at once with the source and the reason, before any work item is made.
func (g *Graph) checkSource(source string) error {
	if l, err := pathroot.Classify(source); err != nil || l.Kind != pathroot.Local {
		return nil // a remote source, or one Fetch refuses as metadata
	}
	dir, err := g.fetch.OpenSource(source)
	if err != nil {
		if perr := refusedSource(err); perr != nil {
			return perr
		}
		return err
	}
	return dir.Close()
}

// refusedSource is the error of a request's source refused by the path roots (err holds a
// [*pathroot.Error]), which fails the action permanently: the source is the request's, the same
// on every attempt, and no version's answer is recorded from it. It is nil for any other error.
func refusedSource(err error) error {
	var pe *pathroot.Error
	if errors.As(err, &pe) {
		return action.Permanent(fmt.Errorf("graph request: source %w", pe))
	}
	return nil
}

// workItem is a new work item's child description. It sets every key of a work item, so that
// none is inherited from its parent's metadata.
func workItem(pt PackageType, r *Request, pkg, advice, scope string, exclusions []string, kind string) action.Child {
	typ := r.Type
	key := typ + ":" + pkg
	if pt != nil {
		key = typ + ":" + pt.SelectKey(pkg, advice)
	}
	if exclusions == nil {
		exclusions = []string{}
	}
	return action.Child{Name: pkg + "@" + advice, Metadata: map[string]any{
		keyRequest: nil, keyType: typ, keyPkg: pkg, keyAdvice: advice, keyScope: scope, keyExclusions: exclusions,
		keyKind: kind, keySelectKey: key, keyMaxDepth: r.MaxDepth, keyWork: map[string]any{}, keyStatus: map[string]any{},
	}}
}

// endDetect stops a work item past the request's max depth; on the request item (once every
// work item is done) it records why the traversal ended.
func (g *Graph) endDetect(ctx context.Context, t *action.Task, out action.Output) error {
	if t.Item.ParentID == 0 {
		items, err := taskWorkItems(ctx)
		if err != nil {
			return err
		}
		reason := "TRAVERSE_COMPLETE"
		for _, it := range items {
			if str(it.Status, StatusEndDetectReason) == "MAX_DEPTH_REACHED" {
				reason = "MAX_DEPTH_REACHED"
				break
			}
		}
		setStatus(out, StatusEndDetectResult, "DONE", StatusEndDetectReason, reason)
		return nil
	}
	// The request's max depth travels with each work item, so that this runs inline.
	if depth, max := int64(t.Item.Depth-1), intOf(t.Item.Metadata, keyMaxDepth); max > 0 && depth > max {
		setStatus(out, StatusEndDetectResult, "DONE", StatusEndDetectReason, "MAX_DEPTH_REACHED")
		out.Emit(EventDone)
		return nil
	}
	setStatus(out, StatusEndDetectResult, "IN_PROGRESS")
	out.Emit(EventInProgress)
	return nil
}

// selectSync runs under the step's claim on the select key: the first work item of the key in
// the request runs it and records itself as the claimer; the others complete with its result
// (the claimer's id), which tells select they are AVOIDED.
func (g *Graph) selectSync(_ context.Context, t *action.Task, out action.Output) error {
	setWork(out, workSelectClaimer, t.Item.ID)
	return nil
}

// selectVersion selects the version of the claimer of a select key; for the others it records
// that the selection was AVOIDED, and the work item ends (the claimer's traverses the package).
func (g *Graph) selectVersion(ctx context.Context, t *action.Task, out action.Output) error {
	md := t.Item.Metadata
	pt, ok := g.types.Lookup(str(md, keyType))
	if !ok {
		return action.Permanent(fmt.Errorf("unknown package type %q", str(md, keyType)))
	}
	advice := str(md, keyAdvice)
	if nw, ok := pt.(interface{ NearestWins() bool }); ok && nw.NearestWins() {
		won, managed, err := g.nearest(ctx, t)
		if err != nil {
			return err
		}
		if !won {
			setStatus(out, StatusSelectStatus, "DONE", StatusSelectionResult, "AVOIDED")
			return nil
		}
		if v, ok := managed[str(md, keyPkg)]; ok && t.Item.Depth >= 3 {
			advice = v // the roots' dependencyManagement governs transitive versions
		}
	} else if intOf(work(md), workSelectClaimer) != t.Item.ID {
		setStatus(out, StatusSelectStatus, "DONE", StatusSelectionResult, "AVOIDED")
		return nil
	}
	r, err := g.request(ctx, t.JobID)
	if err != nil {
		return err
	}
	pkg, ver, err := pt.Select(ctx, r, str(md, keyPkg), advice)
	if err != nil {
		if perr := refusedSource(err); perr != nil {
			return perr
		}
		var me *MetadataError
		if errors.Is(err, ErrMissing) || errors.As(err, &me) {
			setStatus(out, StatusSelectStatus, "UNKNOWN", StatusSelectionResult, "FAILED", StatusError, err.Error())
			return nil
		}
		return err
	}
	setStatus(out, StatusSelectStatus, "UNKNOWN", StatusSelectionResult, "DONE")
	setWork(out, workVersion, ver, workSelected, pkg, workResolveKey, pt.Name()+":"+pkg+"@"+ver)
	out.Emit(EventSelected)
	return nil
}

// selectedPkg is the package a work item traverses: the one selected (a relocation), or its target.
func selectedPkg(md map[string]any) string {
	if p := str(work(md), workSelected); p != "" {
		return p
	}
	return str(md, keyPkg)
}

// resolveSync skips the resolve of a version the shared graph holds already.
func (g *Graph) resolveSync(ctx context.Context, t *action.Task, out action.Output) error {
	md := t.Item.Metadata
	vs, err := engine.Query[versionState](ctx, DomainName, readVersionState, versionKey{str(md, keyType), selectedPkg(md), str(work(md), workVersion)})
	if err != nil {
		return err
	}
	state, errText := vs.State, vs.Error
	switch state {
	case "":
		setStatus(out, StatusResolveStatus, "UNRESOLVED")
		out.Emit(EventUnresolved)
	case "DONE":
		setStatus(out, StatusResolveStatus, "DONE", StatusResolutionResult, "AVOIDED")
		out.Emit(EventResolved)
	default: // FAILED or ERROR before: the same source gives the same answer
		setStatus(out, StatusResolveStatus, "DONE", StatusResolutionResult, state, StatusError, errText)
	}
	return nil
}

// resolve fetches the selected version's metadata and records the version and its relationships
// in the shared graph. It runs under the step's installation claim on the version, so a version
// is fetched once for all requests; a missing or unusable metadata file is recorded too (FAILED,
// ERROR) and ends the work item, not the request. Its success is recorded by traverse, which
// tells the claimer (DONE) from the work items that took its result (AVOIDED).
func (g *Graph) resolve(ctx context.Context, t *action.Task, out action.Output) error {
	r, err := g.request(ctx, t.JobID)
	if err != nil {
		return err
	}
	md := t.Item.Metadata
	typ, pkg, ver := str(md, keyType), selectedPkg(md), str(work(md), workVersion)
	pt, ok := g.types.Lookup(typ)
	if !ok {
		return action.Permanent(fmt.Errorf("unknown package type %q", typ))
	}
	setWork(out, workResolveClaimer, t.Item.ID)
	rels, err := pt.Resolve(ctx, g.fetch, r.Source, pkg, ver)
	if perr := refusedSource(err); perr != nil {
		return perr // the request's source, not this version's answer: nothing recorded
	}
	v := &version{Type: typ, Pkg: pkg, Version: ver, State: "DONE", Rels: rels}
	var me *MetadataError
	switch {
	case err == nil:
		out.Emit(EventResolved)
	case errors.Is(err, ErrMissing):
		v.State, v.Error, v.Rels = "FAILED", err.Error(), nil
		setStatus(out, StatusResolutionResult, "FAILED", StatusError, err.Error())
	case errors.As(err, &me):
		v.State, v.Error, v.Rels = "ERROR", err.Error(), nil
		setStatus(out, StatusResolutionResult, "ERROR", StatusError, err.Error())
	default:
		return fmt.Errorf("resolve %s %s@%s: %w", typ, pkg, ver, err)
	}
	return out.Write(action.DomainWrite{Domain: DomainName, Key: "version", Payload: write{Version: v}})
}

// traverse makes a work item per relationship of the selected version that the item's scope
// follows and its exclusions (its path's, the request's) do not leave out.
func (g *Graph) traverse(ctx context.Context, t *action.Task, out action.Output) error {
	md := t.Item.Metadata
	switch c := intOf(work(md), workResolveClaimer); {
	case c == t.Item.ID:
		setStatus(out, StatusResolutionResult, "DONE", StatusTraversalResult, "TRAVERSAL_DONE")
	case c != 0: // the result of another work item's resolve, taken under the claim
		setStatus(out, StatusResolutionResult, "AVOIDED", StatusTraversalResult, "TRAVERSAL_DONE")
	default: // resolve-sync found it resolved (and said AVOIDED)
		setStatus(out, StatusTraversalResult, "TRAVERSAL_DONE")
	}
	r, err := g.request(ctx, t.JobID)
	if err != nil {
		return err
	}
	typ := str(md, keyType)
	pt, _ := g.types.Lookup(typ)
	rels, err := relationships(ctx, typ, selectedPkg(md), str(work(md), workVersion))
	if err != nil {
		return err
	}
	scope := str(md, keyScope)
	path := strs(md, keyExclusions)
	childScope := scope
	if scope == ScopeBuildTime {
		childScope = ScopeRuntime
	}
	for _, rel := range follow(r, rels, scope, path) {
		ex := append(slices.Clone(path), rel.Exclusions...)
		slices.Sort(ex)
		ex = slices.Compact(ex)
		if err := out.CreateChild(ctx, workItem(pt, r, rel.Target, rel.Advice, childScope, ex, rel.Kind)); err != nil {
			return err
		}
	}
	return nil
}

// follow returns the relationships a work item of the scope, with the exclusions of its path,
// follows: RUNTIME ones always, BUILD_TIME ones in a BUILD_TIME traversal, EXTRA never; none to an
// excluded package.
func follow(r *Request, rels []Relationship, scope string, exclusions []string) []Relationship {
	var out []Relationship
	for _, rel := range rels {
		switch {
		case rel.Scope == ScopeExtra:
		case rel.Scope == ScopeBuildTime && scope != ScopeBuildTime:
		case r.excluded(rel.Target) || slices.Contains(exclusions, rel.Target):
		default:
			out = append(out, rel)
		}
	}
	return out
}

// unknownType ends a work item whose package type no step handles with a node error.
func (g *Graph) unknownType(_ context.Context, t *action.Task, out action.Output) error {
	return action.Permanent(fmt.Errorf("unknown package type %q for %s (known: %v)", str(t.Item.Metadata, keyType), str(t.Item.Metadata, keyPkg), g.types.Names()))
}
