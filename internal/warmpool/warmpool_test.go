package warmpool

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
)

// fake is a converter whose work the test sets.
type fake struct {
	mu      sync.Mutex
	id      int
	busy    bool
	retired bool
	gone    chan struct{}
}

func (f *fake) Retire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.retired {
		f.retired = true
		close(f.gone)
	}
}

func (f *fake) Retired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retired
}

func (f *fake) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.busy
}

func (f *fake) Gone() <-chan struct{} { return f.gone }

// TestPool: one converter per job, kept until retired; at most max at once, an idle one of
// another job evicted for a new job and a busy one not; a spare started after two jobs and
// handed to the next; Close retires them all.
func TestPool(t *testing.T) {
	t.Parallel()
	var p Pool[*fake]
	var mu sync.Mutex
	var made []*fake
	start := func() (*fake, error) {
		mu.Lock()
		defer mu.Unlock()
		f := &fake{id: len(made) + 1, gone: make(chan struct{})}
		made = append(made, f)
		return f, nil
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(made)
	}
	c1, ok := p.Get(1, 2, start)
	if !ok || c1.id != 1 {
		t.Fatalf("job 1: %v %v", c1, ok)
	}
	if again, _ := p.Get(1, 2, start); again != c1 {
		t.Errorf("job 1 got another converter while its own lives")
	}
	c1.busy = true
	c2, _ := p.Get(2, 2, start)
	if c2 == c1 {
		t.Fatalf("jobs 1 and 2 share a converter")
	}
	// Two jobs served: a spare is on its way.
	poll.Until(t, time.Minute, "a spare", func() (bool, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.hasSpare, fmt.Sprintf("%d converters made", count())
	})
	// Job 3 finds two converters: job 1's busy, job 2's idle — evicted, and job 3 takes the
	// spare.
	c3, ok := p.Get(3, 2, start)
	if !ok || c3.id != 3 {
		t.Fatalf("job 3 got %v (ok %v), want the spare", c3, ok)
	}
	if !c2.Retired() || c1.Retired() {
		t.Errorf("evicted: job 1's %v, job 2's %v; want job 2's only", c1.Retired(), c2.Retired())
	}
	// Both busy: job 4 gets none.
	c3.busy = true
	if c, ok := p.Get(4, 2, start); ok {
		t.Errorf("job 4 got %v while two busy converters serve other jobs", c)
	}
	// A retired converter is replaced.
	c1.Retire()
	if c, _ := p.Get(1, 2, start); c == c1 {
		t.Errorf("job 1 kept its retired converter")
	}
	p.Close()
	// A spare being started while Close ran is retired once it is up.
	poll.Until(t, time.Minute, "every converter retired after Close", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range made {
			if !f.Retired() {
				return false, fmt.Sprintf("converter %d", f.id)
			}
		}
		return true, ""
	})
	if _, ok := p.Job(1); ok {
		t.Errorf("Close left job 1's converter in the pool")
	}
	if _, ok := p.Get(5, 2, func() (*fake, error) { return nil, errors.New("no") }); ok {
		t.Errorf("Get reported a converter when start failed")
	}
}

// TestPrestart: Prestart starts a spare even before the pool has served two jobs, only one at a
// time, and the job whose converter retired takes it.
func TestPrestart(t *testing.T) {
	t.Parallel()
	var p Pool[*fake]
	var mu sync.Mutex
	made := 0
	start := func() (*fake, error) {
		mu.Lock()
		defer mu.Unlock()
		made++
		return &fake{id: made, gone: make(chan struct{})}, nil
	}
	c1, _ := p.Get(1, 2, start)
	p.Prestart(start)
	p.Prestart(start)
	poll.Until(t, time.Minute, "a spare", func() (bool, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.hasSpare && !p.starting, ""
	})
	mu.Lock()
	if made != 2 {
		t.Errorf("%d converters made, want job 1's and one spare", made)
	}
	mu.Unlock()
	c1.Retire()
	if c, _ := p.Get(1, 2, start); c == nil || c.id != 2 {
		t.Errorf("job 1 got %v after its converter retired, want the spare (2)", c)
	}
	p.Close()
}

// TestOffer: a document goes to the next converter while one answers ErrRetry, Tries at most;
// any other answer ends the offer; no converter to be had means cold.
func TestOffer(t *testing.T) {
	t.Parallel()
	other := errors.New("render failed")
	for _, tc := range []struct {
		name    string
		answers []error // converter i's answer; nil converts
		none    bool    // get finds no converter
		want    error
		tried   int
	}{
		{name: "first", answers: []error{nil}, tried: 1},
		{name: "third", answers: []error{ErrRetry, ErrRetry, nil}, tried: 3},
		{name: "all refuse", answers: []error{ErrRetry, ErrRetry, ErrRetry, nil}, want: ErrRetry, tried: Tries},
		{name: "other error", answers: []error{ErrRetry, other}, want: other, tried: 2},
		{name: "none", none: true, want: ErrRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tried := 0
			got, err := Offer(func() (int, bool) { return tried, !tc.none }, func(i int) (string, error) {
				tried++
				if err := tc.answers[i]; err != nil {
					return "", err
				}
				return "pdf", nil
			})
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) || tried != tc.tried {
				t.Fatalf("Offer = %q, %v after %d converters; want error %v after %d", got, err, tried, tc.want, tc.tried)
			}
			if err == nil && got != "pdf" {
				t.Fatalf("Offer = %q, want the converter's answer", got)
			}
		})
	}
}
