package workerproto

import (
	"encoding/json"
	"testing"
)

func TestParseFragment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind fragKind
		n    int
	}{
		{"0.json", fragHeader, 0}, {"12345678.blob", fragBlob, 12345678}, {"3.txt", fragText, 3},
		{"4-thumbnail.png", fragThumb, 4}, {"4-thumbnail.jpg", fragThumb, 4}, {"inherit-blob", fragInherit, 0},
		{"progress", fragProgress, 0}, {"heartbeat", fragHeartbeat, 0}, {"done", fragDone, 0}, {"error", fragError, 0},
		{"123456789.json", fragUnknown, 0}, {".json", fragUnknown, 0}, {"0.pdf", fragUnknown, 0}, {"-1.json", fragUnknown, 0},
		{"0-thumbnail.gif", fragUnknown, 0}, {"", fragUnknown, 0},
		{"7.write.json", fragWrite, 7}, {"write.json", fragUnknown, 0}, {"7.write", fragUnknown, 0},
	}
	for _, tt := range tests {
		f := parseFragment(tt.name)
		if f.kind != tt.kind || f.n != tt.n {
			t.Errorf("%q: kind %d n %d, want %d %d", tt.name, f.kind, f.n, tt.kind, tt.n)
		}
	}
}

func TestParseProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{`{"children":{"nProcessed":1,"nTotal":4}}`, 0.25, true},
		{`{"bytes":{"nProcessed":6000000000,"nTotal":8000000000}}`, 0.75, true}, // beyond 32 bits
		{`0.5`, 0.5, true}, {`1`, 1, true}, {` 0 `, 0, true},
		{`NaN`, 0, false}, {`1.5`, 0, false}, {`{"pages":{"nProcessed":1,"nTotal":2}}`, 0, false},
		{`{"bytes":{"nProcessed":1,"nTotal":0}}`, 0, false}, {`{`, 0, false},
	}
	for _, tt := range tests {
		got, err := parseProgress([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("%s: %v %v, want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want: domain/key/payload, or the error
	}{
		{`{"domain":"g","key":"n1","payload":{"a":1}}`, `g/n1/{"a":1}`},
		{`{"domain":"g","key":"n1"}`, `g/n1/null`},
		{`{"domain":"g","key":"n1","payload":"x","extra":true}`, `g/n1/"x"`},
		{`{"key":"n1"}`, `write JSON: missing or empty field "domain"`},
		{`{"domain":"g","key":""}`, `write JSON: missing or empty field "key"`},
		{`{"domain":1,"key":"k"}`, `write JSON: json: cannot unmarshal number into Go struct field domainWrite.domain of type string`},
		{`[]`, `write JSON: json: cannot unmarshal array into Go value of type workerproto.domainWrite`},
	}
	for _, tt := range tests {
		w, err := parseWrite([]byte(tt.in))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = w.Domain + "/" + w.Key + "/" + string(w.Payload)
		}
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.in, got, tt.want)
		}
	}
}

func FuzzFragments(f *testing.F) {
	for _, s := range []string{"0.json", "99999999-thumbnail.png", "progress", `{"children":{"nProcessed":1,"nTotal":2}}`, "0.5"} {
		f.Add(s, []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, payload []byte) {
		fr := parseFragment(name)
		if fr.kind != fragUnknown && fr.kind != fragInherit && fr.n < 0 {
			t.Fatalf("negative N from %q", name)
		}
		if p, err := parseProgress(payload); err == nil && (p < 0 || p > 1) {
			t.Fatalf("progress %v out of range from %q", p, payload)
		}
		_, _ = parseHeader(payload)
		if w, err := parseWrite(payload); err == nil && (w.Domain == "" || w.Key == "" || len(w.Payload) == 0) {
			t.Fatalf("write %+v accepted from %q", w, payload)
		}
	})
}

// TestParseHeaderMetadata: a child's metadata keeps its numbers as written — a 20-digit id and
// 1.50 — as every decode of metadata does.
func TestParseHeaderMetadata(t *testing.T) {
	t.Parallel()
	h, err := parseHeader([]byte(`{"filename":"a.txt","contentType":"text/plain","languageCode":"en",` +
		`"metadata":{"id":12345678901234567890,"price":1.50},"wantOcr":false,"wantSplitByPage":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(h.Metadata); string(got) != `{"id":12345678901234567890,"price":1.50}` {
		t.Errorf("child metadata %s, want id 12345678901234567890 and price 1.50 as written", got)
	}
}
