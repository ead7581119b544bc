package worker

import (
	"slices"
	"time"
)

// Pages of 10: the tests page through children of an earlier attempt without making thousands.
func init() { earlierPage = 10 }

// BriefQueues returns the queues a brief batch of w started for, sorted.
func BriefQueues(w *Worker) []string {
	w.slots.mu.Lock()
	defer w.slots.mu.Unlock()
	out := make([]string, 0, len(w.slots.batchMark))
	for q := range w.slots.batchMark {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// SetAbandonAfter sets how long a stop waits for canceled tasks before abandoning them, until
// the test ends.
func SetAbandonAfter(t interface{ Cleanup(func()) }, d time.Duration) {
	old := abandonAfter
	abandonAfter = d
	t.Cleanup(func() { abandonAfter = old })
}

// InFlightIn returns how many slots of queue w's tasks hold.
func InFlightIn(w *Worker, queue string) int {
	w.slots.mu.Lock()
	defer w.slots.mu.Unlock()
	return w.slots.inflight[queue]
}
