package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
)

// IngestFiles runs the job of `sluice ingest PATH…` in n, printing nothing, and returns the job
// as it ended: it applies the documents workflow, stores each input (files as they are, folders
// walked), adds the roots, starts n's workers and stops them when the job ends. opts are the
// job's options (ocr, split_by_page, lang). An input that cannot be read is an error, before
// the job starts. It is the path sluice-bench ingest measures: the same as the command's.
func IngestFiles(ctx context.Context, n *node.Node, paths []string, opts map[string]any) (*record.Job, error) {
	if err := builtin.Apply(ctx, n.Engine, documentsWorkflow); err != nil {
		return nil, err
	}
	inputs, skipped := collectInputs(paths)
	for _, s := range skipped {
		if !s.notice {
			return nil, fmt.Errorf("input %s: %s", s.path, s.reason)
		}
	}
	job, err := startJob(ctx, n, documentsWorkflow, inputs, nil, opts)
	if err != nil {
		return nil, err
	}
	return followIngest(ctx, &env{stdout: io.Discard, stderr: io.Discard}, n, job.ID)
}
