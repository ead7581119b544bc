package worker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestCacheEntryDeflated: an entry holding a document's text is stored deflated and reads back
// as the same JSON; a short entry, and one stored as plain JSON, read back as they are; a
// damaged deflated entry is an error (the cache then runs the action), not a wrong replay.
func TestCacheEntryDeflated(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("A letter from the north about the river and the market.\n", 18)
	raw, err := json.Marshal(effects{Text: &text, Parent: "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	packed := packEntry(raw)
	if len(packed) >= len(raw)/2 || !bytes.HasPrefix(packed, []byte(deflatedEntry)) {
		t.Errorf("entry of %d bytes stored in %d, want deflated to under half", len(raw), len(packed))
	}
	for _, stored := range [][]byte{packed, raw, packEntry([]byte(`{"parent":"x"}`))} {
		got, err := unpackEntry(stored)
		if err != nil || !json.Valid(got) || (len(stored) > 100 && !bytes.Equal(got, raw)) {
			t.Errorf("unpackEntry of %d bytes: %q, %v", len(stored), got[:min(len(got), 40)], err)
		}
	}
	if _, err := unpackEntry(packed[:len(packed)-5]); err == nil {
		t.Error("a truncated entry read back without error")
	}
}
