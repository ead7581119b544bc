package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// expand returns the writes an Effects stands for, those in its spill file read back.
func expand(t *testing.T, ws []DomainWrite) []DomainWrite {
	t.Helper()
	var out []DomainWrite
	for _, w := range ws {
		if w.spilled == nil {
			out = append(out, w)
			continue
		}
		if err := w.spilled.each(func(w DomainWrite) error { out = append(out, w); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEffectsSpillWrites: past a megabyte an Effects keeps its writes in its spill file, holding
// in memory less than a megabyte of them and one entry per run it moved; read back (twice, as a
// retried transaction does) they are every write, in order. Copied entry by entry into another
// Effects (as a remote worker's session does with the writes it received before its result), and
// written to further, that one stands for them all, in order too.
func TestEffectsSpillWrites(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("p", 500)
	mk := func(i int) DomainWrite {
		return DomainWrite{Domain: "d", Key: fmt.Sprintf("k%d", i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))}
	}
	check := func(name string, ws []DomainWrite, n int) {
		t.Helper()
		got := expand(t, ws)
		if len(got) != n {
			t.Fatalf("%s: %d writes read back, want %d", name, len(got), n)
		}
		for i, w := range got {
			if want := mk(i); w.Domain != want.Domain || w.Key != want.Key || string(w.Payload) != string(want.Payload) {
				t.Fatalf("%s: write %d is %s %s %.20s, want %s %s %.20s", name, i, w.Domain, w.Key, w.Payload, want.Domain, want.Key, want.Payload)
			}
		}
	}
	var ef Effects
	const n = 10_000 // about 5 MB
	for i := range n {
		ef.AddWrite(mk(i))
	}
	if !ef.WritesSpilled() {
		t.Fatal("5 MB of writes, none spilled")
	}
	held, entries := 0, 0
	for _, w := range ef.Writes {
		if w.spilled != nil {
			entries++
		}
		held += len(w.Payload)
	}
	if held > spillWritesOver || entries != 1 {
		t.Fatalf("%d bytes of writes held in memory and %d spilled entries, want at most %d and one (runs merged)", held, entries, spillWritesOver)
	}
	check("spilled", ef.Writes, n)
	check("read again", ef.Writes, n)

	var copied Effects
	for _, w := range ef.Writes {
		copied.AddWrite(w)
	}
	for i := n; i < 2*n; i++ {
		copied.AddWrite(mk(i))
	}
	check("copied and written to", copied.Writes, 2*n)
	check("the original, after", ef.Writes, n)

	var small Effects
	for i := range 100 {
		small.AddWrite(mk(i))
	}
	if small.WritesSpilled() || len(small.Writes) != 100 {
		t.Fatalf("50 KB of writes: spilled %v, %d held, want all 100 held", small.WritesSpilled(), len(small.Writes))
	}
}

// TestWriteSpillFile: a spill file leaves nothing in its directory (it is unlinked at once), and
// one whose directory is missing is made in the system's temp directory instead.
func TestWriteSpillFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := newWriteSpill(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.f.Close()
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("the spill file's directory holds %v (%v), want nothing", left, err)
	}
	seg, err := s.append([]DomainWrite{{Domain: "d", Key: "k", Payload: json.RawMessage(`{}`)}})
	if err != nil || seg.n != 1 || seg.off != 0 || seg.end != s.size {
		t.Fatalf("append: segment %+v (%v), file size %d", seg, err, s.size)
	}
	gone, err := newWriteSpill(filepath.Join(dir, "gone"))
	if err != nil {
		t.Fatalf("a spill file whose directory is missing: %v, want one in $TMPDIR", err)
	}
	gone.f.Close()
}
