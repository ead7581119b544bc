package fileset

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/workflow"
)

// DefaultHostDelay is the politeness delay of [Config.HostDelay]: at most one download from a
// host starts per second, across every process.
const DefaultHostDelay = time.Second

// SinkName is the sink the workflow publishes results to in Sluice's envelope, when one of that
// name is configured ([Config.Sinks]): each result among a message's outputs, each dataset-file
// result in its metadata.
const SinkName = "fileset"

// SandcrawlerSinkName is the sink the workflow publishes results to as Sandcrawler does, when
// one of that name is configured: each message's body is the bare result, on the subjects
// ingest-fileset-results and ingest-file-results.
const SandcrawlerSinkName = "sandcrawler"

// downloadStep is the step of the built-in workflow whose limit carries the politeness delay.
const downloadStep = "download"

// Workflow returns the fileset workflow a job of this configuration runs: the built-in
// workflow (internal/builtin/fileset.yaml) with the download step's per-host limit started at
// most once per [Config.HostDelay] and its host_delay setting the same (neither when it is
// negative), and with only the publish: rules whose sink is one of [Config.Sinks]. The
// workflow is the built-in YAML when nothing differs from it, else its canonical JSON.
func (s *Fileset) Workflow() ([]byte, error) { return WorkflowSource(s.cfg.HostDelay, s.cfg.Sinks...) }

// WorkflowSource returns the fileset workflow with hostDelay (0: [DefaultHostDelay]; negative:
// none) and the publish: rules of the sinks named (see [Fileset.Workflow]).
func WorkflowSource(hostDelay time.Duration, sinks ...string) ([]byte, error) {
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
	keep := func(rules []workflow.PublishRule) []workflow.PublishRule {
		return slices.DeleteFunc(rules, func(r workflow.PublishRule) bool { return !slices.Contains(sinks, r.Sink) })
	}
	with := ""
	if hostDelay > 0 {
		with = hostDelay.String()
	}
	got, _ := dl.With["host_delay"].(string)
	all := len(def.Publish)
	def.Publish = keep(def.Publish)
	same := len(def.Publish) == all && dl.Limit.Rate == rate && got == with
	for _, st := range def.Steps {
		n := len(st.Publish)
		if st.Publish = keep(st.Publish); len(st.Publish) == 0 {
			st.Publish = nil
		}
		same = same && len(st.Publish) == n
	}
	if len(def.Publish) == 0 {
		def.Publish = nil
	}
	if same {
		return src, nil
	}
	dl.Limit.Rate = rate
	if with != "" {
		if dl.With == nil {
			dl.With = map[string]any{}
		}
		dl.With["host_delay"] = with
	} else {
		delete(dl.With, "host_delay")
		if len(dl.With) == 0 {
			dl.With = nil
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
