package workflow_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/workflow"
)

// FuzzParseValidate feeds arbitrary sources to Parse, Validate and the renderers: none may
// panic, every rejection is a *ParseError, and every accepted definition round-trips through
// Marshal and Parse to the same digest.
func FuzzParseValidate(f *testing.F) {
	for _, tc := range malformedCases() {
		if len(tc.src) < 4<<10 {
			f.Add([]byte(tc.src))
		}
	}
	for _, src := range validExamples {
		f.Add([]byte(src))
	}
	f.Add([]byte(`{"name":"x","steps":{"s":{"action":"http","needs":["start"],"with":{"url":"\u003c","n":-0.0,"f":1e21,"i":9223372036854775807}}}}`))
	lk, names := lookup()
	f.Fuzz(func(t *testing.T, src []byte) {
		start := time.Now()
		defer func() {
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("slow input (%v)", d)
			}
		}()
		def, err := workflow.Parse(src, "fuzz.yaml")
		if err != nil {
			var pe *workflow.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			return
		}
		warnings, err := workflow.Validate(def, lk, names...)
		if err != nil {
			var ve *workflow.ValidationError
			if !errors.As(err, &ve) || len(ve.Diagnostics) == 0 {
				t.Fatalf("error %T %v is not a non-empty *ValidationError", err, err)
			}
		}
		for _, w := range warnings {
			if w.Severity != workflow.SeverityWarning {
				t.Fatalf("warning of severity %q", w.Severity)
			}
		}
		canon, err := workflow.Marshal(def)
		if err != nil {
			t.Fatalf("marshal an accepted definition: %v", err)
		}
		again, err := workflow.Parse(canon, "canonical.json")
		if err != nil {
			t.Fatalf("parse canonical JSON: %v\n%s", err, canon)
		}
		if d1, d2 := workflow.Digest(def), workflow.Digest(again); d1 != d2 {
			canon2, _ := workflow.Marshal(again)
			t.Fatalf("digest changed over a round trip:\n%s\n%s", canon, canon2)
		}
		canon2, _ := workflow.Marshal(again)
		if !bytes.Equal(canon, canon2) {
			t.Fatalf("canonical JSON not stable:\n%s\n%s", canon, canon2)
		}
		workflow.DOT(def)
		workflow.NewGraph(def, lk).SVG()
	})
}
