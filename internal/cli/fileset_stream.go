package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// resultStream appends a fileset job's results to a writer as its requests end: each request's
// result line, then — for a single-file success — its dataset-file result line (whose
// request's ingest_type is dataset-file). Into a file (openResultStream) it writes each
// request's lines exactly once across kills: a state file beside it records the job, the
// length of the file and the requests written, and is replaced (atomically) only after the
// lines it counts are fsynced; a run that resumes the job cuts the file back to that length
// and writes again what followed.
type resultStream struct {
	n     *node.Node
	jobID int64
	w     *bufio.Writer
	file  *os.File // nil for a writer that is not a file (stdout): no state
	state string   // the state file's path
	// offset is the file's length the state records; written the roots whose lines are in it,
	// as sorted ranges of item ids.
	offset  int64
	written idRanges
	tally   map[string]int
	// firstRoot is the job's first root item: results are scanned from the end of the range
	// of written ids that starts there.
	firstRoot int64
}

// streamState is the state file's content.
type streamState struct {
	JobID   int64    `json:"job_id"`
	Offset  int64    `json:"offset"`
	Written idRanges `json:"written"`
}

// maxStateBytes bounds the state file read back.
const maxStateBytes = 256 << 20

// openResultStream opens path for the results of the job: the same job's stream resumes (the
// file cut back to the length its state records); another job's starts the file anew.
func openResultStream(n *node.Node, jobID int64, path string) (*resultStream, error) {
	s := &resultStream{n: n, jobID: jobID, state: stateFile(path), tally: map[string]int{}}
	var st streamState
	b, err := readBounded(s.state, maxStateBytes)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("results: the state file %s is not what sluice wrote (%v); remove it and %s to start the results anew", s.state, err, path)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("results: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if st.JobID != jobID {
		st = streamState{JobID: jobID}
	}
	if err := f.Truncate(st.Offset); err != nil {
		f.Close()
		return nil, fmt.Errorf("results: %w", err)
	}
	if _, err := f.Seek(st.Offset, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("results: %w", err)
	}
	s.file, s.w, s.offset, s.written = f, bufio.NewWriter(f), st.Offset, st.Written
	return s, nil
}

// newResultStream streams the job's results to w, with no state.
func newResultStream(n *node.Node, jobID int64, w io.Writer) *resultStream {
	return &resultStream{n: n, jobID: jobID, w: bufio.NewWriter(w), tally: map[string]int{}}
}

func stateFile(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".sluice-state")
}

func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s is over %d bytes", path, max)
	}
	return b, err
}

// follow writes results as they come until ctx ends, polling at most every 250 ms and at
// least four times as long as a poll takes.
func (s *resultStream) follow(ctx context.Context) error {
	wait := 250 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		start := time.Now()
		if err := s.poll(ctx, false); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wait = max(250*time.Millisecond, 4*time.Since(start))
	}
}

// poll writes the results not yet written. all scans the job's results from its first item
// (the last poll: whatever the ranges say, nothing is left out); otherwise from the end of
// the written range that starts at the job's first root.
func (s *resultStream) poll(ctx context.Context, all bool) error {
	if s.firstRoot == 0 {
		zero := int64(0)
		roots, err := s.n.Store.ItemList(ctx, store.ItemListParams{JobID: s.jobID, ParentID: &zero, Limit: 1})
		if err != nil {
			return err
		}
		if len(roots) > 0 {
			s.firstRoot = roots[0].ID
		}
	}
	var after int64
	if !all && len(s.written) > 0 && s.written[0][0] == s.firstRoot {
		after = s.written[0][1]
	}
	var fresh []int64
	seen := map[int64]bool{}
	counted := map[string]int{}
	for {
		outs, err := s.n.Store.OutputList(ctx, store.OutputListParams{JobID: s.jobID, Kind: fileset.KindResult, AfterItem: after, Limit: 1000})
		if err != nil {
			return s.rollback(err)
		}
		for _, o := range outs {
			if all {
				counted[statusOf(o.Value)]++
			}
			if s.written.has(o.ItemID) || seen[o.ItemID] {
				continue
			}
			if err := s.write(ctx, o); err != nil {
				return s.rollback(err)
			}
			fresh = append(fresh, o.ItemID)
			seen[o.ItemID] = true
		}
		if len(outs) < 1000 {
			break
		}
		after = outs[len(outs)-1].ItemID
	}
	if all {
		// Every result of the job was scanned: the tally is the job's, not this run's.
		s.tally = counted
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := s.commit(fresh); err != nil {
		return s.rollback(err)
	}
	return nil
}

func statusOf(result []byte) string {
	var r struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(result, &r)
	return r.Status
}

// rollback drops the lines a poll wrote but did not commit, so that the next poll writes them
// once (a file only: what went to another writer is gone).
func (s *resultStream) rollback(err error) error {
	if s.file == nil {
		return err
	}
	s.w.Reset(s.file)
	if terr := s.file.Truncate(s.offset); terr != nil {
		return errors.Join(err, terr)
	}
	if _, serr := s.file.Seek(s.offset, io.SeekStart); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// write writes a request's result and, for a single-file success, its dataset-file result.
func (s *resultStream) write(ctx context.Context, o *record.Output) error {
	status := statusOf(o.Value)
	s.tally[status]++
	s.w.Write(o.Value)
	s.w.WriteByte('\n')
	if status != fileset.StatusSuccessFile {
		return nil
	}
	// Written in the same transaction as the result, so present now.
	outs, err := s.n.Store.OutputList(ctx, store.OutputListParams{JobID: s.jobID, Kind: fileset.KindFileResult, AfterItem: o.ItemID - 1, Limit: 1})
	if err != nil {
		return err
	}
	if len(outs) == 1 && outs[0].ItemID == o.ItemID {
		s.w.Write(outs[0].Value)
		s.w.WriteByte('\n')
	}
	return nil
}

// commit makes the lines written durable, then records them in the state file.
func (s *resultStream) commit(fresh []int64) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	written := slices.Clone(s.written)
	for _, id := range fresh {
		written = written.add(id)
	}
	if s.file == nil {
		s.written = written
		return nil
	}
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	off, err := s.file.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	b, _ := json.Marshal(streamState{JobID: s.jobID, Offset: off, Written: written})
	if err := writeFileAtomic(s.state, b); err != nil {
		return fmt.Errorf("write results' state: %w", err)
	}
	if d, err := os.Open(filepath.Dir(s.state)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	s.offset, s.written = off, written
	return nil
}

// close flushes and closes the file (the state file stays: a later run of the same job finds
// every result written).
func (s *resultStream) close() error {
	err := s.w.Flush()
	if s.file != nil {
		if cerr := s.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// idRanges is a set of item ids as sorted, disjoint, non-adjacent closed ranges.
type idRanges [][2]int64

func (r idRanges) has(id int64) bool {
	i, found := slices.BinarySearchFunc(r, id, func(e [2]int64, id int64) int {
		switch {
		case e[1] < id:
			return -1
		case e[0] > id:
			return 1
		}
		return 0
	})
	return found && i < len(r)
}

func (r idRanges) add(id int64) idRanges {
	if r.has(id) {
		return r
	}
	i, _ := slices.BinarySearchFunc(r, id, func(e [2]int64, id int64) int {
		if e[1] < id {
			return -1
		}
		return 1
	})
	// r[i] is the first range after id (r[i-1] the last before).
	joinPrev := i > 0 && r[i-1][1] == id-1
	joinNext := i < len(r) && r[i][0] == id+1
	switch {
	case joinPrev && joinNext:
		r[i-1][1] = r[i][1]
		return slices.Delete(r, i, i+1)
	case joinPrev:
		r[i-1][1] = id
	case joinNext:
		r[i][0] = id
	default:
		r = slices.Insert(r, i, [2]int64{id, id})
	}
	return r
}
