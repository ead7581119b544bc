package worker

import "testing"

// TestHeldIdleAfterWake checks when a held batch that found fewer tasks than it asked for marks
// its queue idle: not when the queue was woken since it started and no batch started after the
// wake (that wake's tasks may be unpicked), and yes when a later batch started after the wake
// (its pick, after the wake's commit, answers it) — no third batch to find nothing.
func TestHeldIdleAfterWake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		steps    func(s *slots)
		wantIdle bool
	}{
		{"no wake", func(s *slots) {
			s.startHeld("q")
			s.endHeld("q", false, false)
		}, true},
		{"woken while it ran", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.endHeld("q", false, false)
		}, false},
		{"woken for any queue while it ran", func(s *slots) {
			s.startHeld("q")
			s.wakeAny()
			s.endHeld("q", false, false)
		}, false},
		{"a later batch took the wake", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.startHeld("q")
			s.endHeld("q", false, false) // the first ends while the second runs
		}, true},
		{"woken again after the later batch started", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.endHeld("q", false, false)
			s.endHeld("q", false, false)
		}, false},
		{"another queue's wake", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"other"})
			s.endHeld("q", false, false)
		}, true},
		{"a full batch after an idle one", func(s *slots) {
			s.startHeld("q")
			s.startHeld("q")
			s.endHeld("q", false, false)
			s.endHeld("q", true, false) // it filled its limit: there may be more
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlots(heldBatches)
			tc.steps(s)
			if got := s.idle["q"]; got != tc.wantIdle {
				t.Errorf("queue idle = %v, want %v", got, tc.wantIdle)
			}
			if ok, _ := s.startHeld("q"); ok == tc.wantIdle {
				t.Errorf("startHeld after = %v, want %v", ok, !tc.wantIdle)
			}
		})
	}
}

// TestHeldSettleBound checks the slots of held batches that settle (see slots.settle): a batch
// that settles frees its slot for one more batch, up to settleMax settling beside heldMax
// running, and none with one writer (heldMax 1, settleMax 0), where a settling batch still
// holds the writer.
func TestHeldSettleBound(t *testing.T) {
	t.Parallel()
	start := func(s *slots) bool {
		ok, stop := s.startHeld("q")
		return ok && !stop
	}
	s := newSlots(heldBatches)
	for i := range heldBatches {
		if !start(s) {
			t.Fatalf("batch %d refused", i)
		}
	}
	if start(s) {
		t.Fatal("a batch beyond heldMax started with none settling")
	}
	s.settle()
	if !start(s) {
		t.Fatal("no batch started in the slot of one that settled")
	}
	s.settle()
	if start(s) {
		t.Fatalf("a batch started with %d running and %d settling", s.held, s.settling)
	}
	s.endHeld("q", true, true) // more: the queue stays not idle
	if !start(s) {
		t.Fatal("no batch started once a settling one ended")
	}
	if !s.holding() {
		t.Fatal("not holding with batches running")
	}

	one := newSlots(1)
	one.settleMax = 0 // one writer, as Worker.New sets it
	if !start(one) {
		t.Fatal("the one batch refused")
	}
	one.settle()
	if start(one) {
		t.Fatal("a second batch started beside a settling one with one writer")
	}
	if !one.holding() {
		t.Fatal("not holding with a batch settling")
	}
	one.endHeld("q", true, true)
	if !start(one) {
		t.Fatal("no batch started once the settling one ended")
	}
}
