// Package deflate compresses small values kept at rest — rows of the blob store's small.db,
// entries of the conversion cache, the text of items in SQLite — with the standard library's DEFLATE, reusing compressors:
// making one costs about 0.6 MB, more than the values it is for.
package deflate

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/klauspost/compress/flate"
	"io"
	"sync"
)

// Shrink returns b deflated and true when that takes at most seven eighths of b's bytes, and
// nil and false otherwise (b is already compressed, or too short to gain). It is safe for
// concurrent use.
func Shrink(b []byte) ([]byte, bool) {
	if len(b) < 64 {
		return nil, false
	}
	w := writers.Get().(*writer)
	defer writers.Put(w)
	w.buf.Reset()
	w.z.Reset(&w.buf)
	if _, err := w.z.Write(b); err != nil || w.z.Close() != nil || w.buf.Len() > len(b)-len(b)/8 {
		return nil, false
	}
	return bytes.Clone(w.buf.Bytes()), true
}

// Inflate returns the size bytes that z, a result of [Shrink], holds. It returns an error when
// z does not inflate to exactly size bytes.
func Inflate(z []byte, size int64) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("inflate: negative size %d", size)
	}
	out := make([]byte, size)
	r := reader(bytes.NewReader(z))
	defer readers.Put(r)
	n, err := io.ReadFull(r, out)
	if err == nil {
		// The stream must end here, whole: more bytes than the size are as wrong as fewer, and
		// a stream cut after its last byte is a damaged value.
		var one [1]byte
		if m, rerr := io.ReadFull(r, one[:]); m != 0 {
			err = errors.New("more bytes than expected")
		} else if rerr != io.EOF {
			err = rerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("inflate %d bytes to %d (%d read): %w", len(z), size, n, err)
	}
	return out, nil
}

// readers are Inflate's decompressors, reused: with a new one each, a 1 KB value's inflate
// allocated 39 KB and took twice as long (BenchmarkInflate: 28–33 µs, pooled 14–16 µs).
var readers sync.Pool

// reader returns a decompressor of the pool (or a new one) reading r.
func reader(r io.Reader) io.Reader {
	if v, ok := readers.Get().(io.Reader); ok {
		if v.(flate.Resetter).Reset(r, nil) == nil {
			return v
		}
	}
	return flate.NewReader(r)
}

// writer is Shrink's reusable state.
type writer struct {
	buf bytes.Buffer
	z   *flate.Writer
}

var writers = sync.Pool{New: func() any {
	// The default level: callers pass only values that may compress (the blob store skips
	// compressed formats), 1–2 KB each, for which it costs tens of microseconds and keeps
	// about 0.3 KB per text document more off the disk than the fastest level (measured).
	z, _ := flate.NewWriter(io.Discard, flate.DefaultCompression)
	return &writer{z: z}
}}
