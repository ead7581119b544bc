package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// When Sluice runs as root, each sandboxed run holds a uid of its own (and the gid of the same
// number) from firstUID on, for as long as it runs, and its scratch directory is that uid's: a
// tool cannot read, write, signal or trace another run's files or processes even where it could
// name them. The range lies above the ones distributions and systemd give accounts (below
// 65536) and containers (524288 to 1879048191), so no account's files are a sandbox's; there
// are as many uids as runs may be sandboxed at once on a machine.
const (
	firstUID = 1879048192
	uidCount = 4096
)

// uidLockDir holds a lock file per sandbox uid in use or used before. A uid is held by an
// exclusive flock on its file, which every Sluice process on the machine respects and the
// kernel releases when the holder closes it or dies.
func uidLockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "sluice-sandbox-uids")
	if fi, err := os.Stat("/run"); err == nil && fi.IsDir() {
		dir = "/run/sluice-sandbox-uids"
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox: make the uid lock dir: %w", err)
	}
	// Another user who made the directory first could hand two runs the same uid.
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("sandbox: uid lock dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("sandbox: uid lock dir %s is not a directory only root may write to: remove it", dir)
	}
	return dir, nil
}

// holdUID returns the lowest sandbox uid no run on this machine holds, and the function that
// returns it. The caller returns it once nothing runs as that uid any more.
func holdUID() (int, func(), error) {
	dir, err := uidLockDir()
	if err != nil {
		return 0, nil, err
	}
	for uid := firstUID; uid < firstUID+uidCount; uid++ {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return 0, nil, fmt.Errorf("sandbox: hold uid %d: %w", uid, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return 0, nil, fmt.Errorf("sandbox: hold uid %d: %w", uid, err)
		}
		return uid, func() { f.Close() }, nil
	}
	return 0, nil, fmt.Errorf("sandbox: all %d sandbox uids are held: too many converters at once", uidCount)
}
