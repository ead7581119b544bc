package engine

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// NewChild is a child to record for a running task; its blob is already durable.
type NewChild struct {
	Task    *store.Task
	Ordinal int
	// KeepExisting keeps a child that exists at the same ordinal as it is, whatever this one
	// holds, instead of failing the task as nondeterministic: the worker protocol's rule for a
	// replay (an unmodified converter's output may differ between runs, a PDF's dates say).
	KeepExisting  bool
	Name          string
	ContentType   string
	BlobSHA256    string
	Size          int64
	Metadata      map[string]any
	Options       map[string]any
	Text          *string
	ThumbnailSHA  string
	ThumbnailType string
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
	parent, err := tt.item(c.Task.ItemID)
	if err != nil {
		return err
	}
	if parent.NChildren <= c.Ordinal { // not a replay of a child that exists
		if err := tt.e.checkChild(parent.JobID, parent.Depth+1); err != nil {
			return err
		}
	}
	var pmd, popts map[string]any
	if err := unmarshalObjects(parent.Metadata, &pmd, parent.Options, &popts); err != nil {
		return fmt.Errorf("item %d: %w", parent.ID, err)
	}
	md, err := json.Marshal(merge(pmd, c.Metadata))
	if err != nil {
		return fmt.Errorf("child %q metadata: %w", c.Name, err)
	}
	opts, err := json.Marshal(merge(popts, c.Options))
	if err != nil {
		return fmt.Errorf("child %q options: %w", c.Name, err)
	}
	w := c.Task.ProgressWeight
	rest := parent.RangeLen * (1 - w)
	lo := parent.RangeLo + parent.RangeLen*w + rest*c.ProgressFrom
	length := max(0, rest*(c.ProgressTo-c.ProgressFrom))
	it, inserted, err := tt.x.ItemInsert(tt.ctx, store.ItemInsertParams{
		JobID: parent.JobID, ParentID: parent.ID, RootID: parent.RootID, Step: c.Task.Step, Ordinal: c.Ordinal,
		Depth: parent.Depth + 1, SortKey: fmt.Sprintf("%s%08x", parent.SortKey, c.Ordinal), Name: c.Name,
		ContentType: c.ContentType, BlobSHA256: c.BlobSHA256, Size: c.Size, Metadata: md, Options: opts,
		Text: c.Text, ThumbnailSHA: c.ThumbnailSHA, ThumbnailType: c.ThumbnailType, RangeLo: lo, RangeLen: length, Now: tt.now,
	})
	if err != nil {
		return err
	}
	if !inserted {
		if c.KeepExisting {
			return nil
		}
		// The content type is not compared: detect may have refined it since.
		if it.Name != c.Name || it.BlobSHA256 != c.BlobSHA256 {
			return fmt.Errorf("%w: child %d of %q was %q (sha256 %.12s), replay made %q (sha256 %.12s)",
				ErrNondeterministic, c.Ordinal, parent.Name, it.Name, it.BlobSHA256, c.Name, c.BlobSHA256)
		}
		return nil
	}
	tt.addChild(parent.ID, length)
	parent.NChildren++
	parent.Share = max(0, parent.Share-length)
	tt.created(it)
	tt.kids[parent.ID] = append(tt.kids[parent.ID], it)
	return tt.fire(it, workflow.EventStart)
}
