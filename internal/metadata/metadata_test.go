package metadata_test

import (
	"encoding/json"
	"testing"

	"github.com/sluice-project/sluice/internal/metadata"
)

// TestRoundTrip: what Decode returns encodes back to the same JSON: big integers, decimals,
// strings of digits, nested objects and non-ASCII keys come out as they went in.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	const in = `{"big":12345678901234567890,"half":1.5,"nested":{"list":[1,2.50,"x"],"n":-7e3},"zip":"01234","ключ":"значение","日本":true}`
	m, err := metadata.Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if m["big"] != json.Number("12345678901234567890") || m["zip"] != "01234" {
		t.Errorf("decoded %#v", m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip:\n got %s\nwant %s", out, in)
	}
	for _, raw := range []string{``, `null`, ` `} {
		if m, err := metadata.Decode([]byte(raw)); err != nil || len(m) != 0 {
			t.Errorf("Decode(%q) = %v, %v; want an empty map", raw, m, err)
		}
	}
	for _, raw := range []string{`[1]`, `"x"`, `{"a":1} {}`, `{`} {
		if _, err := metadata.Decode([]byte(raw)); err == nil {
			t.Errorf("Decode(%q) succeeded; want an error", raw)
		}
	}
}

func TestNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v     any
		f     float64
		i     int64
		isInt bool
	}{
		{json.Number("3"), 3, 3, true},
		{json.Number("1.5"), 1.5, 0, false},
		{json.Number("9007199254740993"), 9007199254740992, 9007199254740993, true},
		{float64(4), 4, 4, true},
		{7, 7, 7, true},
	} {
		if f, ok := metadata.Float(tc.v); !ok || f != tc.f {
			t.Errorf("Float(%#v) = %v, %v", tc.v, f, ok)
		}
		if i, ok := metadata.Int(tc.v); ok != tc.isInt || i != tc.i {
			t.Errorf("Int(%#v) = %v, %v", tc.v, i, ok)
		}
	}
	if _, ok := metadata.Float("3"); ok {
		t.Error(`Float("3") is a number; a string must stay one`)
	}
}
