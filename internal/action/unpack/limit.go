package unpack

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// countingFile is the archive file with a count of the bytes read from it, the "compressed bytes
// consumed" that progress and stream ratios are measured against. The count is atomic because
// some decompressors (zstd) read ahead in their own goroutines.
type countingFile struct {
	f *os.File
	n atomic.Int64
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) Seek(off int64, whence int) (int64, error) { return c.f.Seek(off, whence) }

// limitError is a limit tripped while reading an entry. fatal limits stop the whole archive.
type limitError struct {
	msg   string
	fatal bool
}

func (e *limitError) Error() string { return e.msg }

// budget is an archive's allowance of expanded bytes, shared by its entries.
type budget struct {
	max, used int64
	factor    float64 // for the message only
	size      int64   // the archive's size, for the message only
}

func (b *budget) exceededError() *limitError {
	return &limitError{fatal: true, msg: fmt.Sprintf(
		"expanded size exceeds the limit of %d bytes (%g× the archive's %d bytes)", b.max, b.factor, b.size)}
}

// entryReader meters one entry's stream on its way into CreateChild. It fails the read (and so
// the child) as soon as a limit trips, so a bomb is never expanded past the limit, and it keeps
// the first error so the caller can tell an entry's failure from the output's.
type entryReader struct {
	r      io.Reader
	n      int64 // bytes of this entry read so far
	budget *budget
	// ratio, when set, checks the compression ratio after each read.
	ratio func(entryBytes int64) error
	err   error // first non-EOF error returned
}

func (e *entryReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.r.Read(p)
	e.n += int64(n)
	e.budget.used += int64(n)
	if e.budget.used > e.budget.max {
		e.err = e.budget.exceededError()
		return 0, e.err
	}
	if e.ratio != nil {
		if rerr := e.ratio(e.n); rerr != nil {
			e.err = rerr
			return 0, e.err
		}
	}
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// ratioError is the per-entry compression ratio limit.
func ratioError(ratio, limit float64) *limitError {
	return &limitError{msg: fmt.Sprintf("compression ratio %.0f:1 exceeds %g:1", ratio, limit)}
}
