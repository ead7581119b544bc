package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/workflow"
)

// stepCount is a step's counts as the job page's table shows them.
type stepCount struct {
	Step, Action string
	workflow.StepCounts
}

// jobSteps is a job's workflow with each step's task counts: the diagram (its address changes
// with the counts, so a browser fetches it again only when they did) and the same as a table.
type jobSteps struct {
	JobID    int64
	Workflow string
	Live     bool
	Diagram  string
	Steps    []stepCount
}

// stepCounts counts the job's tasks per step: queued (blocked, ready, parked), running, done
// (complete) and failed; skipped and canceled tasks are not counted.
func (w *Web) stepCounts(ctx context.Context, jobID int64) (map[string]workflow.StepCounts, error) {
	counts, err := w.rec.TaskCounts(ctx, jobID)
	if err != nil {
		return nil, err
	}
	out := map[string]workflow.StepCounts{}
	for _, c := range counts {
		sc := out[c.Step]
		switch c.State {
		case record.TaskBlocked, record.TaskReady, record.TaskParked:
			sc.Queued += c.Tasks
		case record.TaskRunning:
			sc.Running += c.Tasks
		case record.TaskComplete:
			sc.Done += c.Tasks
		case record.TaskFailed:
			sc.Failed += c.Tasks
		}
		out[c.Step] = sc
	}
	return out, nil
}

// steps returns the job's steps with their counts, in the workflow's order, or nil when its
// workflow version cannot be read.
func (w *Web) steps(ctx context.Context, j *record.Job) (*jobSteps, error) {
	def, _, err := w.b.Engine().Definition(ctx, j.WorkflowName, j.WorkflowVersion)
	if err != nil {
		return nil, nil
	}
	counts, err := w.stepCounts(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	out := &jobSteps{JobID: j.ID, Workflow: j.WorkflowName, Live: j.State == record.JobRunning}
	h := sha256.New()
	for _, s := range def.Steps {
		c := counts[s.Name]
		out.Steps = append(out.Steps, stepCount{Step: s.Name, Action: s.Action, StepCounts: c})
		fmt.Fprintf(h, "%s\x00%v\x00", s.Name, c)
	}
	out.Diagram = fmt.Sprintf("/jobs/%d/diagram.svg?counts=%s", j.ID, hex.EncodeToString(h.Sum(nil))[:16])
	return out, nil
}

// stepsFragment is the job page's steps section (GET /jobs/{id}/steps), which the page fetches
// again as the job's progress events arrive.
func (w *Web) stepsFragment(rw http.ResponseWriter, r *http.Request, s *session) error {
	j, err := w.pathJob(r)
	if err != nil {
		return err
	}
	st, err := w.steps(r.Context(), j)
	if err != nil {
		return err
	}
	rw.Header().Set("Cache-Control", "no-store")
	w.render(rw, r, http.StatusOK, "frag-steps", s, pageData{Data: st})
	return nil
}

// diagram is the job's workflow diagram with each step's counts (GET /jobs/{id}/diagram.svg).
func (w *Web) diagram(rw http.ResponseWriter, r *http.Request, s *session) error {
	j, err := w.pathJob(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	def, _, err := w.b.Engine().Definition(ctx, j.WorkflowName, j.WorkflowVersion)
	if err != nil {
		return err
	}
	counts, err := w.stepCounts(ctx, j.ID)
	if err != nil {
		return err
	}
	svg := workflow.NewGraph(def, w.b.Engine().Catalog().Spec).WithCounts(counts).SVG()
	rw.Header().Set("Content-Type", "image/svg+xml")
	rw.Header().Set("Cache-Control", "private, max-age=60")
	_, err = rw.Write(svg)
	return err
}
