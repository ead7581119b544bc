// Package text provides the "text" action of the documents workflow: it detects a text file's
// character set, keeps the decoded, sanitised text, and renders it as a paged monospace PDF with
// a thumbnail of page 1, all as one final child. Its [Renderer] is also the fallback renderer of
// the "html" action.
package text

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/textclean"
)

// Name is the action's name in workflows.
const Name = "text"

// Action is the "text" action. Create it with [New]; it is safe for concurrent use and shares
// one [Renderer] (and so one parse of the fonts) across all its tasks.
type Action struct {
	renderer *Renderer
	// renders holds a token per task reading and rendering its file. The action's slots
	// (Spec.Concurrency) are many because a task spends most of its time waiting — for its
	// lease, for its blobs' group commit — not rendering; rendering is bounded to twice the
	// cores apart, so that many slots neither crowd the cores nor hold many large files in
	// memory at once.
	renders chan struct{}
}

// New returns the "text" action, rendering with the fonts of r (nil means a new [Renderer]
// with [DefaultFonts]).
func New(r *Renderer) *Action {
	if r == nil {
		r = &Renderer{}
	}
	return &Action{renderer: r, renders: make(chan struct{}, 2*runtime.GOMAXPROCS(0))}
}

// Spec describes the action.
func (a *Action) Spec() action.Spec {
	w := 0.75
	return action.Spec{
		Name:           Name,
		Version:        "7", // 2: thumbnail glyphs blended in Go (rounding may differ by one level); 3: a 2-bit thumbnail; 4: its PNG packed by us (one IDAT chunk); 5: Latin text set in Courier, not embedded, and a 420 px thumbnail; 6: the thumbnail and the Courier PDF deflated at the default level, not the fastest; 7: thumbnail glyphs from a cache, placed to a quarter of a pixel
		Doc:            "Decode a text file's charset, keep its text and render it as a paged monospace PDF with a thumbnail; one final child.",
		Settings:       converter.Settings(),
		Validate:       converter.ValidateSettings,
		Concurrency:    128, // slots wait (their lease, their blobs' fsync); the rendering is bounded to twice the cores apart (Action.renders)
		Timeout:        10 * time.Minute,
		ProgressWeight: &w,
	}
}

// Policy caches the action's effects by its input (the conversion cache); rendering is pure
// Go, the thumbnail too, so it needs no temporary directory.
func (a *Action) Policy() action.Policy { return action.Policy{Cacheable: true, NoTempDir: true} }

// Run converts one text file.
func (a *Action) Run(ctx context.Context, t *action.Task, out action.Output) error {
	cfg, err := converter.ParseSettings(t.With)
	if err != nil {
		return err
	}
	child, err := a.render(ctx, t, out, cfg)
	if err != nil {
		return err
	}
	// Outside the render's token: storing the child may wait for the blob store's queue.
	return out.CreateChild(ctx, child)
}

// render reads the task's file and renders it as its child, holding one of the action's render
// tokens meanwhile.
func (a *Action) render(ctx context.Context, t *action.Task, out action.Output, cfg converter.Config) (action.Child, error) {
	select {
	case a.renders <- struct{}{}:
	case <-ctx.Done():
		return action.Child{}, ctx.Err()
	}
	defer func() { <-a.renders }()
	rc, err := t.OpenBlob(ctx)
	if err != nil {
		return action.Child{}, fmt.Errorf("open text blob: %w", err)
	}
	// No encoding needs more than 4 bytes per character: read no more than the cap can keep.
	limit := int64(cfg.MaxTextChars)*4 + 4
	raw, err := io.ReadAll(io.LimitReader(rc, limit+1))
	rc.Close()
	if err != nil {
		return action.Child{}, fmt.Errorf("read text blob: %w", err)
	}
	md := map[string]any{}
	if int64(len(raw)) > limit {
		raw = raw[:limit]
		md["truncated"] = true
	}
	decoded, charset := textclean.Decode(raw)
	text, cut := textclean.SanitizeCut(decoded, cfg.MaxTextChars)
	if cut {
		md["truncated"] = true
	}
	md["charset"] = charset
	r := &converter.Runner{Limits: cfg.Limits, Dir: t.TempDir, Heartbeat: out.Heartbeat}
	return a.Child(ctx, r, t.Item.Name, text, md)
}

// Child renders text (already decoded and sanitised) as the final child named name: a PDF, the
// text, a page-1 thumbnail drawn in Go from the same layout (md gets "thumbnail_skipped" with
// the reason if that fails), and metadata md. The html action uses it when Chromium is missing.
func (a *Action) Child(ctx context.Context, r *converter.Runner, name, text string, md map[string]any) (action.Child, error) {
	pdf, err := a.renderer.Render(text)
	if err != nil {
		return action.Child{}, err
	}
	c := action.Child{Name: name, ContentType: "application/pdf", Metadata: md, Blob: bytes.NewReader(pdf), Text: &text}
	thumb, err := a.renderer.Thumbnail(text)
	switch {
	case err == nil:
		c.Thumbnail, c.ThumbnailType = bytes.NewReader(thumb), "image/png"
	case ctx.Err() != nil:
		return action.Child{}, ctx.Err()
	default:
		md["thumbnail_skipped"] = err.Error()
	}
	return c, nil
}

// Thumbnail renders page 1 of a PDF held in memory as a PNG thumbnail (pdftoppm).
func Thumbnail(ctx context.Context, r *converter.Runner, pdf []byte) ([]byte, error) {
	f, err := os.CreateTemp(r.Dir, "render-*.pdf")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(pdf); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return r.PDFThumbnail(ctx, filepath.Clean(f.Name()), 1)
}
