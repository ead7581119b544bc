package objects

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// spool keeps a sheet's records in a temporary file between the reading of the sheet and the
// checking of its rows, so that neither holds more than a chunk of them: each record is its
// field count then each field's length and bytes, as uvarints. Close removes the file.
type spool struct {
	f *os.File
	w *bufio.Writer
}

func newSpool() (*spool, error) {
	f, err := os.CreateTemp("", "sluice-sheet-*")
	if err != nil {
		return nil, fmt.Errorf("create a file to hold the sheet's rows: %w", err)
	}
	return &spool{f: f, w: bufio.NewWriter(f)}, nil
}

// write adds a record; an error writing is reported by reader (a bufio.Writer's is sticky).
func (s *spool) write(rec []string) {
	var b [binary.MaxVarintLen64]byte
	put := func(n int) {
		_, _ = s.w.Write(b[:binary.PutUvarint(b[:], uint64(n))])
	}
	put(len(rec))
	for _, f := range rec {
		put(len(f))
		_, _ = s.w.WriteString(f)
	}
}

// reader flushes what was written and returns a reader of the records from the first.
func (s *spool) reader() (*spoolReader, error) {
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("write the sheet's rows: %w", err)
	}
	return &spoolReader{r: bufio.NewReader(io.NewSectionReader(s.f, 0, 1<<62))}, nil
}

func (s *spool) Close() error {
	name := s.f.Name()
	return errors.Join(s.f.Close(), os.Remove(name))
}

type spoolReader struct{ r *bufio.Reader }

// next returns the next record, or io.EOF after the last.
func (r *spoolReader) next() ([]string, error) {
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return nil, err // io.EOF at the end
	}
	rec := make([]string, n)
	for i := range rec {
		l, err := binary.ReadUvarint(r.r)
		if err != nil {
			return nil, fmt.Errorf("read the sheet's rows: %w", noEOF(err))
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(r.r, b); err != nil {
			return nil, fmt.Errorf("read the sheet's rows: %w", noEOF(err))
		}
		rec[i] = string(b)
	}
	return rec, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
