package postgres

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// pickFloors remembers, per queue, where this process's last pick began, so that the next
// starts there instead of at the front of the tasks_ready index. A finished task's entry stays
// in that index until a vacuum of tasks, and finished tasks are exactly the front of the index,
// where every pick starts: with a million of them a pick of 1,000 read 8,044 buffers instead of
// 2,030. A pick's first row is the first ready row at or after its start that no other
// transaction held, so nothing before it was ready then and the next pick may start there.
//
// A floor is used only while picks come back full (a backlog: where the front of the index is
// long), and a pick from a floor that comes back short is completed at once by one from the
// front (see [queries.pick]), so a queue is never found empty while a task before its floor is
// ready. What becomes ready before the floor while picks are full — a retry keeping its sort
// key, a child of an item earlier in the index, a task a rolled-back batch gave back — waits at
// most [fullPickEvery] for a pick from the front. Safe for concurrent use.
type pickFloors struct {
	mu sync.Mutex
	m  map[string]*pickFloor
}

type pickFloor struct {
	job  int64
	key  string
	set  bool      // job and key hold a floor, and the last pick came back full
	full time.Time // when the last pick from the front of the index began
}

// fullPickEvery is the longest a queue's picks start at its floor.
const fullPickEvery = 500 * time.Millisecond

// starts returns where each queue's pick begins: its floor, or (0, "") for the front of the
// index. full[i] reports the latter.
func (f *pickFloors) starts(queues []string, now time.Time) (jobs []int64, keys []string, full []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*pickFloor{}
	}
	jobs, keys, full = make([]int64, len(queues)), make([]string, len(queues)), make([]bool, len(queues))
	for i, queue := range queues {
		fl := f.m[queue]
		if fl == nil {
			fl = &pickFloor{}
			f.m[queue] = fl
		}
		if since := now.Sub(fl.full); !fl.set || since >= fullPickEvery || since < 0 {
			full[i] = true
			fl.full = now
			continue
		}
		jobs[i], keys[i] = fl.job, fl.key
	}
	return jobs, keys, full
}

// picked moves each queue's floor to the first task the pick returned, and keeps it only if the
// pick came back full.
func (f *pickFloors) picked(queues []string, limits []int32, got []*store.Task) {
	first := make(map[string]*store.Task, len(queues))
	n := make(map[string]int, len(queues))
	for _, t := range got {
		n[t.Queue]++
		if c := first[t.Queue]; c == nil || t.JobID < c.JobID || (t.JobID == c.JobID && strings.Compare(t.SortKey, c.SortKey) < 0) {
			first[t.Queue] = t
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, queue := range queues {
		fl := f.m[queue]
		if fl == nil {
			continue
		}
		fl.set = false
		if t := first[queue]; t != nil && n[queue] >= int(limits[i]) {
			fl.job, fl.key, fl.set = t.JobID, t.SortKey, true
		}
	}
}

// pick runs the pick statement sql (qTaskHoldMany or qTaskLeaseMany, whose arguments are args
// followed by the starts and the ids to skip) from each queue's floor and, for the queues
// whose pick from a floor came back short, once more from the front of the index for the rest
// of their limits, skipping the tasks already picked (a transaction's own row locks do not
// make SKIP LOCKED skip them).
func (q *queries) pick(ctx context.Context, sql string, queues []string, limits []int32, args ...any) ([]*store.Task, error) {
	jobs, keys, full := q.db.floors.starts(queues, time.Now())
	rows, err := q.c.Query(ctx, sql, append(args, jobs, keys, []int64{})...)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, err
	}
	n := make(map[string]int, len(queues))
	for _, t := range out {
		n[t.Queue]++
	}
	var again []string
	var rest []int32
	for i, queue := range queues {
		if !full[i] && n[queue] < int(limits[i]) {
			again, rest = append(again, queue), append(rest, limits[i]-int32(n[queue]))
		}
	}
	if len(again) > 0 {
		skip := make([]int64, len(out))
		for i, t := range out {
			skip[i] = t.ID
		}
		more := append([]any{again, args[1], rest}, args[3:]...)
		rows, err := q.c.Query(ctx, sql, append(more, make([]int64, len(again)), make([]string, len(again)), skip)...)
		extra, err := collect(rows, err, scanTask)
		if err != nil {
			return nil, err
		}
		out = append(out, extra...)
		// Back in pick order: each queue's tasks in index order, the queues as given.
		rank := make(map[string]int, len(queues))
		for i, queue := range queues {
			if _, ok := rank[queue]; !ok {
				rank[queue] = i
			}
		}
		slices.SortStableFunc(out, func(a, b *store.Task) int {
			if a.Queue != b.Queue {
				return rank[a.Queue] - rank[b.Queue]
			}
			if a.JobID != b.JobID {
				return cmpInt(a.JobID, b.JobID)
			}
			return strings.Compare(a.SortKey, b.SortKey)
		})
	}
	q.db.floors.picked(queues, limits, out)
	return out, nil
}
