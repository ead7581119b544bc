package basic

import (
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

func TestSpawn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		with     map[string]any
		metadata map[string]any
		resumed  int
		want     int
		err      string
	}{
		{name: "setting", with: map[string]any{"count": 3}, want: 3},
		{name: "metadata", metadata: map[string]any{"children": float64(5)}, want: 5},
		{name: "setting wins", with: map[string]any{"count": int64(2)}, metadata: map[string]any{"children": float64(5)}, want: 2},
		{name: "resumed", with: map[string]any{"count": 4}, resumed: 3, want: 1},
		{name: "none", err: `spawn "a.txt": no setting count and no metadata children`},
		{name: "not a number", metadata: map[string]any{"children": "7"}, err: `spawn "a.txt": metadata children is string, not a number`},
		{name: "fraction", metadata: map[string]any{"children": 1.5}, err: `spawn "a.txt": metadata children is 1.5, not a whole number`},
		{name: "negative", with: map[string]any{"count": -1}, err: `setting count: must be a whole number from 0 to`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := actiontest.NewTask(t, "a.txt", "", nil, tc.with, nil)
			task.Item.Metadata = tc.metadata
			rec := actiontest.Recorder{Recorded: tc.resumed}
			err := NewSpawn().Run(t.Context(), task, &rec)
			if tc.err != "" {
				if !action.IsPermanent(err) || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("Run = %v; want permanent %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Children) != tc.want {
				t.Fatalf("%d children; want %d", len(rec.Children), tc.want)
			}
			if first := rec.Children[0].Name; first != "child-"+strings.Repeat("0", 6)+string(rune('0'+tc.resumed)) {
				t.Fatalf("first child %q after %d resumed", first, tc.resumed)
			}
		})
	}
}
