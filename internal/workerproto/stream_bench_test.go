package workerproto_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// BenchmarkStreamChildren streams the children of an archive (2,000 per op, 4 KiB each, in one
// multipart POST) and reports the children the server commits per second: the POST is answered
// once they all are. The downstream step runs meanwhile, as it does in a real job. On each store
// driver.
func BenchmarkStreamChildren(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchmarkStreamChildren(b, drivertest.OpenSQLite) })
	b.Run("postgres", func(b *testing.B) {
		drivertest.DatabaseURL(b)
		benchmarkStreamChildren(b, drivertest.OpenPostgres)
	})
}

func benchmarkStreamChildren(b *testing.B, open enginetest.Open) {
	const n = 2000
	bl := setup(b, opts{idle: time.Minute, open: open})
	payload := bytes.Repeat([]byte("x"), 4096)
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		bl.job(b, "archive")
		th := bl.poll(b)
		b.StartTimer()
		start := time.Now()
		s := th.Stream(b.Context())
		for i := range n {
			if err := s.Part(fmt.Sprintf("%d.json", i), str(childJSON(fmt.Sprintf("c%06d", i)))); err != nil {
				b.Fatal(err)
			}
			if err := s.Part(fmt.Sprintf("%d.blob", i), bytes.NewReader(append(fmt.Appendf(nil, "%06d", i), payload...))); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Part("done", str("")); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
	}
	b.ReportMetric(float64(n*b.N)/took.Seconds(), "children/s")
}
