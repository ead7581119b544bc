// Package actiontest helps test actions without the engine: a [Recorder] that implements
// [action.Output] in memory and [NewTask] that builds a task around bytes or a file.
package actiontest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
)

// RecordedChild is a child as the [Recorder] saw it, with its blob read into memory.
type RecordedChild struct {
	action.Child
	Data          []byte
	ThumbnailData []byte
}

// Recorder is an in-memory [action.Output]. Its fields are safe to read after Run returns.
type Recorder struct {
	mu            sync.Mutex
	Children      []RecordedChild
	Text          *string
	Thumbnail     []byte
	ThumbnailType string
	Metadata      map[string]any
	ContentType   string
	Outputs       map[string]json.RawMessage
	Events        []string
	Writes        []action.DomainWrite
	Progresses    []float64
	Heartbeats    int
	// MaxChildren, when positive, makes CreateChild fail after that many children (tests of limits).
	MaxChildren int
	// Recorded, when positive, plays an earlier attempt that recorded that many children: it is
	// what ResumeChildren returns ([action.Resume]).
	Recorded int
}

// ResumeChildren implements [action.Resumer].
func (r *Recorder) ResumeChildren() int { return r.Recorded }

var _ action.Output = (*Recorder)(nil)

// CreateChild records c, reading its blob and thumbnail fully.
func (r *Recorder) CreateChild(ctx context.Context, c action.Child) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rc := RecordedChild{Child: c}
	if c.Blob != nil {
		b, err := io.ReadAll(c.Blob)
		if err != nil {
			return fmt.Errorf("read child %q blob: %w", c.Name, err)
		}
		rc.Data = b
	}
	if c.Thumbnail != nil {
		b, err := io.ReadAll(c.Thumbnail)
		if err != nil {
			return fmt.Errorf("read child %q thumbnail: %w", c.Name, err)
		}
		rc.ThumbnailData = b
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.MaxChildren > 0 && len(r.Children) >= r.MaxChildren {
		return fmt.Errorf("recorder: more than %d children", r.MaxChildren)
	}
	r.Children = append(r.Children, rc)
	return nil
}

// SetText records the first text set.
func (r *Recorder) SetText(_ context.Context, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Text == nil {
		r.Text = &text
	}
	return nil
}

// SetThumbnail records the first thumbnail set.
func (r *Recorder) SetThumbnail(_ context.Context, rd io.Reader, contentType string) error {
	b, err := io.ReadAll(rd)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Thumbnail == nil {
		r.Thumbnail, r.ThumbnailType = b, contentType
	}
	return nil
}

// SetContentType records the detected content type.
func (r *Recorder) SetContentType(ct string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ContentType = ct
}

// SetMetadata merges md into Metadata.
func (r *Recorder) SetMetadata(md map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	for k, v := range md {
		r.Metadata[k] = v
	}
}

// SetOutput records an output by kind.
func (r *Recorder) SetOutput(_ context.Context, kind string, value json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Outputs == nil {
		r.Outputs = map[string]json.RawMessage{}
	}
	r.Outputs[kind] = value
	return nil
}

// Emit records events.
func (r *Recorder) Emit(events ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Events = append(r.Events, events...)
}

// Progress records a progress report.
func (r *Recorder) Progress(f float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Progresses = append(r.Progresses, f)
}

// Heartbeat counts heartbeats.
func (r *Recorder) Heartbeat() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Heartbeats++
}

// NewTask returns a task whose blob is data, stored in a file under t.TempDir() so that both
// OpenBlob and BlobPath work. name and contentType fill the item; with and options may be nil.
func NewTask(t testing.TB, name, contentType string, data []byte, with, options map[string]any) *action.Task {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "blob")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if with == nil {
		with = map[string]any{}
	}
	if options == nil {
		options = map[string]any{}
	}
	return &action.Task{
		ID: 1, JobID: 1, Step: "step", Attempt: 1,
		Item: action.Item{ID: 1, JobID: 1, RootID: 1, Name: name, ContentType: contentType,
			Size: int64(len(data)), BlobSHA256: "test", Metadata: map[string]any{}, Options: options},
		With: with,
		OpenBlob: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		},
		BlobPath: func(context.Context) (string, error) { return path, nil },
		TempDir:  tmp,
	}
}

// NewFileTask is [NewTask] for the content of a file on disk.
func NewFileTask(t testing.TB, path, contentType string, with, options map[string]any) *action.Task {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return NewTask(t, filepath.Base(path), contentType, data, with, options)
}

// Write records w.
func (r *Recorder) Write(w action.DomainWrite) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Writes = append(r.Writes, w)
	return nil
}

// CheckSettings checks a's settings check on with: with wantKey empty, Validate accepts them;
// otherwise Validate returns an [*action.SettingError] for wantKey, and Run with them fails
// permanently (settings that reach a task despite validation never run).
func CheckSettings(t *testing.T, a action.Action, with map[string]any, wantKey string) {
	t.Helper()
	err := a.Spec().Validate(with)
	if wantKey == "" {
		if err != nil {
			t.Fatalf("Validate = %v; want nil", err)
		}
		return
	}
	var se *action.SettingError
	if !errors.As(err, &se) || se.Key != wantKey {
		t.Fatalf("Validate = %v; want a SettingError for %q", err, wantKey)
	}
	task := NewTask(t, "a", "", nil, with, nil)
	if err := a.Run(t.Context(), task, &Recorder{}); !action.IsPermanent(err) {
		t.Fatalf("Run with bad settings = %v; want permanent", err)
	}
}

// WantCanceled waits up to 10 s for the result of a Run whose context was canceled and fails t
// unless it is an error wrapping [context.Canceled] that is not permanent (a canceled task is
// not the item's fault).
func WantCanceled(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || action.IsPermanent(err) {
			t.Fatalf("Run = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
