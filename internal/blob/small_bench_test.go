package blob

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
)

// BenchmarkSmallStage measures staging small blobs the way a converter's children do: many
// writers at once, each waiting for durability, so that group commits form.
func BenchmarkSmallStage(b *testing.B) {
	d, err := OpenDir(b.TempDir(), DirOptions{SmallMax: DefaultSmallMax})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	payload := bytes.Repeat([]byte("lorem ipsum dolor sit amet "), 120) // ~3 KiB, a small PDF
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			data := append([]byte(fmt.Sprintf("%d ", i)), payload...)
			_, _, wait, err := d.Stage(ctx, bytes.NewReader(data), false)
			if err == nil {
				err = wait()
			}
			if err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()
}
