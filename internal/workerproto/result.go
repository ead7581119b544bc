package workerproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
)

// maxResultBytes bounds a result.json payload, which is read into memory whole; maxResultChildren
// the children it may carry.
const (
	maxResultBytes    = 64 << 20
	maxResultChildren = 100_000
)

// ActionResult is the payload of result.json (an extension: docs/worker-protocol-extensions.md):
// everything an attempt of a built-in action did — what an in-process attempt records in its
// [engine.Effects] — and how it ended. It ends the task as done or error does: the task completes
// with its effects when Error is nil, else fails (or is retried, or snoozed) with nothing of it
// committed.
type ActionResult struct {
	Metadata    map[string]any             `json:"metadata,omitempty"`
	ContentType string                     `json:"content_type,omitempty"`
	Events      []string                   `json:"events,omitempty"`
	Outputs     map[string]json.RawMessage `json:"outputs,omitempty"`
	Text        *string                    `json:"text,omitempty"`
	// Thumbnail names the item's thumbnail, a blob already stored (POST <task url>/blobs).
	Thumbnail *ResultBlob `json:"thumbnail,omitempty"`
	// Children are the children the attempt made, in increasing order of ordinal (from 0, or
	// from the count an earlier attempt recorded when the action resumed); their blobs are
	// already stored.
	Children []ResultChild `json:"children,omitempty"`
	Writes   []domainWrite `json:"writes,omitempty"`
	Error    *ResultError  `json:"error,omitempty"`
}

// ResultBlob names a stored blob.
type ResultBlob struct {
	SHA256      string `json:"sha256"`
	ContentType string `json:"content_type"`
}

// ResultChild is one child of an [ActionResult]: the child, and the slice of the task's progress
// it covers.
type ResultChild struct {
	engine.Child
	Ordinal int     `json:"ordinal"`
	From    float64 `json:"from,omitempty"`
	To      float64 `json:"to,omitempty"`
}

// ResultError is how an attempt of an [ActionResult] failed: Permanent fails the item, Snooze
// runs the task again after that many seconds without spending an attempt, else the task is
// retried as its step's policy says.
type ResultError struct {
	Message   string  `json:"message"`
	Permanent bool    `json:"permanent,omitempty"`
	Snooze    float64 `json:"snooze_seconds,omitempty"`
}

// err is the error the engine records.
func (e *ResultError) err() error {
	msg := e.Message
	if msg == "" {
		msg = "the remote worker reported an empty error"
	}
	switch {
	case e.Snooze > 0:
		return action.Snooze(time.Duration(e.Snooze * float64(time.Second)))
	case e.Permanent:
		return action.Permanent(errors.New(msg))
	}
	return errors.New(msg)
}

// resultError encodes an action's error for an [ActionResult].
func resultError(err error) *ResultError {
	if d, ok := action.AsSnooze(err); ok {
		return &ResultError{Message: err.Error(), Snooze: max(d.Seconds(), 0.001)}
	}
	return &ResultError{Message: err.Error(), Permanent: action.IsPermanent(err)}
}

// applyResult ends the task with a result.json payload. A payload that cannot be applied (not
// JSON, a write to no domain, a blob not stored, an output not JSON) fails the task for good with
// a step error naming the reason, and nothing of it is committed.
func (ss *session) applyResult(ctx context.Context, b []byte) error {
	res, err := ss.decodeResult(ctx, b)
	if err != nil {
		return ss.fail(ctx, action.Permanent(fmt.Errorf("step error: result.json: %v", err)))
	}
	if !ss.claim(endDone) {
		return nil
	}
	ss.state = stateEnd
	return ss.finalize(ctx, res)
}

func (ss *session) decodeResult(ctx context.Context, b []byte) (*engine.Result, error) {
	var ar ActionResult
	if err := metadata.Unmarshal(b, &ar); err != nil { // metadata and children's as written
		return nil, jsonProblem(err)
	}
	if len(ar.Children) > maxResultChildren {
		return nil, fmt.Errorf("%d children (at most %d)", len(ar.Children), maxResultChildren)
	}
	res := &engine.Result{}
	if ar.Error != nil {
		res.Err = ar.Error.err()
		return res, nil
	}
	ef := &res.Effects
	blobs := ss.srv.b.Blobs()
	stat := func(what, sha string) (int64, error) {
		n, err := blobs.Stat(ctx, sha)
		if errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrInvalidKey) {
			return 0, fmt.Errorf("%s: blob %s is not in the blob store", what, sha)
		}
		return n, err
	}
	for i, c := range ar.Children {
		if c.Name == "" {
			return nil, fmt.Errorf("child %d: empty name", i)
		}
		if c.Ordinal < 0 || i > 0 && c.Ordinal <= ar.Children[i-1].Ordinal {
			return nil, fmt.Errorf("child %d: ordinal %d not above the previous child's", i, c.Ordinal)
		}
		if c.BlobSHA256 != "" {
			n, err := stat(fmt.Sprintf("child %d", i), c.BlobSHA256)
			if err != nil {
				return nil, err
			}
			c.Size = n
		} else {
			c.Size = 0
		}
		if c.ThumbnailSHA != "" {
			if _, err := stat(fmt.Sprintf("thumbnail of child %d", i), c.ThumbnailSHA); err != nil {
				return nil, err
			}
		}
		nc := engine.ChildOf(ss.task, c.Ordinal, c.Child, c.From, c.To)
		nc.MaxText = ss.maxText()
		ef.AddChild(nc)
	}
	if ar.Thumbnail != nil {
		if _, err := stat("thumbnail", ar.Thumbnail.SHA256); err != nil {
			return nil, err
		}
		ef.SetThumbnail(ar.Thumbnail.SHA256, ar.Thumbnail.ContentType)
	}
	if ar.Text != nil {
		ef.SetText(*ar.Text)
	}
	if ar.ContentType != "" {
		ef.SetContentType(ar.ContentType)
	}
	if ar.Metadata != nil {
		ef.SetMetadata(ar.Metadata)
	}
	ef.Emit(ar.Events...)
	for k, v := range ar.Outputs {
		if err := ef.SetOutput(k, v); err != nil {
			return nil, err
		}
	}
	for _, effect := range ss.effects.Writes { // N.write.json fragments sent before
		ef.AddWrite(effect)
	}
	for i, w := range ar.Writes {
		if len(w.Payload) == 0 {
			w.Payload = json.RawMessage("null")
		}
		dw, err := ss.srv.b.Engine().EncodeWrite(action.DomainWrite{Domain: w.Domain, Key: w.Key, Payload: w.Payload})
		if err != nil {
			return nil, fmt.Errorf("write %d: %v", i, err)
		}
		ef.AddWrite(dw)
	}
	return res, nil
}

// jsonProblem says what is wrong with a JSON payload in words for the worker's author, not the
// decoder's.
func jsonProblem(err error) error {
	var syntax *json.SyntaxError
	var kind *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return errors.New("not valid JSON: it ends before its value does")
	case errors.As(err, &syntax):
		return fmt.Errorf("not valid JSON at byte %d", syntax.Offset)
	case errors.As(err, &kind):
		return fmt.Errorf("field %q holds a JSON %s, which it cannot", kind.Field, kind.Value)
	}
	return err
}
