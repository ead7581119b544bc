package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/textclean"
)

// TestEffectsSanitised checks that the text a task records is sanitised where its effects are
// applied, whatever made it: a child's name, text, metadata and options (at any depth, keys
// too) and the item's own text and metadata. A NUL byte or invalid UTF-8 would otherwise fail the
// commit on PostgreSQL. The first attempt snoozes after its child: the second makes the same
// child again, which is a replay of the stored (sanitised) one, not a nondeterministic child.
func TestEffectsSanitised(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		var runs atomic.Int32
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{h.act("split", nil, func(ctx context.Context, t *action.Task, out action.Output) error {
				if t.Item.Depth > 0 {
					return nil
				}
				text := "line\r\nnext\x00"
				err := out.CreateChild(ctx, action.Child{Name: "r/a\x00b\xff", Text: &text,
					Metadata: map[string]any{"note": "x\x00y", "nested": map[string]any{"k\x01": []any{"\xfe", 1}}},
					Options:  map[string]any{"lang": "e\x00n"}})
				if err != nil {
					return err
				}
				if runs.Add(1) == 1 {
					return action.Snooze(time.Millisecond)
				}
				out.SetMetadata(map[string]any{"m": "v\x07"})
				return out.SetText(ctx, "own\x00text")
			})}
		})
		h.startWorker()
		job := h.start("name: wf\nsteps:\n  split: {action: split, needs: [start]}\n", nil, engine.Root{Name: "r"})
		if j := h.wait(job.ID); j.State != record.JobComplete {
			t.Fatalf("job %s (%s), want complete; tasks %v", j.State, j.Error, h.tasks(job.ID))
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("split ran %d times on the root, want 2 (snoozed once)", n)
		}
		list, err := h.db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 10, WithText: true})
		if err != nil {
			t.Fatal(err)
		}
		items := map[string]*record.Item{}
		for _, it := range list {
			items[it.Name] = it
		}
		if len(items) != 2 {
			t.Fatalf("items %v, want the root and one child", slices.Collect(maps.Keys(items)))
		}
		child := items["r/a b\uFFFD"]
		if child == nil {
			t.Fatalf("items %q, want the child named %q", slices.Collect(maps.Keys(items)), "r/a b\uFFFD")
		}
		if child.Text != "line\nnext " {
			t.Errorf("child text %q, want %q", child.Text, "line\nnext ")
		}
		var md, opts map[string]any
		if err := json.Unmarshal(child.Metadata, &md); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(child.Options, &opts); err != nil {
			t.Fatal(err)
		}
		nested, _ := md["nested"].(map[string]any)
		if md["note"] != "x y" || nested == nil || len(nested["k "].([]any)) != 2 || nested["k "].([]any)[0] != "\uFFFD" {
			t.Errorf("child metadata %v, want its strings and keys sanitised", md)
		}
		if opts["lang"] != "e n" {
			t.Errorf("child options %v, want lang %q", opts, "e n")
		}
		root := items["r"]
		if root.Text != "own text" {
			t.Errorf("root text %q, want %q", root.Text, "own text")
		}
		var rmd map[string]any
		if err := json.Unmarshal(root.Metadata, &rmd); err != nil {
			t.Fatal(err)
		}
		if rmd["m"] != "v " {
			t.Errorf("root metadata %v, want m %q", rmd, "v ")
		}
	})
}

// TestReplays checks the one determinism check of children: the same name (as stored, so
// sanitised) and content is a replay; another name or content is an ErrNondeterministic error.
func TestReplays(t *testing.T) {
	t.Parallel()
	prev := &record.Item{Name: "p/a b", BlobSHA256: "abc"}
	task := &record.Task{}
	for _, tc := range []struct {
		name  string
		child engine.Child
		same  bool
	}{
		{"same", engine.Child{Name: "p/a b", BlobSHA256: "abc"}, true},
		{"same once sanitised", engine.Child{Name: "p/a\x00b", BlobSHA256: "abc"}, true},
		{"another name", engine.Child{Name: "p/c", BlobSHA256: "abc"}, false},
		{"another content", engine.Child{Name: "p/a b", BlobSHA256: "abd"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := engine.Replays(prev, engine.ChildOf(task, 3, tc.child, 0, 0), "p")
			if tc.same && err != nil {
				t.Fatalf("Replays: %v, want nil", err)
			}
			if !tc.same && !errors.Is(err, engine.ErrNondeterministic) {
				t.Fatalf("Replays: %v, want ErrNondeterministic", err)
			}
		})
	}
}

// TestErrorsSanitised: an attempt's error is recorded clean and capped on every path, as a
// remote worker's always was: NUL bytes (which PostgreSQL refuses in text) and invalid UTF-8
// replaced, at most engine.MaxErrorChars characters, in the task, its history and the item.
func TestErrorsSanitised(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		long := "bad\x00input \xff" + strings.Repeat("é", 2*engine.MaxErrorChars)
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{h.act("conv", nil, func(context.Context, *action.Task, action.Output) error {
				return action.Permanent(errors.New(long))
			})}
		})
		h.startWorker()
		job := h.start("name: wf\nsteps:\n  conv: {action: conv, needs: [start]}\n", nil, engine.Root{Name: "r"})
		h.wait(job.ID)
		want := textclean.Sanitize(long, engine.MaxErrorChars)
		if !strings.HasPrefix(want, "bad input \uFFFD") || utf8.RuneCountInString(want) != engine.MaxErrorChars {
			t.Fatalf("the expected error is %q…", want[:20])
		}
		items, err := h.db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 10})
		if err != nil || len(items) != 1 {
			t.Fatalf("items %v, %v", items, err)
		}
		if items[0].Error != want {
			t.Errorf("the item's error is %d characters starting %q, want the sanitised %d", utf8.RuneCountInString(items[0].Error), items[0].Error[:min(20, len(items[0].Error))], engine.MaxErrorChars)
		}
		hist, err := h.e.ItemHistory(t.Context(), items[0].ID)
		if err != nil || len(hist) != 1 || hist[0].Error != want {
			t.Errorf("history %d attempts (%v), want one with the sanitised error", len(hist), err)
		}
	})
}
