package node

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// holdLock takes dir's lock through an open file of its own (flock locks belong to an open
// file, so this conflicts with LockDataDir in the same process as another process would).
func holdLock(t *testing.T, dir string) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestLockDataDir: a lock held past lockWait is ErrLocked; one released while LockDataDir
// waits — a killed process's last child ending — is taken. (Not parallel: it sets the package's
// lock variables.)
func TestLockDataDir(t *testing.T) {
	lockWait, lockPoll = 200*time.Millisecond, time.Millisecond
	busy := make(chan struct{}, 1)
	lockBusy = func() {
		select {
		case busy <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { lockWait, lockPoll, lockBusy = 2*time.Second, 10*time.Millisecond, nil })

	dir := t.TempDir()
	held := holdLock(t, dir)
	if f, err := LockDataDir(dir); !errors.Is(err, ErrLocked) {
		f.Close()
		t.Fatalf("a held lock: %v, want ErrLocked", err)
	}
	<-busy // drained: the failed call found it held

	lockWait = time.Hour // released while it waits: it must not need the hour
	var (
		wg  sync.WaitGroup
		f   *os.File
		err error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		f, err = LockDataDir(dir)
	}()
	<-busy // it found the lock held and waits
	held.Close()
	wg.Wait()
	if err != nil {
		t.Fatalf("a lock released during the wait: %v", err)
	}
	f.Close()
}
