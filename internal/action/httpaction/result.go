package httpaction

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
)

// result is the JSON object a service returns with `response: json`. It is the same object the
// exec action reads from a command's stdout.
type result struct {
	// Events are outcome events to fire; each must be declared by the step.
	Events []string `json:"events"`
	// Metadata is merged into the item's metadata.
	Metadata map[string]any `json:"metadata"`
	// Text, when present, becomes the item's text.
	Text *string `json:"text"`
	// Error, when not empty, fails the item permanently with this message.
	Error string `json:"error"`
}

// applyResult parses body as a [result] and records it on out. Every problem with the object is
// a permanent error: the service answered, and would answer the same again.
func applyResult(ctx context.Context, body []byte, declared map[string]bool, out action.Output) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return action.Permanentf("response is empty; want a JSON object")
	}
	if trimmed[0] != '{' {
		return action.Permanentf("response is not a JSON object: %s", snippet(trimmed))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var r result
	if err := dec.Decode(&r); err != nil {
		return action.Permanentf("parse response as a JSON result: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return action.Permanentf("parse response as a JSON result: data after the object")
	}
	if r.Error != "" {
		return action.Permanent(errors.New(r.Error))
	}
	for _, e := range r.Events {
		if !declared[e] {
			return action.Permanentf("response names event %q, which the step declares in neither outcomes nor events", e)
		}
	}
	if r.Text != nil {
		if err := out.SetText(ctx, strings.ToValidUTF8(*r.Text, "\uFFFD")); err != nil {
			return fmt.Errorf("set text: %w", err)
		}
	}
	if len(r.Metadata) > 0 {
		out.SetMetadata(r.Metadata)
	}
	if len(r.Events) > 0 {
		out.Emit(r.Events...)
	}
	return nil
}
