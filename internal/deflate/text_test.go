package deflate

import (
	"strings"
	"testing"
)

// TestPackText: a long text is packed as bytes, a short or random one kept as a string, and
// Text scans back each (and NULL, and a damaged value as an error).
func TestPackText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("the river and the stone, a letter from the north; ", 20)
	tests := []struct {
		name   string
		text   string
		packed bool
	}{
		{name: "long", text: long, packed: true},
		{name: "short", text: "a few words", packed: false},
		{name: "empty", text: "", packed: false},
		{name: "unicode", text: strings.Repeat("Grüße aus München, 東京から ", 30), packed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := PackText(tt.text)
			b, isBytes := v.([]byte)
			if isBytes != tt.packed {
				t.Fatalf("PackText gave %T, want packed %v", v, tt.packed)
			}
			if isBytes && len(b) >= len(tt.text)*7/8 {
				t.Errorf("packed %d bytes of text into %d", len(tt.text), len(b))
			}
			var got Text
			if err := got.Scan(v); err != nil || !got.Valid || got.String != tt.text {
				t.Errorf("Scan: %q, %v, %v; want the text", got.String, got.Valid, err)
			}
		})
	}
	var null Text
	if err := null.Scan(nil); err != nil || null.Valid {
		t.Errorf("Scan(nil): valid %v, %v", null.Valid, err)
	}
	b := PackText(long).([]byte)
	var bad Text
	if err := bad.Scan(b[:len(b)-3]); err == nil {
		t.Error("Scan of a cut value: no error")
	}
}
