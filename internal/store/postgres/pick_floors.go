package postgres

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/record"
)

// pickFloors remembers, per queue, where this process's last pick ended, so that the next
// starts there instead of at the front of the tasks_ready index. A finished task's entry stays
// in that index until a vacuum of tasks, and finished tasks are exactly the front of the index,
// where every pick starts: with a million of them a pick of 1,000 read 8,044 buffers instead of
// 2,030. A pick returns, in index order, every ready and due row from its start to its last row
// that no other transaction held: nothing there is left ready but what it took, and the next
// pick may start at its last row. Not at its first: the rows between stay held by the batch
// that took them until it commits, and a pick that starts among them steps over each (SKIP
// LOCKED, about 1.3 µs a row): every held batch's pick stepped over the batch before it.
//
// A floor is used only while picks come back full (a backlog: where the front of the index is
// long), and a pick from a floor that comes back short is completed at once by one from the
// front (see [queries.pick]), so a queue is never found empty while a task before its floor is
// ready. A task this process makes ready again (gives back, retries, unparks) and a pick of a
// transaction of its that rolls back clear the queue's floor once that is committed (rolled
// back): its next pick starts at the front. What else becomes ready before the floor while picks
// are full — a child of an item earlier in the index, a task given back by another process, a
// retry's backoff ending — waits at most [fullPickEvery] for a pick from the front. Safe for
// concurrent use.
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

// reset clears the floors of the queues: their next picks start at the front of the index.
func (f *pickFloors) reset(queues []string) {
	if len(queues) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, queue := range queues {
		if fl := f.m[queue]; fl != nil {
			fl.set = false
		}
	}
}

// picked moves each queue's floor to the last task the pick returned, and keeps it only if the
// pick came back full.
func (f *pickFloors) picked(queues []string, limits []int32, got []*record.Task) {
	last := make(map[string]*record.Task, len(queues))
	n := make(map[string]int, len(queues))
	for _, t := range got {
		n[t.Queue]++
		if c := last[t.Queue]; c == nil || t.JobID > c.JobID || (t.JobID == c.JobID && strings.Compare(t.SortKey, c.SortKey) > 0) {
			last[t.Queue] = t
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
		if t := last[queue]; t != nil && n[queue] >= int(limits[i]) {
			fl.job, fl.key, fl.set = t.JobID, t.SortKey, true
		}
	}
}

// pick runs the pick statement sql (qTaskHoldMany or qTaskLeaseMany, whose arguments are args
// followed by the starts and the ids to skip) from each queue's floor and, for the queues
// whose pick from a floor came back short, once more from the front of the index for the rest
// of their limits, skipping the tasks already picked (a transaction's own row locks do not
// make SKIP LOCKED skip them).
func (q *queries) pick(ctx context.Context, sql string, queues []string, limits []int32, args ...any) ([]*record.Task, error) {
	jobs, keys, full := q.db.floors.starts(queues, time.Now())
	if q.inTx { // a rollback clears their floors (see DB.InTx)
		for _, queue := range queues {
			if !slices.Contains(q.picked, queue) {
				q.picked = append(q.picked, queue)
			}
		}
	}
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
		inPickOrder(out, queues) // back in pick order
	}
	q.db.floors.picked(queues, limits, out)
	return out, nil
}
