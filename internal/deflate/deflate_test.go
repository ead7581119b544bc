package deflate

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
)

func TestShrinkInflate(t *testing.T) {
	t.Parallel()
	text := []byte(strings.Repeat("the river and the stone, a letter from the north; ", 20))
	z, ok := Shrink(text)
	if !ok || len(z) >= len(text)/2 {
		t.Fatalf("Shrink of %d bytes of text: %d bytes, %v; want under half", len(text), len(z), ok)
	}
	got, err := Inflate(z, int64(len(text)))
	if err != nil || !bytes.Equal(got, text) {
		t.Fatalf("Inflate: %v, equal %v", err, bytes.Equal(got, text))
	}
	for _, size := range []int64{int64(len(text)) - 1, int64(len(text)) + 1} {
		if _, err := Inflate(z, size); err == nil {
			t.Errorf("Inflate to %d bytes of a value of %d: no error", size, len(text))
		}
	}
	if _, err := Inflate(z[:len(z)-2], int64(len(text))); err == nil {
		t.Error("Inflate of a cut stream: no error")
	}
	if _, err := Inflate([]byte("not deflate at all"), 10); err == nil {
		t.Error("Inflate of garbage: no error")
	}
	noise := make([]byte, 4096)
	rand.Read(noise)
	if _, ok := Shrink(noise); ok {
		t.Error("Shrink of random bytes: want false")
	}
	if _, ok := Shrink([]byte("short")); ok {
		t.Error("Shrink of 5 bytes: want false")
	}
}

// BenchmarkShrink deflates prose-like values of the sizes a small text document's values have
// (its text, in the blob store, in its item and in its cache entry): 1 KB and 4 KB. "ratio" is
// the deflated bytes over the input's.
func BenchmarkShrink(b *testing.B) {
	for _, size := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			vals := proseValues(size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			var in, out, i int
			for b.Loop() {
				v := vals[i%len(vals)]
				z, ok := Shrink(v)
				if !ok {
					b.Fatalf("Shrink of %d bytes of prose: not smaller", len(v))
				}
				in, out, i = in+len(v), out+len(z), i+1
			}
			b.ReportMetric(float64(out)/float64(in), "ratio")
		})
	}
}

// BenchmarkInflate inflates what BenchmarkShrink deflates: a document's text read back (its
// search indexing, an export) or a small blob served.
func BenchmarkInflate(b *testing.B) {
	for _, size := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			vals := proseValues(size)
			zs := make([][]byte, len(vals))
			for i, v := range vals {
				z, ok := Shrink(v)
				if !ok {
					b.Fatalf("Shrink of %d bytes of prose: not smaller", len(v))
				}
				zs[i] = z
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if _, err := Inflate(zs[i%len(zs)], int64(size)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// proseValues returns 64 prose-like values of size bytes, each of its own word order, as
// distinct documents would be.
func proseValues(size int) [][]byte {
	words := strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at " +
		"which but have an they you were her she there been one all we their has would when if so no will more " +
		"document report file page river water stone market letter north summer number system between during")
	vals := make([][]byte, 64)
	x := uint32(2654435761)
	for i := range vals {
		var v []byte
		for len(v) < size {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			v = append(v, words[x%uint32(len(words))]...)
			v = append(v, ' ')
		}
		vals[i] = v[:size]
	}
	return vals
}
