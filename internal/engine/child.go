package engine

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// NewChild is a child to record for a running task; its blobs are already durable. Make one
// with [ChildOf].
type NewChild struct {
	Task    *record.Task
	Ordinal int
	Child
	// MaxText caps the child's text in characters, when set; see [textclean.Sanitize].
	MaxText int
	// ProgressFrom and ProgressTo are the task's reported progress before the previous child and
	// before this one: the child gets that slice of the part of the parent not colored by the task.
	ProgressFrom, ProgressTo float64
}

// CreateChild records a child of the task's item and fires start on it. The child inherits the
// parent's metadata and options; its own keys win. A child that exists at
// the same (parent, step, ordinal) is left alone when it matches and is an [ErrNondeterministic]
// error when it differs.
func (t *Tx) CreateChild(c *NewChild) error {
	tt := t.t
	parent, p, err := tt.childParams(c)
	if err != nil {
		return err
	}
	it, inserted, err := tt.x.ItemInsert(tt.ctx, p)
	if err != nil {
		return err
	}
	if !inserted {
		return existingChild(c, parent, it)
	}
	return tt.recordChild(parent, it, p.RangeLen)
}

// CreateChildren is [Tx.CreateChild] for many children, in one multi-row insert: the parent's
// row is locked once and its child count written once (at the flush), whatever their number.
// A child that exists already (a replay) is compared as CreateChild compares it.
func (t *Tx) CreateChildren(cs []*NewChild) error {
	if len(cs) == 1 {
		return t.CreateChild(cs[0])
	}
	tt := t.t
	parents := make([]*record.Item, len(cs))
	ps := make([]store.ItemInsertParams, len(cs))
	for i, c := range cs {
		var err error
		if parents[i], ps[i], err = tt.childParams(c); err != nil {
			return err
		}
	}
	items, err := tt.x.ItemInsertMany(tt.ctx, ps)
	if err != nil {
		return err
	}
	type key struct {
		parent  int64
		step    string
		ordinal int
	}
	made := make(map[key]*record.Item, len(items))
	for _, it := range items {
		made[key{it.ParentID, it.Step, it.Ordinal}] = it
	}
	for i, c := range cs {
		if it, ok := made[key{ps[i].ParentID, ps[i].Step, ps[i].Ordinal}]; ok {
			if err := tt.recordChild(parents[i], it, ps[i].RangeLen); err != nil {
				return err
			}
			continue
		}
		// Left out of the insert: it exists, made by an earlier attempt.
		it, _, err := tt.x.ItemInsert(tt.ctx, ps[i])
		if err != nil {
			return err
		}
		if err := existingChild(c, parents[i], it); err != nil {
			return err
		}
	}
	return nil
}

// parentOf returns the item whose task creates children: the transaction's locked copy if it
// has one, else the row read without a lock. Creating children does not lock their parent: its
// child count is held back and written at the end of the transaction (flushPending), so the row
// is locked only for the commit. What creating a child reads of its parent does not change while
// the task runs (its job, depth, sort key, progress range); its metadata and options are merged
// as committed, as they were when its lock was waited for.
func (tt *tx) parentOf(id int64) (*record.Item, error) {
	if it, ok := tt.items[id]; ok {
		return it, nil
	}
	if it, ok := tt.peeked[id]; ok {
		return it, nil
	}
	it, err := tt.x.ItemGet(tt.ctx, id)
	if err != nil {
		return nil, err
	}
	tt.peeked[id] = it
	return it, nil
}

// peekParents reads, in one statement, the parents among ids that parentOf would read one by
// one (neither locked nor peeked in this transaction).
func (tt *tx) peekParents(ids []int64) error {
	var want []int64
	for _, id := range ids {
		if tt.items[id] == nil && tt.peeked[id] == nil {
			want = append(want, id)
		}
	}
	if len(want) < 2 {
		return nil // parentOf reads it as cheaply
	}
	slices.Sort(want)
	its, err := tt.x.ItemGetMany(tt.ctx, slices.Compact(want))
	if err != nil {
		return err
	}
	for _, it := range its {
		tt.peeked[it.ID] = it
	}
	return nil
}

// childParams returns the child's parent (see parentOf) and the child's row to insert, the
// child sanitised: every path that records children goes through here.
func (tt *tx) childParams(c *NewChild) (*record.Item, store.ItemInsertParams, error) {
	c.sanitize()
	parent, err := tt.parentOf(c.Task.ItemID)
	if err != nil {
		return nil, store.ItemInsertParams{}, err
	}
	if parent.NChildren <= c.Ordinal { // not a replay of a child that exists
		if err := tt.e.checkChild(parent.JobID, parent.Depth+1); err != nil {
			return nil, store.ItemInsertParams{}, err
		}
	}
	var pmd, popts map[string]any
	if err := unmarshalObjects(parent.Metadata, &pmd, parent.Options, &popts); err != nil {
		return nil, store.ItemInsertParams{}, fmt.Errorf("item %d: %w", parent.ID, err)
	}
	md, err := json.Marshal(merge(pmd, c.Metadata))
	if err != nil {
		return nil, store.ItemInsertParams{}, fmt.Errorf("child %q metadata: %w", c.Name, err)
	}
	opts, err := json.Marshal(merge(popts, c.Options))
	if err != nil {
		return nil, store.ItemInsertParams{}, fmt.Errorf("child %q options: %w", c.Name, err)
	}
	// The task keeps its weight of the parent's range (or what the parent's steps colored
	// already, if more: a child never covers a part counted done) and its children share the
	// rest, each the slice of the task's progress since the child before.
	own := min(parent.RangeLen, max(parent.RangeLen*c.Task.ProgressWeight, parent.Colored))
	rest := parent.RangeLen - own
	from, to := min(max(c.ProgressFrom, 0), 1), min(max(c.ProgressTo, 0), 1)
	lo := parent.RangeLo + own + rest*from
	length := max(0, rest*(to-from))
	return parent, store.ItemInsertParams{
		JobID: parent.JobID, ParentID: parent.ID, RootID: parent.RootID, Step: c.Task.Step, Ordinal: c.Ordinal,
		Depth: parent.Depth + 1, SortKey: fmt.Sprintf("%s%08x", parent.SortKey, c.Ordinal), Name: c.Name,
		ContentType: c.ContentType, BlobSHA256: c.BlobSHA256, Size: c.Size, Metadata: md, Options: opts,
		Text: c.Text, ThumbnailSHA: c.ThumbnailSHA, ThumbnailType: c.ThumbnailType, RangeLo: lo, RangeLen: length, Now: tt.now,
	}, nil
}

// existingChild checks a child that exists at the new one's ordinal against it.
func existingChild(c *NewChild, parent, it *record.Item) error {
	return Replays(it, c, parent.Name)
}

// recordChild counts a child just inserted on its parent (held back until the flush), caches it
// and fires start on it.
func (tt *tx) recordChild(parent, it *record.Item, length float64) error {
	tt.addChild(parent.ID, length)
	// A peeked parent's copy is counted too, so that its next child is not taken for a replay;
	// a locked one's is kept in step with its row.
	parent.NChildren++
	parent.Share = max(0, parent.Share-length)
	tt.created(it)
	tt.kids[parent.ID] = append(tt.kids[parent.ID], it)
	return tt.fire(it, workflow.EventStart)
}
