package objects

import (
	"bufio"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// entry is what a [runSorter] sorts: a 128-bit key (a, b) and a value c, ordered by all three.
type entry struct{ a, b, c uint64 }

func compareEntries(x, y entry) int {
	if c := cmp.Compare(x.a, y.a); c != 0 {
		return c
	}
	if c := cmp.Compare(x.b, y.b); c != 0 {
		return c
	}
	return cmp.Compare(x.c, y.c)
}

// runLen is how many entries a [runSorter] holds in memory (384 KiB): more are sorted in runs
// of this length, written to a temporary file and merged.
const runLen = 16 << 10

const entrySize = 24

// runSorter sorts any number of entries in a memory bounded by [runLen]: an external merge
// sort whose runs are written to one temporary file. The zero value is ready to use; Close
// removes the file. It is not safe for concurrent use.
type runSorter struct {
	buf  []entry
	f    *os.File
	w    *bufio.Writer
	runs []int64 // each run's length, in entries, in the order written
}

func (s *runSorter) add(e entry) error {
	if s.buf == nil {
		s.buf = make([]entry, 0, runLen)
	}
	if len(s.buf) == runLen {
		if err := s.spill(); err != nil {
			return err
		}
	}
	s.buf = append(s.buf, e)
	return nil
}

// spill sorts the entries in memory and writes them to the file as a run.
func (s *runSorter) spill() error {
	if s.f == nil {
		f, err := os.CreateTemp("", "sluice-sheet-sort-*")
		if err != nil {
			return fmt.Errorf("create a file to sort the sheet's rows: %w", err)
		}
		s.f, s.w = f, bufio.NewWriter(f)
	}
	slices.SortFunc(s.buf, compareEntries)
	var b [entrySize]byte
	for _, e := range s.buf {
		binary.LittleEndian.PutUint64(b[0:], e.a)
		binary.LittleEndian.PutUint64(b[8:], e.b)
		binary.LittleEndian.PutUint64(b[16:], e.c)
		if _, err := s.w.Write(b[:]); err != nil {
			return fmt.Errorf("write the sheet's sort file: %w", err)
		}
	}
	s.runs = append(s.runs, int64(len(s.buf)))
	s.buf = s.buf[:0]
	return nil
}

// each calls fn with every entry added, in order.
func (s *runSorter) each(fn func(entry) error) error {
	if s.f == nil { // all in memory
		slices.SortFunc(s.buf, compareEntries)
		for _, e := range s.buf {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write the sheet's sort file: %w", err)
	}
	h := &runHeap{}
	var off int64
	for _, n := range s.runs {
		r := &run{r: bufio.NewReaderSize(io.NewSectionReader(s.f, off*entrySize, n*entrySize), 4096)}
		off += n
		ok, err := r.next()
		if err != nil {
			return err
		}
		if ok {
			h.rs = append(h.rs, r)
		}
	}
	heap.Init(h)
	for len(h.rs) > 0 {
		r := h.rs[0]
		if err := fn(r.head); err != nil {
			return err
		}
		ok, err := r.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// Close removes the sorter's file, if it wrote one.
func (s *runSorter) Close() error {
	if s.f == nil {
		return nil
	}
	name := s.f.Name()
	err := s.f.Close()
	return errors.Join(err, os.Remove(name))
}

type run struct {
	r    *bufio.Reader
	head entry
}

func (r *run) next() (bool, error) {
	var b [entrySize]byte
	if _, err := io.ReadFull(r.r, b[:]); errors.Is(err, io.EOF) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read the sheet's sort file: %w", err)
	}
	r.head = entry{binary.LittleEndian.Uint64(b[0:]), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])}
	return true, nil
}

type runHeap struct{ rs []*run }

func (h *runHeap) Len() int           { return len(h.rs) }
func (h *runHeap) Less(i, j int) bool { return compareEntries(h.rs[i].head, h.rs[j].head) < 0 }
func (h *runHeap) Swap(i, j int)      { h.rs[i], h.rs[j] = h.rs[j], h.rs[i] }
func (h *runHeap) Push(x any)         { h.rs = append(h.rs, x.(*run)) }
func (h *runHeap) Pop() any {
	r := h.rs[len(h.rs)-1]
	h.rs = h.rs[:len(h.rs)-1]
	return r
}
