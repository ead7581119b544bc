package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// SubmitParams names the job a [Submission] creates.
type SubmitParams struct {
	Workflow string
	Version  int // 0: the latest
	// Key makes the submission idempotent: a second one with the key finds the first's job and
	// takes up its roots where it stopped ([Submission.Has]). Without a key, every submission
	// creates a job.
	Key      string
	Metadata map[string]any
	Options  map[string]any
}

// submitBatch is how many roots a [Submission] commits in one transaction: [Engine.AddRoots]'s
// own transaction size, so a full batch is one commit.
const submitBatch = 500

// Submission submits one job: it creates the job unsealed (or finds it by its key), adds its
// roots in batches while workers may already run them, and seals it, after which the job
// completes once nothing is open. It is the one way a job is submitted (commands, the API,
// sources, domains, benchmarks).
//
// Roots are streamed: a Submission holds at most one batch of them, so a submission of any
// size needs little memory. Every step is idempotent, which makes a submission crash-safe: one
// killed while adding roots is finished by submitting again with the same key, which adds only
// the roots not yet recorded and seals.
//
// For the same reason a step that fails because the database is unavailable
// ([store.ErrUnavailable]: a restart, a failover, a network cut) is run again, with backoff, for
// up to [SubmitUnavailableWait]; its commit may have gone through before the connection broke,
// and running it again records nothing twice. A keyless [Engine.Submit] is not run again: a job
// whose creation committed unseen would be created twice. Past the wait the step's error wraps
// [store.ErrUnavailable], and submitting again with the same key takes the submission up.
//
// A Submission is not safe for concurrent use.
type Submission struct {
	e       *Engine
	job     *record.Job
	created bool
	// open is false once the job is sealed or has ended: no root may be added any more.
	open   bool
	sealed bool // by this submission's Seal
	// have holds the ordinals of the roots recorded before this submission, read once when
	// first needed; nil for a job created by it.
	have  map[int]bool
	batch []Root
}

// Submit starts a submission: it creates the job of p, unsealed, or finds the job p.Key names.
// It returns the errors of [Engine.CreateJob] (one wrapping [store.ErrNotFound] for an unknown
// workflow).
func (e *Engine) Submit(ctx context.Context, p SubmitParams) (*Submission, error) {
	var job *record.Job
	var created bool
	create := func() (err error) {
		job, created, err = e.CreateJob(ctx, CreateJobParams{Workflow: p.Workflow, Version: p.Version, Key: p.Key,
			Metadata: p.Metadata, Options: p.Options, Open: true})
		return err
	}
	var err error
	if p.Key == "" {
		err = create()
	} else {
		err = e.whileUnavailable(ctx, "create the job", create)
	}
	if err != nil {
		return nil, err
	}
	return e.submission(job, created), nil
}

// SubmissionOf takes up the submission of a job the caller found without a key (such as a
// domain's running job for the same request).
func (e *Engine) SubmissionOf(job *record.Job) *Submission {
	return e.submission(job, false)
}

func (e *Engine) submission(job *record.Job, created bool) *Submission {
	return &Submission{e: e, job: job, created: created, open: created || (job.State == record.JobRunning && !job.Sealed)}
}

// Job returns the submitted job as it was when created or found: its ID and workflow are
// current, its state may not be.
func (s *Submission) Job() *record.Job { return s.job }

// Created reports whether [Engine.Submit] created the job, rather than finding it by its key.
func (s *Submission) Created() bool { return s.created }

// Open reports whether the job still takes roots. A job found by its key that is sealed, or has
// ended, does not: its submission was finished (or the job canceled) before, and [Submission.Add]
// and [Submission.Seal] do nothing.
func (s *Submission) Open() bool { return s.open }

// Has reports whether the job has the root of this ordinal from before this submission: a
// caller skips the work of making it again (reading a file, storing a blob). [Submission.Add]
// leaves such roots out by itself.
func (s *Submission) Has(ctx context.Context, ordinal int) (bool, error) {
	if s.created {
		return false, nil
	}
	if s.have == nil {
		var have map[int]bool
		err := s.e.whileUnavailable(ctx, fmt.Sprintf("read job %d's roots", s.job.ID), func() (err error) {
			have, err = s.e.rootOrdinals(ctx, s.job.ID)
			return err
		})
		if err != nil {
			return false, err
		}
		s.have = have
	}
	return s.have[ordinal], nil
}

// Add adds roots to the job, each keyed by its Ordinal: a root the job has already is left
// out. Roots are committed a batch at a time, the last ones by [Submission.Flush] or
// [Submission.Seal]. Add does nothing when the job is not [Submission.Open]; after
// [Submission.Seal] it is an error.
func (s *Submission) Add(ctx context.Context, roots ...Root) error {
	if s.sealed {
		return fmt.Errorf("add roots to job %d: the submission is sealed", s.job.ID)
	}
	if !s.open {
		return nil
	}
	for _, r := range roots {
		if has, err := s.Has(ctx, r.Ordinal); err != nil {
			return err
		} else if has {
			continue
		}
		if s.batch == nil {
			s.batch = make([]Root, 0, submitBatch)
		}
		s.batch = append(s.batch, r)
		if len(s.batch) == submitBatch {
			if err := s.Flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Flush commits the roots added so far; workers may run them from then on.
func (s *Submission) Flush(ctx context.Context) error {
	if len(s.batch) == 0 {
		return nil
	}
	err := s.e.whileUnavailable(ctx, fmt.Sprintf("add roots to job %d", s.job.ID), func() error {
		return s.e.AddRoots(ctx, s.job, s.batch)
	})
	clear(s.batch) // drop the roots' metadata: the buffer is reused
	s.batch = s.batch[:0]
	return err
}

// Seal commits the roots added so far and seals the job ([Engine.Seal]): every root is
// recorded, and the job may complete from now on. Sealing again does nothing.
func (s *Submission) Seal(ctx context.Context) error {
	if !s.open {
		return nil
	}
	if err := s.Flush(ctx); err != nil {
		return err
	}
	if err := s.e.whileUnavailable(ctx, fmt.Sprintf("seal job %d", s.job.ID), func() error {
		return s.e.Seal(ctx, s.job.ID)
	}); err != nil {
		return err
	}
	s.open, s.sealed = false, true
	return nil
}

// SubmitUnavailableWait is how long a [Submission]'s step waits for an unavailable database
// before it fails: longer than a failover takes (a minute at most with pg_auto_failover's
// defaults), as long as `sluice run` waits for its job.
const SubmitUnavailableWait = 2 * time.Minute

// whileUnavailable runs the idempotent step fn, and again while it fails with
// [store.ErrUnavailable], with backoff (0.1 s doubling to 2 s), until it has failed so for
// [SubmitUnavailableWait]. Each try may itself take a while: a connection attempt waits for the
// URL's connect_timeout on every host.
func (e *Engine) whileUnavailable(ctx context.Context, step string, fn func() error) error {
	var since time.Time
	for try := 0; ; try++ {
		err := fn()
		if err == nil || !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		if since.IsZero() {
			since = time.Now()
		} else if away := time.Since(since); away >= SubmitUnavailableWait {
			return fmt.Errorf("%s: the database has been unavailable for %s: %w", step, away.Round(time.Second), err)
		}
		e.log.Warn("database unavailable; the submission waits for it", "step", step, "try", try+1, "error", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(100*time.Millisecond<<min(try, 5), 2*time.Second)):
		}
	}
}

// rootOrdinals returns the ordinals of a job's roots.
func (e *Engine) rootOrdinals(ctx context.Context, jobID int64) (map[int]bool, error) {
	const page = 5000
	have := map[int]bool{}
	var zero int64
	after := ""
	for {
		items, err := e.store.ItemList(ctx, store.ItemListParams{JobID: jobID, ParentID: &zero, AfterSort: after, Limit: page})
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			have[it.Ordinal] = true
		}
		if len(items) < page {
			return have, nil
		}
		after = items[len(items)-1].SortKey
	}
}
