package email

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
)

// rtfInsertAtBytes is the slice-based scan rtfInsertAt replaced: the reference it must agree with.
func rtfInsertAtBytes(b []byte) int {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			if depth == 1 && bytes.HasPrefix(b[i:], []byte(`\pard`)) && (i+5 == len(b) || !isLetter(b[i+5])) {
				return i
			}
			i++
		case '{':
			depth++
		case '}':
			depth--
		}
	}
	if i := bytes.LastIndexByte(b, '}'); i > 0 {
		return i
	}
	return len(b)
}

func TestRTFInsertAt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rtf  string
		want int64
	}{
		{`{\rtf1\ansi{\fonttbl{\f0 Arial;}}\pard\plain hi\par}`, 33},
		{`{\rtf1{\pard inner}\pardeftab720 x\pard}`, 34}, // \pardeftab is not \pard; the inner group's is not at the outer level
		{`{\rtf1 no paragraphs}`, 20},
		{`{\rtf1 an escaped \} last`, 19},
		{`no groups at all`, 16},
		{`{\rtf1\pard`, 6}, // \pard at the very end
		{`{\rtf1 ends in a backslash\`, 27},
	} {
		got, err := rtfInsertAt(strings.NewReader(tc.rtf))
		if err != nil || got != tc.want || got != int64(rtfInsertAtBytes([]byte(tc.rtf))) {
			t.Errorf("rtfInsertAt(%q) = %d, %v; want %d (the slice scan: %d)", tc.rtf, got, err, tc.want, rtfInsertAtBytes([]byte(tc.rtf)))
		}
	}
}

func FuzzRTFInsertAt(f *testing.F) {
	for _, s := range []string{`{\rtf1{\fonttbl{\f0 A;}}\pard x\par}`, `{\\}{\pard}`, `\`, `{\rtf1\pard`, `}}}{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := rtfInsertAt(bytes.NewReader(b))
		if want := int64(rtfInsertAtBytes(b)); err != nil || got != want {
			t.Fatalf("rtfInsertAt(%q) = %d, %v; the slice scan %d", b, got, err, want)
		}
	})
}

// rtfStream is an RTF body of n bytes with no \pard: a header, then text, then "}".
type rtfStream struct{ pos, n int64 }

func (s *rtfStream) Read(p []byte) (int, error) {
	if s.pos >= s.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.n-s.pos)]
	for i := range p {
		switch at := s.pos + int64(i); {
		case at == 0:
			p[i] = '{'
		case at == s.n-1:
			p[i] = '}'
		default:
			p[i] = 'x'
		}
	}
	s.pos += int64(len(p))
	return len(p), nil
}

// TestRTFInsertAtStreams: a 64 MiB RTF body is scanned, not held — a buffer's worth allocated —
// and its headers go before its final "}". (Not parallel: it reads the process's allocations.)
func TestRTFInsertAtStreams(t *testing.T) {
	const n = 64 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := rtfInsertAt(&rtfStream{n: n})
	runtime.ReadMemStats(&after)
	if err != nil || got != n-1 {
		t.Fatalf("rtfInsertAt = %d, %v; want %d", got, err, n-1)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("scanning a %d-byte body allocated %d bytes", n, alloc)
	}
}
