package basic

import (
	"slices"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

func TestNoop(t *testing.T) {
	t.Parallel()
	a := NewNoop()
	spec := a.Spec()
	if spec.Name != "noop" || spec.Version != "1" || spec.Concurrency != 1000 {
		t.Fatalf("spec = %+v", spec)
	}
	task := actiontest.NewTask(t, "a.txt", "text/plain", []byte("x"), nil, nil)
	var rec actiontest.Recorder
	if err := a.Run(t.Context(), task, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 0 || rec.Text != nil || len(rec.Children) != 0 {
		t.Fatalf("noop wrote output: %+v", &rec)
	}
}

// TestNoopAllocs is not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestNoopAllocs(t *testing.T) {
	a := NewNoop()
	task := actiontest.NewTask(t, "a.txt", "text/plain", nil, nil, nil)
	var rec actiontest.Recorder
	ctx := t.Context()
	if n := testing.AllocsPerRun(100, func() { _ = a.Run(ctx, task, &rec) }); n != 0 {
		t.Fatalf("noop Run allocates %v times", n)
	}
}

func BenchmarkNoop(b *testing.B) {
	a := NewNoop()
	task := actiontest.NewTask(b, "a.txt", "text/plain", nil, nil, nil)
	var rec actiontest.Recorder
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if err := a.Run(ctx, task, &rec); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFail(t *testing.T) {
	t.Parallel()
	a := NewFail()
	task := actiontest.NewTask(t, "a.txt", "text/plain", nil, map[string]any{"message": "no thanks"}, nil)
	err := a.Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || err.Error() != "no thanks" {
		t.Fatalf("Run = %v; want permanent %q", err, "no thanks")
	}
}

func TestEmit(t *testing.T) {
	t.Parallel()
	a := NewEmit()
	with := map[string]any{"events": []any{"a", "b"}}
	if got := a.Spec().OutcomesFor(with); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("OutcomesFor = %v", got)
	}
	task := actiontest.NewTask(t, "a.txt", "text/plain", nil, with, nil)
	var rec actiontest.Recorder
	if err := a.Run(t.Context(), task, &rec); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Events, []string{"a", "b"}) {
		t.Fatalf("events = %v", rec.Events)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		action  action.Action
		with    map[string]any
		wantKey string
	}{
		{name: "fail ok", action: NewFail(), with: map[string]any{"message": "m"}},
		{name: "fail missing message", action: NewFail(), with: map[string]any{}, wantKey: "message"},
		{name: "fail empty message", action: NewFail(), with: map[string]any{"message": ""}, wantKey: "message"},
		{name: "fail message not string", action: NewFail(), with: map[string]any{"message": 3}, wantKey: "message"},
		{name: "emit ok", action: NewEmit(), with: map[string]any{"events": []string{"x"}}},
		{name: "emit missing", action: NewEmit(), with: map[string]any{}, wantKey: "events"},
		{name: "emit empty list", action: NewEmit(), with: map[string]any{"events": []any{}}, wantKey: "events"},
		{name: "emit not strings", action: NewEmit(), with: map[string]any{"events": []any{"x", 1}}, wantKey: "events"},
		{name: "emit empty name", action: NewEmit(), with: map[string]any{"events": []any{""}}, wantKey: "events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			actiontest.CheckSettings(t, tt.action, tt.with, tt.wantKey)
		})
	}
}
