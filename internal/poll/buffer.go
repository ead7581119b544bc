package poll

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a process or goroutines write to while the test reads it, as
// [Until]'s condition does: Write and String are safe for concurrent use. The zero value is an
// empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
