package postgres

import (
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// pickFloors remembers, per queue, where this process's last pick began, so that the next
// starts there instead of at the front of the tasks_ready index. A finished task's entry stays
// in that index until a vacuum of tasks, and finished tasks are exactly the front of the index,
// where every pick starts: with a million of them a pick of 1,000 read 8,000 buffers instead of
// 2,000. A pick's first row is the first ready row at or after its start that no other
// transaction held, so nothing before it was ready then and the next pick may start there.
//
// What may become ready before the floor later — a retry keeping its sort key, a child of an
// item earlier in the index, a task another transaction held and gave back — is picked by a
// pick from the front of the index, made at least every [fullPickEvery], and after a pick from
// the floor came back short (the ready tasks past it may be spent) once [shortPickAfter] has
// passed since the last. Safe for concurrent use.
type pickFloors struct {
	mu sync.Mutex
	m  map[string]*pickFloor
}

type pickFloor struct {
	job   int64
	key   string
	set   bool      // job and key hold a floor
	full  time.Time // when the last pick from the front of the index began
	short bool      // the last pick from the floor returned fewer tasks than its limit
}

const (
	fullPickEvery  = 500 * time.Millisecond
	shortPickAfter = 50 * time.Millisecond
)

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
		since := now.Sub(fl.full)
		if !fl.set || since >= fullPickEvery || since < 0 || (fl.short && since >= shortPickAfter) {
			full[i] = true
			fl.full = now
			continue
		}
		jobs[i], keys[i] = fl.job, fl.key
	}
	return jobs, keys, full
}

// picked moves each queue's floor to the first task the pick returned, and notes a pick from
// the floor that came back short. A queue with nothing picked keeps its floor (a pick from the
// front of the index found nothing ready anywhere: the floor is as good as any).
func (f *pickFloors) picked(queues []string, limits []int32, full []bool, got []*store.Task) {
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
		if !full[i] {
			fl.short = n[queue] < int(limits[i])
		}
		if t := first[queue]; t != nil {
			fl.job, fl.key, fl.set = t.JobID, t.SortKey, true
		}
	}
}
