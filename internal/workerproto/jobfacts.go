package workerproto

import (
	"context"
	"time"
)

// jobFacts are what the protocol reads of a task's job that never changes once the job exists:
// its workflow (for the task's step) and its creation time (for the attempt's trace).
type jobFacts struct {
	workflow string
	version  int
	created  time.Time
}

// jobFactsMax bounds the server's cache of job facts; past it the cache starts over.
const jobFactsMax = 1024

// jobFacts returns the facts of the job id, read once per job (and again after the cache
// starts over). A remote task's lease, its action's request and its trace each read its job
// for them: on PostgreSQL, with the session's reads of the job's state (which changes, see
// session.checkCanceled), 3.6 reads of the job per task, 15 % of the server's CPU in
// `sluice-bench engine --remote` (docs/performance.md, session 27).
func (s *Server) jobFacts(ctx context.Context, id int64) (jobFacts, error) {
	s.jobsMu.Lock()
	f, ok := s.jobs[id]
	s.jobsMu.Unlock()
	if ok {
		return f, nil
	}
	j, err := s.b.Engine().TaskJob(ctx, id)
	if err != nil {
		return jobFacts{}, err
	}
	f = jobFacts{workflow: j.WorkflowName, version: j.WorkflowVersion, created: j.CreatedAt}
	s.jobsMu.Lock()
	if len(s.jobs) >= jobFactsMax {
		clear(s.jobs)
	}
	s.jobs[id] = f
	s.jobsMu.Unlock()
	return f, nil
}
