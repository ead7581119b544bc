package cli

import "fmt"

// minFreeBytes is the free space below which the data dir's disk counts as full: SQLite and the
// blob store cannot write there any more, and every commit and blob fails until space returns.
const minFreeBytes = 1 << 20

// diskFull returns an error naming the data dir when its disk has less than [minFreeBytes] free
// for this user, and nil otherwise (or when the space cannot be learned).
func diskFull(dir string) error {
	free, ok := freeBytes(dir)
	if !ok || free >= minFreeBytes {
		return nil
	}
	return fmt.Errorf("the disk of the data dir %s is full (%s free)", dir, formatBytes(float64(free)))
}

// diskFullError explains err by a full disk when the data dir's disk is full, saying how to go on.
func diskFullError(dir string, err error) error {
	if full := diskFull(dir); full != nil {
		return fmt.Errorf("%w; free some space and run the same command again: nothing is lost (%v)", full, err)
	}
	return err
}
