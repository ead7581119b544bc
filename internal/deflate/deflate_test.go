package deflate

import (
	"bytes"
	"crypto/rand"
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
