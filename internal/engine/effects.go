package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/textclean"
)

// Effects is what one attempt of a task did to its item, whatever ran it: a worker's lease, a
// replay from the conversion cache, an inline run inside the engine's transaction, a remote
// worker's session. Each of these records into an Effects through its methods and hands it over
// in a [Result]; [Tx.Apply] (and [Tx.CreateChildren], for the children committed while the task
// runs) validates and commits it in one place: text is sanitised there, children are checked
// against those an earlier attempt made, the limits of a job are kept there.
//
// An Effects is not safe for concurrent use: a recorder that is called concurrently (the
// worker's action output) holds its own lock around each call. The zero value records nothing.
type Effects struct {
	Text          *string
	ThumbnailSHA  string
	ThumbnailType string
	Metadata      map[string]any
	ContentType   string
	Events        []string
	Outputs       map[string]json.RawMessage
	// Writes are the task's domain writes (see [Domain]), applied when it completes. Past a
	// megabyte, [Effects.AddWrite] moves them to a temp file and keeps in their place an entry
	// that stands for them (see [Effects.WritesSpilled]): whoever copies the writes of one
	// Effects into another copies them with [Effects.AddWrite], entries as they are.
	Writes []DomainWrite
	// Children are recorded by [Tx.Apply], in the result's transaction: the children whose blobs
	// became durable only after the action returned, so that they and the result commit together.
	Children []*NewChild

	spill    *writeSpill // the temp file writes move to; nil until they first do
	held     int         // payload bytes of Writes[heldFrom:], the writes not in the file
	heldFrom int
}

// SetText records the item's text; the first text recorded is kept.
func (ef *Effects) SetText(text string) {
	if ef.Text == nil {
		ef.Text = &text
	}
}

// SetThumbnail records the item's thumbnail, a blob already stored; the first one is kept.
func (ef *Effects) SetThumbnail(sha, contentType string) {
	if ef.ThumbnailSHA == "" {
		ef.ThumbnailSHA, ef.ThumbnailType = sha, contentType
	}
}

// SetContentType records the item's content type; the last one recorded is kept.
func (ef *Effects) SetContentType(ct string) { ef.ContentType = ct }

// SetMetadata merges md into the item's metadata to write; its keys win.
func (ef *Effects) SetMetadata(md map[string]any) {
	if ef.Metadata == nil {
		ef.Metadata = make(map[string]any, len(md))
	}
	maps.Copy(ef.Metadata, md)
}

// SetOutput records the output of kind; it is an error if value is not valid JSON.
func (ef *Effects) SetOutput(kind string, value json.RawMessage) error {
	if !json.Valid(value) {
		return fmt.Errorf("output %q: invalid JSON", kind)
	}
	if ef.Outputs == nil {
		ef.Outputs = map[string]json.RawMessage{}
	}
	ef.Outputs[kind] = value
	return nil
}

// Emit records events to fire on the item.
func (ef *Effects) Emit(events ...string) { ef.Events = append(ef.Events, events...) }

// AddWrite records a domain write encoded by [Engine.EncodeWrite], or an entry of another
// Effects' Writes. Once the writes it holds in memory pass a megabyte it moves them to a temp
// file, from which the task's transaction reads them back in order (or, when the file cannot be
// written, keeps them in memory).
func (ef *Effects) AddWrite(dw DomainWrite) {
	ef.Writes = append(ef.Writes, dw)
	if dw.spilled != nil {
		ef.heldFrom, ef.held = len(ef.Writes), 0
		return
	}
	if ef.held += len(dw.Payload) + len(dw.Key); ef.held > spillWritesOver {
		ef.spillWrites()
	}
}

// AddChild records a child to commit with the result (see [Effects.Children]).
func (ef *Effects) AddChild(nc *NewChild) { ef.Children = append(ef.Children, nc) }

// SortChildren orders the children to commit with the result by ordinal.
func (ef *Effects) SortChildren() {
	slices.SortFunc(ef.Children, func(a, b *NewChild) int { return a.Ordinal - b.Ordinal })
}

// Child is what a child of an item holds, as a task made it: its blobs are already stored. Its
// JSON form is the one the conversion cache keeps.
type Child struct {
	Name          string         `json:"name"`
	ContentType   string         `json:"content_type,omitempty"`
	BlobSHA256    string         `json:"sha256,omitempty"`
	Size          int64          `json:"size,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Options       map[string]any `json:"options,omitempty"`
	Text          *string        `json:"text,omitempty"`
	ThumbnailSHA  string         `json:"thumbnail_sha256,omitempty"`
	ThumbnailType string         `json:"thumbnail_type,omitempty"`
}

// ChildOf returns the child c of a running task at ordinal, which gets the slice of the item's
// progress between the task's reported progress from (before the previous child) and to (before
// this one). It is the one way to make a [NewChild].
func ChildOf(task *record.Task, ordinal int, c Child, from, to float64) *NewChild {
	return &NewChild{Task: task, Ordinal: ordinal, Child: c, ProgressFrom: from, ProgressTo: to}
}

// Replays checks a child an attempt made against the child an earlier attempt recorded at the
// same ordinal, prev: nil when it is the same child (its name and its content), else an
// [ErrNondeterministic] error naming both. parent is the item's name. The content type is not
// compared: detect may have refined it since. Names are compared as they are stored (sanitised).
func Replays(prev *record.Item, c *NewChild, parent string) error {
	if name := cleanString(c.Name); prev.Name != name || prev.BlobSHA256 != c.BlobSHA256 {
		return fmt.Errorf("%w: child %d of %q was %q (sha256 %.12s), replay made %q (sha256 %.12s)",
			ErrNondeterministic, c.Ordinal, parent, prev.Name, prev.BlobSHA256, name, c.BlobSHA256)
	}
	return nil
}

// sanitize makes the child's text fit for storage and display ([textclean.Sanitize]): its name,
// the strings of its metadata and options, and its text, capped at MaxText characters when that
// is set. The strings and maps the child holds are not modified (an action may still hold them):
// what changes is replaced. It may run again on the same child (a retried transaction) and
// changes nothing the second time.
func (c *NewChild) sanitize() {
	c.Name = cleanString(c.Name)
	c.Metadata = cleanObject(c.Metadata)
	c.Options = cleanObject(c.Options)
	if c.Text != nil {
		limit := c.MaxText
		if limit <= 0 {
			limit = max(len(*c.Text), 1) // no cap: a string has no more characters than bytes
		}
		if t := textclean.Sanitize(*c.Text, limit); t != *c.Text {
			c.Text = &t
		}
	}
}

// sanitize makes the result's text and metadata fit for storage, as [NewChild.sanitize] does a
// child's (its text is not capped: the action caps it).
func (ef *Effects) sanitize() {
	if ef.Text != nil {
		if t := cleanString(*ef.Text); t != *ef.Text {
			ef.Text = &t
		}
	}
	ef.Metadata = cleanObject(ef.Metadata)
}

// cleanString is s sanitised, not capped; s itself when it is clean (no allocation).
func cleanString(s string) string { return textclean.Sanitize(s, max(len(s), 1)) }

// MaxErrorChars caps an attempt's error as it is recorded, on every path: an action's error (a
// tool's output, a remote worker's report) is shown to users and stored in a row, not kept whole.
const MaxErrorChars = 4000

// cleanError is an attempt's error as it is recorded: NUL bytes and invalid UTF-8 (which
// PostgreSQL refuses in text) replaced, capped at [MaxErrorChars].
func cleanError(msg string) string {
	if c := textclean.Sanitize(msg, MaxErrorChars); c != "" || msg == "" {
		return c
	}
	return "an error with no printable text"
}

// cleanObject returns m with its keys and strings sanitised, at any depth: m itself when they
// all are clean (no allocation), else a copy of the parts that changed.
func cleanObject(m map[string]any) map[string]any {
	if v, changed := cleanValue(m); changed {
		return v.(map[string]any)
	}
	return m
}

// cleanValue returns v with its strings sanitised and whether any changed; v is not modified.
func cleanValue(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if s := cleanString(x); s != x {
			return s, true
		}
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			ce, changed := cleanValue(e)
			ck := cleanString(k)
			if !changed && ck == k {
				continue
			}
			if out == nil {
				out = maps.Clone(x)
			}
			delete(out, k)
			out[ck] = ce
		}
		if out != nil {
			return out, true
		}
	case []any:
		var out []any
		for i, e := range x {
			if ce, changed := cleanValue(e); changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = ce
			}
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}
