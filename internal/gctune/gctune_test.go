package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestLimitFor(t *testing.T) {
	for _, tt := range []struct {
		live uint64
		want int64
	}{
		{0, floor},
		{30 << 20, floor},
		{48 << 20, floor},
		{100 << 20, 200 << 20},
		{1 << 30, 2 << 30},
	} {
		if got := limitFor(tt.live); got != tt.want {
			t.Errorf("limitFor(%d MiB) = %d MiB, want %d MiB", tt.live>>20, got>>20, tt.want>>20)
		}
	}
}

// TestFollowLiveHeap checks that the limit follows the live heap from one collection to the
// next: up while 150 MiB are held, back to the floor once they are garbage.
func TestFollowLiveHeap(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(floor))
	follow()
	held := make([][]byte, 150)
	for i := range held {
		held[i] = make([]byte, 1<<20)
		held[i][0] = 1
	}
	// Each runtime.GC returns once its cycle ended; the finalizer that sets the limit runs
	// right after, on the finalizers' goroutine: a few cycles see it done.
	limit := func() int64 { return debug.SetMemoryLimit(-1) }
	for i := 0; i < 100 && limit() < 300<<20; i++ {
		runtime.GC()
	}
	if got := limit(); got < 300<<20 {
		t.Fatalf("limit %d MiB with 150 MiB live, want at least 300 MiB", got>>20)
	}
	runtime.KeepAlive(held)
	held = nil
	for i := 0; i < 100 && limit() > floor; i++ {
		runtime.GC()
	}
	if got := limit(); got != floor {
		t.Fatalf("limit %d MiB once the 150 MiB are garbage, want the floor, %d MiB", got>>20, floor>>20)
	}
}
