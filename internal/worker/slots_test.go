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
			s.endHeld("q", false)
		}, true},
		{"woken while it ran", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.endHeld("q", false)
		}, false},
		{"woken for any queue while it ran", func(s *slots) {
			s.startHeld("q")
			s.wakeAny()
			s.endHeld("q", false)
		}, false},
		{"a later batch took the wake", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.startHeld("q")
			s.endHeld("q", false) // the first ends while the second runs
		}, true},
		{"woken again after the later batch started", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.startHeld("q")
			s.wakeQueues([]string{"q"})
			s.endHeld("q", false)
			s.endHeld("q", false)
		}, false},
		{"another queue's wake", func(s *slots) {
			s.startHeld("q")
			s.wakeQueues([]string{"other"})
			s.endHeld("q", false)
		}, true},
		{"a full batch after an idle one", func(s *slots) {
			s.startHeld("q")
			s.startHeld("q")
			s.endHeld("q", false)
			s.endHeld("q", true) // it filled its limit: there may be more
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
