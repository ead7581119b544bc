package engine

import (
	"sync"

	"github.com/sluice-project/sluice/internal/action"
)

// Defaults of [Config.MaxItemDepth] and [Config.MaxJobItems].
const (
	DefaultMaxItemDepth = 64
	DefaultMaxJobItems  = 10_000_000
)

// itemCounts counts the children each job made in this process, for [Config.MaxJobItems].
type itemCounts struct {
	mu sync.Mutex
	n  map[int64]int64
}

// checkChild refuses a child past the job's limits: deeper than MaxItemDepth, or beyond
// MaxJobItems children made in this process. A workflow that recurses without bound (a remote
// step on start whose children get the same step) ends with this named error on the item that
// went too far, instead of filling the store.
func (e *Engine) checkChild(jobID int64, depth int) error {
	if max := e.cfg.MaxItemDepth; depth > max {
		return action.Permanentf("item depth limit: a child at depth %d is deeper than the job's limit of %d (a workflow that recurses without end? raise it with --max-item-depth)", depth, max)
	}
	e.counts.mu.Lock()
	defer e.counts.mu.Unlock()
	if e.counts.n == nil {
		e.counts.n = map[int64]int64{}
	}
	e.counts.n[jobID]++
	if n, max := e.counts.n[jobID], e.cfg.MaxJobItems; n > max {
		return action.Permanentf("item count limit: the job made more than %d items (a workflow that recurses without end? raise it with --max-job-items)", max)
	}
	return nil
}
