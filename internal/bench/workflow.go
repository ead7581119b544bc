package bench

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// The workflows of `sluice-bench engine --mode fanout|chain`, made by the bench itself so that
// nothing needs preparing.
//
// fanout: a root whose `split` creates --items children (spawn, counted by the root's metadata),
// a no-op `work` on each child, and a `collect` on the root once its children are done. Each
// step applies only where its `when:` says, so each child also gets two tasks recorded skipped.
//
// chain: --items roots, each running --steps no-op steps one after another.
const fanoutYAML = `name: bench-fanout
steps:
  split:   {action: spawn, needs: [start], when: root}
  work:    {action: noop, needs: [start], when: "!root"}
  collect: {action: noop, needs: [children.done], when: root}
`

func chainYAML(steps int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench-chain-%d\nsteps:\n", steps)
	need := "start"
	for i := 1; i <= steps; i++ {
		fmt.Fprintf(&b, "  s%d: {action: noop, needs: [%s], success: [s%d.done]}\n", i, need, i)
		need = fmt.Sprintf("s%d.done", i)
	}
	return b.String()
}

// burndownYAML is the workflow of burndown, stream and paced: one no-op step per item.
//
//go:embed bench.yaml
var burndownYAML string

// engineWorkflow applies the mode's workflow and returns its name and roots; burndown, stream
// and paced run the one-step `bench` (bench.yaml).
func engineWorkflow(ctx context.Context, e *engine.Engine, o engineOpts) (string, []engine.Root, error) {
	var src string
	var roots []engine.Root
	switch o.mode {
	case "fanout":
		src = fanoutYAML
		roots = []engine.Root{{Name: "root", Size: 1, Metadata: map[string]any{"children": o.items}}}
	case "chain":
		src = chainYAML(o.steps)
		roots = make([]engine.Root, o.items)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("item-%d", i), Size: 1}
		}
	default:
		src = burndownYAML
		roots = make([]engine.Root, o.tasks)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("item-%d", i), Size: 1}
		}
	}
	wf, _, err := e.ApplyWorkflow(ctx, []byte(src), "bench.yaml")
	if err != nil {
		return "", nil, fmt.Errorf("apply the %s bench workflow: %w", o.mode, err)
	}
	return wf.Name, roots, nil
}

// countTasksByState fills the result's task and item counts from the job's tasks: every task row,
// those that ran, and the attempts beyond the first (a lost or repeated attempt shows there).
func countTasksByState(ctx context.Context, s store.Store, jobID int64, res *engineResult) error {
	counts, err := s.TaskCounts(ctx, jobID)
	if err != nil {
		return err
	}
	res.Tasks, res.TasksRun, res.Retries = 0, 0, 0
	for _, c := range counts {
		res.Tasks += c.Tasks
		res.Retries += c.Retries
		switch c.State {
		case record.TaskComplete:
			res.TasksRun += c.Tasks
		case record.TaskSkipped:
		default:
			return fmt.Errorf("bench job has %d tasks %s (%s)", c.Tasks, c.State, c.Action)
		}
	}
	return nil
}
