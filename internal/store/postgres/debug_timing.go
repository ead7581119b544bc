package postgres

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var debugTiming = os.Getenv("SLUICE_DEBUG_PG") != ""

type timingStat struct {
	n int
	d time.Duration
}

var timingMu sync.Mutex
var timings = map[string]*timingStat{}

func record(sql string, d time.Duration) {
	if len(sql) > 70 {
		sql = sql[:70]
	}
	timingMu.Lock()
	st := timings[sql]
	if st == nil {
		st = &timingStat{}
		timings[sql] = st
	}
	st.n++
	st.d += d
	timingMu.Unlock()
}

// DumpTimings prints per-statement timings (debug).
func DumpTimings() {
	if !debugTiming {
		return
	}
	timingMu.Lock()
	defer timingMu.Unlock()
	type kv struct {
		k string
		v *timingStat
	}
	var all []kv
	for k, v := range timings {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v.d > all[j].v.d })
	for _, e := range all {
		fmt.Fprintf(os.Stderr, "%6d %10v %8v  %q\n", e.v.n, e.v.d.Round(time.Millisecond), (e.v.d / time.Duration(e.v.n)).Round(time.Microsecond), e.k)
	}
}

type timed struct{ q querier }

func (t timed) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t0 := time.Now()
	defer func() { record(sql, time.Since(t0)) }()
	return t.q.Exec(ctx, sql, args...)
}

func (t timed) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t0 := time.Now()
	defer func() { record(sql, time.Since(t0)) }()
	return t.q.Query(ctx, sql, args...)
}

func (t timed) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t0 := time.Now()
	defer func() { record(sql, time.Since(t0)) }()
	return t.q.QueryRow(ctx, sql, args...)
}

func maybeTimed(q querier) querier {
	if debugTiming {
		return timed{q}
	}
	return q
}

func (t timed) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	t0 := time.Now()
	defer func() { record(fmt.Sprintf("BATCH %d x %s", b.Len(), b.QueuedQueries[0].SQL), time.Since(t0)) }()
	return t.q.SendBatch(ctx, b)
}
