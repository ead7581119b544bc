package dbclock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/dbclock"
)

// fakeDB is a database whose clock is the local clock plus skew; err fails its reads.
type fakeDB struct {
	local func() time.Time
	skew  time.Duration
	err   error
}

func (f *fakeDB) DatabaseNow(context.Context) (time.Time, error) {
	if f.err != nil {
		return time.Time{}, f.err
	}
	return f.local().Add(f.skew), nil
}

// TestClockFollowsDatabase: a machine whose clock is 5 minutes fast or slow reads the database's
// time once synced, to within the round trip, and follows a change of the offset at the next
// sync; a failed sync keeps the last offset.
func TestClockFollowsDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		skew time.Duration // the database's clock minus this machine's
	}{
		{name: "machine 5 minutes fast", skew: -5 * time.Minute},
		{name: "machine 5 minutes slow", skew: 5 * time.Minute},
		{name: "in step", skew: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &fakeDB{local: time.Now, skew: tc.skew}
			c := dbclock.New(dbclock.Config{Source: db})
			if d := c.Now().Sub(time.Now()).Abs(); d > time.Second {
				t.Fatalf("before the first sync the clock is %s off the local one, want the local clock", d)
			}
			if err := c.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := time.Now().Add(tc.skew)
			if d := c.Now().Sub(want).Abs(); d > 100*time.Millisecond {
				t.Errorf("Now is %s off the database's time", d)
			}
			if d := (c.Offset() - tc.skew).Abs(); d > 100*time.Millisecond {
				t.Errorf("Offset %s, want %s", c.Offset(), tc.skew)
			}
			db.skew += time.Hour // the machine's clock was stepped back an hour
			if err := c.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if d := c.Now().Sub(time.Now().Add(db.skew)).Abs(); d > 100*time.Millisecond {
				t.Errorf("after the step, Now is %s off the database's time", d)
			}
			db.err = errors.New("failing over")
			if err := c.Sync(t.Context()); !errors.Is(err, db.err) {
				t.Errorf("Sync of a failing database: %v", err)
			}
			if d := (c.Offset() - db.skew).Abs(); d > 100*time.Millisecond {
				t.Errorf("a failed sync changed the offset to %s", c.Offset())
			}
		})
	}
}

// TestClockStartStop: Stop ends the measurements Start began, also when Start was never called,
// and is idempotent.
func TestClockStartStop(t *testing.T) {
	t.Parallel()
	c := dbclock.New(dbclock.Config{Source: &fakeDB{local: time.Now}, Interval: time.Millisecond})
	c.Start(t.Context())
	c.Stop()
	c.Stop()
	dbclock.New(dbclock.Config{Source: &fakeDB{local: time.Now}}).Stop()
}
