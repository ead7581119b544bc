// Package result reads the JSON result object that the exec action takes from a command's stdout
// and the http action from a service's response, and records it on an [action.Output]:
//
//	{"events": [...], "metadata": {...}, "text": "...", "error": "...", "children": [...]}
//
// Events must be declared by the step, metadata is merged into the item's, text becomes the
// item's text, and an error fails the item. Each child names its content in one of three ways
// (see [Child]); children are created in the order given, so a replay of the task makes the
// same children at the same ordinals, which the output recognises (DESIGN §4.1).
package result

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/metadata"
)

// Result is the JSON result object.
type Result struct {
	// Events are outcome events to fire; each must be declared by the step.
	Events []string `json:"events"`
	// Metadata is merged into the item's metadata.
	Metadata map[string]any `json:"metadata"`
	// Text, when present, becomes the item's text.
	Text *string `json:"text"`
	// Error, when not empty, fails the item permanently with this message.
	Error string `json:"error"`
	// Children are created, in this order, as the item's children.
	Children []Child `json:"children"`
}

// Child is one child item of a [Result]. Its content is at most one of Content, ContentBase64,
// Path and SHA256; a child with none has no content.
type Child struct {
	// Name is the child's name, appended to its parent's derived path. Required.
	Name        string         `json:"name"`
	ContentType string         `json:"content_type"`
	Metadata    map[string]any `json:"metadata"`
	Options     map[string]any `json:"options"`
	// Content is the child's content as text.
	Content *string `json:"content"`
	// ContentBase64 is the child's content in standard base64.
	ContentBase64 *string `json:"content_base64"`
	// Path names a regular file in the task's directory, relative to it, that holds the content.
	// It may not lead out of the directory (no "..", no absolute path, no symbolic link out).
	Path string `json:"path"`
	// SHA256 names, in hex, a blob already in the blob store that is the content.
	SHA256 string `json:"sha256"`
}

// Source says where a result comes from, for error messages and for the files children name.
type Source struct {
	// What names the result's origin in errors: "stdout", "response".
	What string
	// Declared are the events the step declares; a result naming another fails.
	Declared map[string]bool
	// Dir is the task's directory, which a child's Path is relative to. Empty: no child may
	// name a path.
	Dir string
}

// Apply parses body as a [Result] and records it on out. Every problem with the object is a
// permanent error: the command or service would produce the same thing again.
func Apply(ctx context.Context, body []byte, src Source, out action.Output) error {
	r, err := Parse(body, src.What)
	if err != nil {
		return err
	}
	if r.Error != "" {
		return action.Permanent(errors.New(r.Error))
	}
	for _, e := range r.Events {
		if !src.Declared[e] {
			return action.Permanentf("%s names event %q, which the step declares in neither outcomes nor events", src.What, e)
		}
	}
	if err := createChildren(ctx, r.Children, src, out); err != nil {
		return err
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

// Parse decodes body as one JSON [Result] object, refusing unknown fields and anything after
// the object, and checks its children's fields. what names the body in errors, which are
// permanent.
func Parse(body []byte, what string) (*Result, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, action.Permanentf("%s is empty; want a JSON object", what)
	}
	if trimmed[0] != '{' {
		return nil, action.Permanentf("%s is not a JSON object: %s", what, Snippet(trimmed, 200))
	}
	// Numbers in metadata and options stay as written (json.Number): a 20-digit id is not rounded.
	dec := metadata.Decoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		return nil, action.Permanentf("parse %s as a JSON result: %w", what, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, action.Permanentf("parse %s as a JSON result: data after the object", what)
	}
	for i, c := range r.Children {
		if err := c.check(); err != nil {
			return nil, action.Permanentf("%s: children[%d]: %w", what, i, err)
		}
	}
	return &r, nil
}

func (c *Child) check() error {
	if strings.TrimSpace(c.Name) == "" {
		return errors.New("name is empty")
	}
	n := 0
	for _, set := range []bool{c.Content != nil, c.ContentBase64 != nil, c.Path != "", c.SHA256 != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("give at most one of content, content_base64, path and sha256")
	}
	if c.SHA256 != "" {
		if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != 32 || strings.ToLower(c.SHA256) != c.SHA256 {
			return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", Snippet([]byte(c.SHA256), 80))
		}
	}
	return nil
}

// createChildren creates the children in order. A path is opened through an [os.Root] on the
// task's directory, so neither ".." nor a symbolic link leads out of it.
func createChildren(ctx context.Context, children []Child, src Source, out action.Output) error {
	var root *os.Root
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	for i, c := range children {
		ac := action.Child{Name: c.Name, ContentType: c.ContentType, Metadata: c.Metadata, Options: c.Options}
		var f *os.File
		switch {
		case c.Content != nil:
			ac.Blob = strings.NewReader(*c.Content)
		case c.ContentBase64 != nil:
			b, err := base64.StdEncoding.DecodeString(*c.ContentBase64)
			if err != nil {
				return action.Permanentf("%s: children[%d] %q: content_base64: %w", src.What, i, c.Name, err)
			}
			ac.Blob = bytes.NewReader(b)
		case c.Path != "":
			if root == nil {
				if src.Dir == "" {
					return action.Permanentf("%s: children[%d] %q: path: the task has no directory", src.What, i, c.Name)
				}
				var err error
				if root, err = os.OpenRoot(src.Dir); err != nil {
					return fmt.Errorf("open task directory: %w", err)
				}
			}
			var err error
			if f, err = openRegular(root, c.Path); err != nil {
				return action.Permanentf("%s: children[%d] %q: path %q: %w", src.What, i, c.Name, c.Path, err)
			}
			ac.Blob = f
		case c.SHA256 != "":
			ac.BlobSHA256 = c.SHA256
		}
		err := out.CreateChild(ctx, ac)
		if f != nil {
			f.Close()
		}
		if err != nil {
			return fmt.Errorf("create child %q: %w", c.Name, err)
		}
	}
	return nil
}

// openRegular opens name under root, refusing anything but a regular file. It opens without
// blocking and checks what it opened, so a FIFO put in the file's place cannot hang the task.
func openRegular(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	return f, nil
}

// Snippet returns the start of b, at most max bytes, trimmed and valid UTF-8, for an error
// message; "(empty)" for nothing.
func Snippet(b []byte, max int) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > max {
		s = s[:max] + "…"
	}
	if s == "" {
		return "(empty)"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
