package docsearch_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// BenchmarkSearch runs [benchmarkSearch] per driver on 100,000 documents (5,000 with -short).
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if testing.Short() {
		n = 5_000
	}
	b.Run("sqlite", func(b *testing.B) { benchmarkSearch(b, drivertest.OpenSQLite, n) })
	b.Run("postgres", func(b *testing.B) { benchmarkSearch(b, drivertest.OpenPostgres, n) })
}

// syllables make the synthetic vocabulary: pronounceable words, some accented, so that folding
// is exercised.
var syllables = []string{"ka", "lo", "mi", "ré", "tu", "sa", "ne", "po", "li", "da", "vé", "ro", "chi", "gu", "fa", "zé"}

func benchWord(i int) string {
	var b strings.Builder
	for {
		b.WriteString(syllables[i%len(syllables)])
		i /= len(syllables)
		if i == 0 {
			return b.String()
		}
	}
}

// benchDocs makes n synthetic documents of about words words each, drawn from a Zipf
// distribution over a vocabulary of 20,000, deterministic for a seed. One document in 100 has
// the phrase "rare needle phrase".
func benchDocs(n, words int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.1, 2, 20_000-1)
	out := make([]string, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		k := words/2 + r.IntN(words)
		for j := range k {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(benchWord(int(z.Uint64()) + 1))
		}
		if i%100 == 0 {
			b.WriteString(" rare needle phrase")
		}
		out[i] = b.String()
	}
	return out
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// insertDocs inserts texts as items of job j and records each with an output of kind, batch
// documents per transaction. It returns the wall and process CPU time it took.
func insertDocs(b *testing.B, s store.Store, j *record.Job, kind string, texts []string, first int) (wall, cpu time.Duration) {
	ctx := b.Context()
	now := time.Now().UTC()
	types := []string{"application/pdf", "text/plain", "text/html"}
	langs := []string{"en", "fr", "de", "ja", "es"}
	const batch = 500
	w0, c0 := time.Now(), cpuTime()
	for start := 0; start < len(texts); start += batch {
		err := s.InTx(ctx, func(x store.Executor) error {
			var ps []store.ItemInsertParams
			for i := start; i < min(len(texts), start+batch); i++ {
				n := first + i
				ps = append(ps, store.ItemInsertParams{JobID: j.ID, Ordinal: n, SortKey: fmt.Sprintf("%09d", n),
					Name: fmt.Sprintf("dir%d/doc-%d.pdf", n%50, n), ContentType: types[n%len(types)],
					Metadata: []byte(`{"lang":"` + langs[n%len(langs)] + `"}`), Text: &texts[i], Now: now})
			}
			items, err := x.ItemInsertMany(ctx, ps)
			if err != nil {
				return err
			}
			for _, it := range items {
				p := store.OutputPutParams{ItemID: it.ID, JobID: j.ID, Kind: kind, Value: []byte(`{"title":"` + it.Name + `"}`), Now: now}
				if err := x.OutputPut(ctx, p); err != nil {
					return err
				}
				if err := (docsearch.Domain{}).OutputsRecorded(ctx, x.DomainSQL(), []store.OutputPutParams{p}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(w0), cpuTime() - c0
}

// benchmarkSearch measures full-text search on a store made by open holding n synthetic
// documents (inserted untimed as the engine records them, in jobs of n/10): sub-benchmarks time a
// one-word query, a phrase query and a filtered query (a word, a job, a content type and a
// metadata value), 20 hits with their text each, and report their p50 and p95 latencies. Before
// that it reports what indexing costs: 5,000 documents inserted with an output of kind document
// (indexed) and as many with another kind (not indexed), the difference per document in wall
// and process CPU time (the latter includes the database's work only for an in-process driver).
func benchmarkSearch(b *testing.B, open func(tb testing.TB) store.Store, n int) {
	s := open(b)
	ix := docsearch.NewIndex(s.DomainSQL())
	ctx := b.Context()
	now := time.Now().UTC()
	texts := benchDocs(n, 150, 7)
	var jobs []*record.Job
	per := max(1, n/10)
	for i := 0; i < n; i += per {
		j, err := s.JobInsert(ctx, store.JobInsertParams{WorkflowName: "bench", WorkflowVersion: 1, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, j)
		insertDocs(b, s, j, store.OutputDocument, texts[i:min(n, i+per)], i)
	}

	// The cost of indexing: the same documents with and without their index rows.
	extra := benchDocs(5000, 150, 8)
	jx, err := s.JobInsert(ctx, store.JobInsertParams{WorkflowName: "bench", WorkflowVersion: 1, Now: now})
	if err != nil {
		b.Fatal(err)
	}
	wallPlain, cpuPlain := insertDocs(b, s, jx, "bench-unindexed", extra, n)
	jy, err := s.JobInsert(ctx, store.JobInsertParams{WorkflowName: "bench", WorkflowVersion: 1, Now: now})
	if err != nil {
		b.Fatal(err)
	}
	wallIndexed, cpuIndexed := insertDocs(b, s, jy, store.OutputDocument, extra, n+len(extra))
	perDoc := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(len(extra)) }
	b.Logf("%d documents; inserting 5,000 more: %.0f µs wall, %.0f µs CPU per document without the index; %.0f µs wall, %.0f µs CPU with it: the index costs %.0f µs wall, %.0f µs CPU per document",
		n, perDoc(wallPlain), perDoc(cpuPlain), perDoc(wallIndexed), perDoc(cpuIndexed), perDoc(wallIndexed-wallPlain), perDoc(cpuIndexed-cpuPlain))

	for _, tc := range []struct {
		name string
		q    string
		p    docsearch.SearchParams
	}{
		{"word", benchWord(40), docsearch.SearchParams{}},
		{"phrase", `"rare needle phrase"`, docsearch.SearchParams{}},
		{"common-phrase", `"` + benchWord(2) + " " + benchWord(3) + `"`, docsearch.SearchParams{}},
		{"filtered", benchWord(40), docsearch.SearchParams{JobID: jobs[len(jobs)/2].ID, ContentType: "text/plain", Metadata: []docsearch.KeyValue{{Key: "lang", Value: "fr"}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			q, err := search.Parse(tc.q)
			if err != nil {
				b.Fatal(err)
			}
			p := tc.p
			p.Query, p.Limit, p.TextChars = q, 20, 100_000
			var lat []time.Duration
			hits := 0
			cpu0 := cpuTime()
			for b.Loop() {
				t0 := time.Now()
				h, err := ix.Search(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				hits = len(h)
			}
			if hits == 0 {
				b.Fatalf("%s found nothing", tc.q)
			}
			// Process CPU per query: the database's own work too for an in-process driver.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
			slices.Sort(lat)
			pct := func(f float64) float64 {
				return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.95), "p95-ms")
		})
	}
}
