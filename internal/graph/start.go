package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
)

// RequestError is a request that cannot be registered; its message names the field.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return "graph request: " + e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// jobKeyMeta is the job metadata key holding the request's key (see [Request.Key]).
const jobKeyMeta = "graph_request"

// Key identifies the request by its content (normalized): a request run again after its process
// died finds its unfinished job by it.
func (r *Request) Key() string {
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// Start registers a request (Cartographer's REGISTER, as the REST service does it): it applies the
// built-in graph workflow, creates the request's job and adds the request item, whose register
// route makes the root work items. With resume, an unfinished job of the same request is taken
// up again instead (its item and seal are idempotent). The job runs once workers run.
func Start(ctx context.Context, e *engine.Engine, r Request, resume bool) (*record.Job, error) {
	if err := r.Normalize(); err != nil {
		return nil, &RequestError{Err: err}
	}
	if err := builtin.Apply(ctx, e, "graph"); err != nil {
		return nil, err
	}
	key := r.Key()
	var sub *engine.Submission
	if resume {
		running, err := e.RunningJobsOf(ctx, "graph")
		if err != nil {
			return nil, err
		}
		for _, j := range running {
			var md map[string]any
			if json.Unmarshal(j.Metadata, &md) == nil && md[jobKeyMeta] == key {
				sub = e.SubmissionOf(j)
				break
			}
		}
	}
	if sub == nil {
		var err error
		sub, err = e.Submit(ctx, engine.SubmitParams{Workflow: "graph", Metadata: map[string]any{jobKeyMeta: key}})
		if err != nil {
			return nil, fmt.Errorf("create graph job: %w", err)
		}
	}
	job := sub.Job()
	// The workspace is there as the request is answered (register records it too, for a request
	// item added some other way), so GET /v1/graphs/{id} knows the request before any worker ran.
	if err := Open(e).PutWorkspace(ctx, job.ID, &r); err != nil {
		return nil, err
	}
	var md map[string]any
	b, _ := json.Marshal(r)
	_ = metadata.Unmarshal(b, &md)
	if err := sub.Add(ctx, engine.Root{Name: "request", Metadata: map[string]any{keyRequest: md}}); err != nil {
		return nil, err
	}
	if err := sub.Seal(ctx); err != nil {
		return nil, err
	}
	return job, nil
}
