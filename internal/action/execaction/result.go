package execaction

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

// result is the JSON object a command prints on stdout with `stdout: json`.
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

// applyResult parses stdout as a [result] and records it on out. Every problem with the object
// is a permanent error: the command would print the same thing again.
func applyResult(ctx context.Context, stdout []byte, declared map[string]bool, out action.Output) error {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return action.Permanentf("stdout is empty; want a JSON object")
	}
	if trimmed[0] != '{' {
		return action.Permanentf("stdout is not a JSON object: %s", snippet(trimmed))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var r result
	if err := dec.Decode(&r); err != nil {
		return action.Permanentf("parse stdout as a JSON result: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return action.Permanentf("parse stdout as a JSON result: data after the object")
	}
	if r.Error != "" {
		return action.Permanent(errors.New(r.Error))
	}
	for _, e := range r.Events {
		if !declared[e] {
			return action.Permanentf("stdout names event %q, which the step declares in neither outcomes nor events", e)
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

// snippet returns the start of b for an error message.
func snippet(b []byte) string {
	const max = 200
	s := string(b)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
