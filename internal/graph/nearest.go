package graph

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/action"
)

// barrierWait is how long a work item of a nearest-wins type waits before it looks again whether
// every work item above it has settled.
const barrierWait = 100 * time.Millisecond

// nearest decides nearest wins for the task's work item: whether it selects (no work item of the
// same package is nearer — at a lesser depth, or at the same depth earlier in declaration order),
// and the roots' managed versions. It first waits, snoozing, until every work item at a lesser
// depth has settled (traversed, or ended): then every candidate nearer than this one exists, so
// the answer does not depend on the order in which workers ran (a per-depth barrier, which the
// carto2 code called BSP phases). This waiting is polling, bounded by the queue's concurrency.
func (g *Graph) nearest(ctx context.Context, t *action.Task) (bool, map[string]string, error) {
	items, err := taskWorkItems(ctx)
	if err != nil {
		return false, nil, err
	}
	var me *WorkItem
	for _, it := range items {
		if it.ID == t.Item.ID {
			me = it
		}
	}
	if me == nil {
		return false, nil, action.Permanent(fmt.Errorf("work item %d is not in its job", t.Item.ID))
	}
	for _, it := range items {
		if it.ParentID != 0 && it.Depth < me.Depth && !settled(it) {
			return false, nil, action.Snooze(barrierWait)
		}
	}
	pkg := str(me.Metadata, keyPkg)
	managed := map[string]string{}
	for _, it := range items {
		if it.ParentID == 0 || str(it.Metadata, keyType) != str(me.Metadata, keyType) {
			continue
		}
		if str(it.Metadata, keyPkg) == pkg && it.Depth <= me.Depth && it.ID != me.ID &&
			(it.Depth < me.Depth || it.SortKey < me.SortKey) {
			return false, nil, nil
		}
		if it.Depth == 1 && me.Depth >= 3 && str(work(it.Metadata), workVersion) != "" {
			rels, err := relationships(ctx, str(it.Metadata, keyType), selectedPkg(it.Metadata), str(work(it.Metadata), workVersion))
			if err != nil {
				return false, nil, err
			}
			for _, r := range rels {
				if _, ok := managed[r.Target]; r.Kind == "managed" && !ok {
					managed[r.Target] = r.Advice
				}
			}
		}
	}
	return true, managed, nil
}

// settled reports whether a work item will make no more children: it traversed, or ended
// before (max depth, AVOIDED, FAILED, ERROR, a task failed for good).
func settled(it *WorkItem) bool {
	st := it.Status
	switch {
	case it.Error != "", str(st, StatusTraversalResult) != "", str(st, StatusEndDetectResult) == "DONE":
		return true
	case str(st, StatusSelectionResult) == "AVOIDED", str(st, StatusSelectionResult) == "FAILED":
		return true
	case str(st, StatusResolutionResult) == "FAILED", str(st, StatusResolutionResult) == "ERROR":
		return true
	}
	return false
}
