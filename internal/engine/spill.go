package engine

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// spillWritesOver is how many bytes of encoded domain writes an [Effects] holds in memory: past
// it, they move to a temp file of the Effects' own and wait there for the task's transaction,
// which reads them back in order as it applies them. A task that writes a row per line of a
// 100,000-line sheet thus holds a megabyte of its writes, not all of them, however long the
// sheet — and its writes still commit with its result, in its transaction.
const spillWritesOver = 1 << 20

// applyBatchBytes bounds the payload bytes handed to a domain's Apply in one call: a task's
// writes to one domain come in several calls, in order, when they are more than this.
const applyBatchBytes = 1 << 20

// writeSpill is the temp file an Effects moves its domain writes to, in the engine's
// [Config.TempDir]. The file is removed from
// its directory as soon as it is made, so that nothing is left behind by a process that dies:
// its space is given back when the file is closed, which the runtime does once no Effects (and
// no copy of one) refers to it.
type writeSpill struct {
	f    *os.File
	size int64 // the bytes written, all of them records
	// failed is set when a write to the file failed (a full disk): the Effects keeps its
	// later writes in memory, as it would without the file.
	failed bool
}

// spillSegment is a run of writes in a spill file: the bytes [off, end) hold n records, each
// the write's domain, key and payload, each a uvarint length and its bytes. A segment does not
// change once made, so copies of an Effects may share it.
type spillSegment struct {
	f        *os.File
	off, end int64
	n        int
}

// newWriteSpill makes a spill file in dir, or, when that fails (or dir is empty), in the
// system's temp directory ($TMPDIR).
func newWriteSpill(dir string) (*writeSpill, error) {
	f, err := os.CreateTemp(dir, "sluice-writes-*")
	if err != nil && dir != "" {
		f, err = os.CreateTemp("", "sluice-writes-*")
	}
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return &writeSpill{f: f}, nil
}

// append writes ws to the end of the file and returns the segment that holds them.
func (s *writeSpill) append(ws []DomainWrite) (*spillSegment, error) {
	bw := bufio.NewWriterSize(s.f, 64<<10)
	var n int64
	var hdr [binary.MaxVarintLen64]byte
	put := func(b []byte) {
		k, _ := bw.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(b)))])
		m, _ := bw.Write(b)
		n += int64(k + m)
	}
	for _, w := range ws {
		put([]byte(w.Domain))
		put([]byte(w.Key))
		put(w.Payload)
	}
	if err := bw.Flush(); err != nil {
		s.failed = true
		return nil, err
	}
	seg := &spillSegment{f: s.f, off: s.size, end: s.size + n, n: len(ws)}
	s.size = seg.end
	return seg, nil
}

// each calls fn with each write of the segment, in order.
func (g *spillSegment) each(fn func(DomainWrite) error) error {
	r := bufio.NewReaderSize(io.NewSectionReader(g.f, g.off, g.end-g.off), 64<<10)
	field := func() ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if n > uint64(g.end-g.off) {
			return nil, errors.New("a record longer than its segment")
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return b, err
	}
	for i := range g.n {
		var f [3][]byte
		for j := range f {
			b, err := field()
			if err != nil {
				return fmt.Errorf("read domain write %d of %d back from its spill file: %w", i+1, g.n, err)
			}
			f[j] = b
		}
		if err := fn(DomainWrite{Domain: string(f[0]), Key: string(f[1]), Payload: json.RawMessage(f[2])}); err != nil {
			return err
		}
	}
	return nil
}

// spillWrites moves the writes held in memory since the last segment to the spill file,
// leaving a segment in their place. On an error it leaves them, and the Effects holds its writes
// in memory from then on.
func (ef *Effects) spillWrites() {
	if ef.spill == nil {
		s, err := newWriteSpill(ef.Writes[ef.heldFrom].spillDir)
		if err != nil {
			ef.spill = &writeSpill{failed: true}
			return
		}
		ef.spill = s
	}
	if ef.spill.failed {
		return
	}
	from := ef.heldFrom
	seg, err := ef.spill.append(ef.Writes[from:])
	if err != nil {
		return
	}
	if prev := from - 1; prev >= 0 && ef.Writes[prev].spilled != nil && ef.Writes[prev].spilled.f == seg.f && ef.Writes[prev].spilled.end == seg.off {
		p := ef.Writes[prev].spilled
		seg, from = &spillSegment{f: seg.f, off: p.off, end: seg.end, n: p.n + seg.n}, prev
	}
	ef.Writes[from] = DomainWrite{spilled: seg}
	clear(ef.Writes[from+1:]) // the payloads are in the file now: let them go
	ef.Writes = ef.Writes[:from+1]
	ef.heldFrom, ef.held = len(ef.Writes), 0
}

// WritesSpilled reports whether some of the writes are kept in a spill file rather than in
// [Effects.Writes] itself (where a segment of the file stands for them).
func (ef *Effects) WritesSpilled() bool {
	for _, w := range ef.Writes {
		if w.spilled != nil {
			return true
		}
	}
	return false
}
