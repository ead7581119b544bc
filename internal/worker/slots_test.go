package worker

import (
	"errors"
	"slices"
	"testing"
)

// TestBriefIdleAfterWake checks when a brief batch that found fewer tasks than it asked for marks
// its queue idle: not when the queue was woken since it started and no batch started after the
// wake (that wake's tasks may be unpicked), and yes when a later batch started after the wake
// (its pick, after the wake's commit, answers it) — no third batch to find nothing. Woken for
// any queue, not by name, it is unknown: a check decides before another batch (TestCheck).
func TestBriefIdleAfterWake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		steps       func(s *slots)
		wantIdle    bool
		wantUnknown bool
	}{
		{"no wake", func(s *slots) {
			s.startBrief("q")
			s.endBrief("q", false)
		}, true, false},
		{"woken while it ran", func(s *slots) {
			s.startBrief("q")
			s.wakeQueues([]string{"q"})
			s.endBrief("q", false)
		}, false, false},
		{"woken for any queue while it ran", func(s *slots) {
			s.startBrief("q")
			s.wakeAny()
			s.endBrief("q", false)
		}, false, true},
		{"a later batch took the wake", func(s *slots) {
			s.startBrief("q")
			s.wakeQueues([]string{"q"})
			s.startBrief("q")
			s.endBrief("q", false) // the first ends while the second runs
		}, true, false},
		{"woken again after the later batch started", func(s *slots) {
			s.startBrief("q")
			s.wakeQueues([]string{"q"})
			s.startBrief("q")
			s.wakeQueues([]string{"q"})
			s.endBrief("q", false)
			s.endBrief("q", false)
		}, false, false},
		{"another queue's wake", func(s *slots) {
			s.startBrief("q")
			s.wakeQueues([]string{"other"})
			s.endBrief("q", false)
		}, true, false},
		{"a full batch after an idle one", func(s *slots) {
			s.startBrief("q")
			s.startBrief("q")
			s.endBrief("q", false)
			s.endBrief("q", true) // it filled its limit: there may be more
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlots(briefBatches)
			tc.steps(s)
			if got := s.idle["q"]; got != tc.wantIdle {
				t.Errorf("queue idle = %v, want %v", got, tc.wantIdle)
			}
			if got := s.unknown["q"]; got != tc.wantUnknown {
				t.Errorf("queue unknown = %v, want %v", got, tc.wantUnknown)
			}
			if ok, _ := s.startBrief("q"); ok == (tc.wantIdle || tc.wantUnknown) {
				t.Errorf("startBrief after = %v, want %v", ok, !tc.wantIdle && !tc.wantUnknown)
			}
		})
	}
}

// TestCheck checks the unknown brief queues: at the start, those no wake named yet; a brief batch
// skips them until a check (store.TaskReadyQueues) finds ready tasks in them, and one that finds
// none makes them idle, unless a wake came meanwhile. A failed check, a wake naming the queue or
// the poll leaves them to pick; a wake of every queue makes the idle brief queues unknown again,
// but not the others (leases do not check).
func TestCheck(t *testing.T) {
	t.Parallel()
	queues := []queueInfo{{name: "a", brief: true}, {name: "b", brief: true}, {name: "c", brief: true}, {name: "lease"}}
	start := func() *slots {
		s := newSlots(briefBatches)
		s.wakeQueues([]string{"a"}) // before the start: a's tasks were announced
		s.serve(queues, true)
		return s
	}
	can := func(t *testing.T, s *slots, want map[string]bool) {
		t.Helper()
		for q, w := range want {
			ok, _ := s.startBrief(q)
			if ok {
				s.endBrief(q, true)
			}
			if ok != w {
				t.Errorf("startBrief(%q) = %v, want %v", q, ok, w)
			}
		}
	}
	t.Run("start", func(t *testing.T) {
		s := start()
		can(t, s, map[string]bool{"a": true, "b": false, "c": false})
		names, m := s.toCheck()
		if want := []string{"b", "c"}; !slices.Equal(names, want) {
			t.Fatalf("toCheck = %q, want %q", names, want)
		}
		if again, _ := s.toCheck(); again != nil {
			t.Errorf("a second check began while one ran: %q", again)
		}
		s.checked(names, m, []string{"c"}, nil)
		can(t, s, map[string]bool{"a": true, "b": false, "c": true})
		if !s.idle["b"] || s.unknown["b"] {
			t.Errorf("b after a check that found nothing: idle %v, unknown %v; want idle", s.idle["b"], s.unknown["b"])
		}
		if names, _ := s.toCheck(); names != nil {
			t.Errorf("toCheck after the check = %q, want nothing", names)
		}
		s.wakeAny() // b is idle: unknown again; the lease queue is not checked
		s.mu.Lock()
		s.idle["lease"] = true
		s.mu.Unlock()
		s.wakeAny()
		if names, _ := s.toCheck(); !slices.Equal(names, []string{"b"}) {
			t.Errorf("toCheck after a wake of every queue = %q, want [b]", names)
		}
		if s.idle["lease"] {
			t.Error("the lease queue stayed idle after a wake of every queue")
		}
	})
	for _, tc := range []struct {
		name      string
		meanwhile func(s *slots)
		err       error
		want      bool // a brief batch may start for b after the check
		unknown   bool // b is still unknown
	}{
		{"nothing found", func(*slots) {}, nil, false, false},
		{"a wake of every queue meanwhile", func(s *slots) { s.wakeAny() }, nil, false, true},
		{"b woken meanwhile", func(s *slots) { s.wakeQueues([]string{"b"}) }, nil, true, false},
		{"another queue woken meanwhile", func(s *slots) { s.wakeQueues([]string{"c"}) }, nil, false, false},
		{"the check failed", func(*slots) {}, errors.New("down"), true, false},
		{"polled meanwhile", func(s *slots) { s.polled() }, nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start()
			names, m := s.toCheck()
			tc.meanwhile(s)
			s.checked(names, m, nil, tc.err)
			if s.unknown["b"] != tc.unknown {
				t.Errorf("b unknown = %v, want %v", s.unknown["b"], tc.unknown)
			}
			can(t, s, map[string]bool{"b": tc.want})
		})
	}
}

// TestCancelBeforeRun: a cancel that names a task before its run recorded its cancel func (its
// job canceled just after its lease) is not lost: the run learns of it once, and a cancel of a
// running task cancels it.
func TestCancelBeforeRun(t *testing.T) {
	t.Parallel()
	s := newSlots(1)
	s.cancel([]int64{7})
	if !s.run(7, func() { t.Error("the cancel func was called by run; its caller checks the job first") }) {
		t.Error("run of a task a cancel named before: not told")
	}
	s.done("q", 7)
	if s.run(7, func() {}) {
		t.Error("the same task's next run told of the cancel again")
	}
	canceled := false
	s.running[7] = func() { canceled = true }
	s.cancel([]int64{7})
	s.mu.Lock()
	_, kept := s.missed[7]
	s.mu.Unlock()
	if kept || !canceled {
		t.Errorf("a cancel of a running task: canceled %v, kept as missed %v; want canceled only", canceled, kept)
	}
}
