// Package ingest is the last step of the documents workflow: it turns an item, once its children
// are done, into what the user sees — a Document for a leaf, an Error for any item with an error
// (parents too) — as outputs keyed by (item, kind), so replays are harmless.
package ingest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/store"
)

// Output kinds written by the ingest action.
const (
	KindDocument = store.OutputDocument
	KindError    = store.OutputError
)

// Document is the value of a "document" output.
type Document struct {
	Title      string         `json:"title"`
	PageNumber int            `json:"page_number,omitempty"`
	IsFromOCR  bool           `json:"is_from_ocr"`
	Metadata   map[string]any `json:"metadata"`
}

// Error is the value of an "error" output: the one the engine writes for an item a cancel
// settles, too.
type Error = store.ErrorValue

type ingestAction struct{}

// New returns the ingest action.
func New() action.Action { return ingestAction{} }

func (ingestAction) Spec() action.Spec {
	w := 0.0
	return action.Spec{Name: "ingest", Version: "1", Concurrency: 16, ProgressWeight: &w,
		Doc: "records a Document for a leaf item and an Error for an item with an error"}
}

// Policy runs ingest inline: it reads only the item's row, so the engine runs it in the
// transaction that fires children.done.
func (ingestAction) Policy() action.Policy {
	return action.Policy{Inline: action.InlineAlways, NoTempDir: true}
}

func (ingestAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	it := t.Item
	if it.Error != "" {
		v, err := json.Marshal(Error{Name: it.Name, Message: it.Error})
		if err != nil {
			return err
		}
		if err := out.SetOutput(ctx, KindError, v); err != nil {
			return err
		}
	}
	if it.NChildren > 0 || it.Error != "" && !it.HasText {
		return nil
	}
	doc := Document{Title: it.Name, Metadata: it.Metadata}
	if v, ok := metadata.Int(it.Metadata["page_number"]); ok {
		doc.PageNumber = int(v)
	}
	if v, ok := it.Metadata["is_from_ocr"].(bool); ok {
		doc.IsFromOCR = v
	}
	v, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode document: %w", err)
	}
	return out.SetOutput(ctx, KindDocument, v)
}
