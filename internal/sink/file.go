package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// File is a sink appending one JSON object per line to a file:
// {"id":…,"subject":…,"attributes":{…},"body":…} — body inline when it is JSON, else a string.
// A batch is fsynced before it is acknowledged; after a crash between the two, the batch is
// appended again with the same ids.
type File struct {
	mu sync.Mutex
	f  *os.File
}

// OpenFile opens (creating) the file for appending.
func OpenFile(path string) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	return &File{f: f}, nil
}

type fileLine struct {
	ID         string            `json:"id"`
	Subject    string            `json:"subject"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Body       any               `json:"body"`
}

// Send appends the messages and fsyncs.
func (s *File) Send(_ context.Context, msgs []Message) []error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, m := range msgs {
		var body any = string(m.Body)
		if json.Valid(m.Body) {
			body = json.RawMessage(m.Body)
		}
		_ = enc.Encode(fileLine{ID: m.ID, Subject: m.Subject, Attributes: m.Attributes, Body: body})
	}
	s.mu.Lock()
	_, err := s.f.Write(buf.Bytes())
	if err == nil {
		err = s.f.Sync()
	}
	s.mu.Unlock()
	errs := make([]error, len(msgs))
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("file sink: %w", err)
		}
	}
	return errs
}

// Close closes the file.
func (s *File) Close() error { return s.f.Close() }
