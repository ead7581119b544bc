package basic

import (
	"context"
	"fmt"
	"math"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/metadata"
)

// NewSpawn returns the `spawn` action, which creates empty children: as many as its setting
// `count`, or, without it, as the item's metadata key `children` says. It is the fan-out of
// `sluice-bench engine --mode fanout`, and a way to try a collector (`children.done`) without
// an archive. A replay resumes after the children an earlier attempt recorded.
func NewSpawn() action.Action { return spawn{} }

type spawn struct{}

// maxSpawn bounds one item's children, as the engine bounds a job's items.
const maxSpawn = 10_000_000

func (spawn) Spec() action.Spec {
	return action.Spec{
		Name:     "spawn",
		Version:  "1",
		Doc:      "Creates empty child items: `count` of them, or as many as the item's metadata `children` says.",
		Settings: spawnSettings.Settings(),
		Validate: spawnSettings.Validate,
	}
}

// Policy runs spawn without a temporary directory.
func (spawn) Policy() action.Policy { return action.Policy{NoTempDir: true} }

func (spawn) Run(ctx context.Context, t *action.Task, out action.Output) error {
	n, err := spawnCount(t)
	if err != nil {
		return action.Permanent(err)
	}
	for i := action.Resume(out); i < n; i++ {
		if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("child-%07d", i)}); err != nil {
			return err
		}
		if i%1000 == 999 {
			out.Progress(float64(i+1) / float64(n))
		}
	}
	return nil
}

// spawnSettings are the spawn action's: the count, when the step sets one.
var spawnSettings = settings.For(nil, func(c *struct {
	Count *int `with:"count" doc:"How many children to create. Defaults to the item's metadata \"children\"."`
}) error {
	if c.Count != nil && (*c.Count < 0 || *c.Count > maxSpawn) {
		return &action.SettingError{Key: "count", Reason: fmt.Sprintf("must be a whole number from 0 to %d", maxSpawn)}
	}
	return nil
})

// spawnCount reads `count`, or the metadata `children` (a json.Number).
func spawnCount(t *action.Task) (int, error) {
	c, err := spawnSettings.Run(t.With)
	if err != nil {
		return 0, err
	}
	if c.Count != nil {
		return *c.Count, nil
	}
	v, ok := t.Item.Metadata["children"]
	from := "metadata children"
	if !ok {
		return 0, fmt.Errorf("spawn %q: no setting count and no metadata children", t.Item.Name)
	}
	f, ok := metadata.Float(v)
	if !ok {
		return 0, fmt.Errorf("spawn %q: %s is %T, not a number", t.Item.Name, from, v)
	}
	if f < 0 || f > maxSpawn || f != math.Trunc(f) {
		return 0, fmt.Errorf("spawn %q: %s is %v, not a whole number from 0 to %d", t.Item.Name, from, v, maxSpawn)
	}
	return int(f), nil
}
