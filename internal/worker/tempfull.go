package worker

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// tempFullFree is the free space under which a failed attempt's temp dir counts as full.
const tempFullFree = 64 << 10

// tempDirFull returns err as a full-disk error (wrapping ENOSPC, which the engine does not count
// as an attempt: the task waits engine.FullBackoff and runs again) when the attempt's temp dir
// dir is on a file system with less than 64 KiB or 1% free, or err says no space was left;
// else err as it is. An external tool that runs out of space reports it as an exit status and
// words on its stderr, never as ENOSPC the worker could see, so the file system is asked.
func tempDirFull(dir string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return err
	}
	var st syscall.Statfs_t
	if serr := syscall.Statfs(dir, &st); serr != nil {
		return err
	}
	free, total := st.Bavail*uint64(st.Bsize), st.Blocks*uint64(st.Bsize)
	if free >= tempFullFree && free*100 >= total && !strings.Contains(strings.ToLower(err.Error()), "no space left on device") {
		return err
	}
	return fmt.Errorf("the worker's temp dir is full (%s free of %s): %w; the attempt is given back and the task runs again once there is space (the action said: %v)",
		sizeWords(free), sizeWords(total), &os.PathError{Op: "write", Path: dir, Err: syscall.ENOSPC}, err)
}

// sizeWords is a byte count as a person reads it: 12 KiB, 2.0 MiB.
func sizeWords(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
