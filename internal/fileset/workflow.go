package fileset

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/workflow"
)

// DefaultHostDelay is the politeness delay of [Config.HostDelay]: at most one download from a
// host starts per second, across every process.
const DefaultHostDelay = time.Second

// SinkName is the sink the workflow publishes results to, when one of that name is configured
// ([Config.Publish]).
const SinkName = "fileset"

// downloadStep is the step of the built-in workflow whose limit carries the politeness delay.
const downloadStep = "download"

// Workflow returns the fileset workflow a job of this configuration runs: the built-in
// workflow (internal/builtin/fileset.yaml) with the download step's per-host limit started
// at most once per [Config.HostDelay] (no rate when it is negative), and without its publish:
// rules unless [Config.Publish]. The workflow is the built-in YAML when nothing differs from it,
// else its canonical JSON.
func (s *Fileset) Workflow() ([]byte, error) { return WorkflowSource(s.cfg.HostDelay, s.cfg.Publish) }

// WorkflowSource returns the fileset workflow with hostDelay (0: [DefaultHostDelay]; negative:
// none) and with or without its publish: rules (see [Fileset.Workflow]).
func WorkflowSource(hostDelay time.Duration, publish bool) ([]byte, error) {
	src, ok := builtin.Source(WorkflowName)
	if !ok {
		return nil, fmt.Errorf("no built-in workflow %q", WorkflowName)
	}
	if hostDelay == 0 {
		hostDelay = DefaultHostDelay
	}
	def, err := workflow.Parse(src, WorkflowName+".yaml")
	if err != nil {
		return nil, err
	}
	dl := def.Step(downloadStep)
	if dl == nil || dl.Limit == nil {
		return nil, fmt.Errorf("built-in workflow %q: no step %q with a limit", WorkflowName, downloadStep)
	}
	rate := workflow.Rate{}
	if hostDelay > 0 {
		rate = workflow.Rate{N: 1, Per: hostDelay}
	}
	if publish && dl.Limit.Rate == rate {
		return src, nil
	}
	dl.Limit.Rate = rate
	if !publish {
		def.Publish = nil
		for _, st := range def.Steps {
			st.Publish = nil
		}
	}
	return workflow.Marshal(def)
}

// ApplyWorkflow stores the workflow of this configuration ([Fileset.Workflow]) — a no-op when
// that version is already stored — and returns its version, which the jobs this process
// creates must name (engine.CreateJobParams.Version: the latest may be another process's
// configuration). The delay and the publishing a job has are those of the process that created
// it, whichever processes run its tasks.
func (s *Fileset) ApplyWorkflow(ctx context.Context, e *engine.Engine) (int, error) {
	src, err := s.Workflow()
	if err != nil {
		return 0, err
	}
	wf, _, err := e.ApplyWorkflow(ctx, src, WorkflowName+".yaml")
	if err != nil {
		return 0, fmt.Errorf("apply the fileset workflow: %w", err)
	}
	return wf.Version, nil
}
