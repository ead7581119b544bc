package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Multi-row inserts go in chunks of these sizes, largest first, so that a handful of cached
// statements covers any count: one statement per row costs SQLite's per-statement work (bind,
// step, reset) for every row, a VALUES list pays it once per chunk.
var chunkSizes = []int{64, 16, 4, 1}

// valuesStmt returns head followed by n copies of row, comma-separated, then tail.
func valuesStmt(head, row, tail string, n int) string {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	return b.String()
}

// inChunks calls fn with successive chunks of [0, n) sized from chunkSizes.
func inChunks(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		size := 1
		for _, c := range chunkSizes {
			if n-lo >= c {
				size = c
				break
			}
		}
		if err := fn(lo, lo+size); err != nil {
			return err
		}
		lo += size
	}
	return nil
}

func (q *queries) EventInsertMany(ctx context.Context, es []store.EventInsertParams) error {
	return inChunks(len(es), func(lo, hi int) error {
		query := valuesStmt(`INSERT INTO events (item_id, name, created_at) VALUES `, `(?, ?, ?)`, ` ON CONFLICT DO NOTHING`, hi-lo)
		args := make([]any, 0, 3*(hi-lo))
		for _, e := range es[lo:hi] {
			args = append(args, e.ItemID, e.Name, micros(e.Now))
		}
		if _, err := q.exec(ctx, query, args...); err != nil {
			return fmt.Errorf("insert %d events: %w", hi-lo, err)
		}
		return nil
	})
}

func (q *queries) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) error {
	return inChunks(len(ps), func(lo, hi int) error {
		query := valuesStmt(`INSERT INTO tasks (job_id, item_id, step, action, queue, state, attempt, error, max_attempts, sort_key, progress_weight, created_at, run_after, started_at, finished_at, last_worker) VALUES `,
			`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)`, ` ON CONFLICT (item_id, step) DO NOTHING`, hi-lo)
		args := make([]any, 0, 15*(hi-lo))
		for _, p := range ps[lo:hi] {
			state, attempt, errMsg, ended, worker := record.TaskReady, 0, "", int64(0), ""
			if p.Done != nil {
				state, attempt, errMsg, ended, worker = p.Done.State, p.Done.Attempt(), p.Done.Error, micros(p.Now), p.Done.Worker
			}
			args = append(args, p.JobID, p.ItemID, p.Step, p.Action, p.Queue, state, attempt, errMsg, p.MaxAttempts, p.SortKey, p.ProgressWeight, micros(p.Now), ended, ended, worker)
		}
		if _, err := q.exec(ctx, query, args...); err != nil {
			return fmt.Errorf("insert %d tasks: %w", hi-lo, err)
		}
		return nil
	})
}

func (q *queries) ItemColorMany(ctx context.Context, ids []int64, colored []float64) error {
	if len(ids) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%d,%s]", id, strconv.FormatFloat(colored[i], 'g', -1, 64))
	}
	b.WriteByte(']')
	_, err := q.exec(ctx, `UPDATE items SET colored = j.value ->> 1 FROM json_each(?) AS j WHERE items.id = j.value ->> 0`, b.String())
	if err != nil {
		return fmt.Errorf("color %d items: %w", len(ids), err)
	}
	return nil
}

// ItemInsertRoots is ItemInsertMany: with SQLite in process a read costs no round trip, so
// nothing is written ahead of one.
func (q *queries) ItemInsertRoots(ctx context.Context, _ *record.Job, ps []store.ItemInsertParams) ([]*record.Item, bool, error) {
	items, err := q.ItemInsertMany(ctx, ps)
	return items, false, err
}

// ItemInsertMany inserts one row at a time: with SQLite in process a statement costs no round
// trip, and ItemInsert already builds the new item without reading it back.
func (q *queries) ItemInsertMany(ctx context.Context, ps []store.ItemInsertParams) ([]*record.Item, error) {
	var out []*record.Item
	for _, p := range ps {
		it, inserted, err := q.ItemInsert(ctx, p)
		if err != nil {
			return nil, err
		}
		if inserted {
			out = append(out, it)
		}
	}
	return out, nil
}
