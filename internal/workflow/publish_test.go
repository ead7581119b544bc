package workflow

import (
	"strings"
	"testing"
)

func TestPublishRules(t *testing.T) {
	t.Parallel()
	src := `name: pub
publish:
  - {sink: bus, on: [ok, fail], subject: meadow.done, context: Sheet}
steps:
  digest:
    action: noop
    needs: [start]
    publish:
      - sink: bus
        on: [complete]
        attributes: {role: access}
        keys: [sheet_id]
      - {sink: hook}
`
	def, err := Parse([]byte(src), "pub.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !def.Publishes() || len(def.Publish) != 1 || def.Publish[0].Subject != "meadow.done" || def.Publish[0].Context != "Sheet" {
		t.Fatalf("workflow rules = %+v", def.Publish)
	}
	s := def.Step("digest")
	if len(s.Publish) != 2 || s.Publish[0].Attributes["role"] != "access" || s.Publish[0].Keys[0] != "sheet_id" {
		t.Fatalf("step rules = %+v", s.Publish)
	}
	if !s.Publish[1].Selects(OutcomeFailed) || s.Publish[0].Selects(OutcomeFailed) {
		t.Fatal("a rule without on: selects every outcome; one with on: only those")
	}
	// The canonical form reads back to the same digest.
	canon, err := Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(canon, "canon")
	if err != nil {
		t.Fatalf("parse canonical %s: %v", canon, err)
	}
	if Digest(back) != Digest(def) || !strings.Contains(string(canon), `"publish":[{"sink":"bus","subject":"meadow.done"`) {
		t.Fatalf("canonical form does not round-trip: %s", canon)
	}

	for _, tc := range []struct{ name, rule, want string }{
		{"no sink", `{on: [complete]}`, "empty sink name"},
		{"bad outcome", `{sink: bus, on: [done]}`, `"done" is not an outcome`},
		{"unknown field", `{sink: bus, topic: x}`, `unknown field "topic"`},
		{"bad subject", `{sink: bus, subject: "a b"}`, "invalid subject"},
		{"bad attribute", `{sink: bus, attributes: {"Bad Name": x}}`, "invalid name"},
		{"bad body", `{sink: bus, body: result}`, "not output:KIND or metadata:KEY"},
		{"empty body kind", `{sink: bus, body: "output:"}`, "not output:KIND or metadata:KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: p\nsteps:\n  a: {action: noop, needs: [start], publish: [" + tc.rule + "]}\n"
			_, err := Parse([]byte(src), "p.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	_, err = Parse([]byte("name: p\npublish: [{sink: bus, on: [x], body: \"output:r\"}]\nsteps:\n  a: {action: noop, needs: [start]}\n"), "p.yaml")
	if err == nil || !strings.Contains(err.Error(), "has no outputs") {
		t.Fatalf("a workflow rule with an output body = %v", err)
	}
	if _, err := Parse([]byte("name: p\npublish: [{sink: bus, on: [x], body: \"metadata:k\"}]\nsteps:\n  a: {action: noop, needs: [start], publish: [{sink: bus, body: \"output:r\"}]}\n"), "p.yaml"); err != nil {
		t.Fatalf("rules with bodies: %v", err)
	}
	_, err = Parse([]byte("name: p\npublish: [{sink: bus}]\nsteps:\n  a: {action: noop, needs: [start]}\n"), "p.yaml")
	if err == nil || !strings.Contains(err.Error(), "needs on:") {
		t.Fatalf("a workflow rule without on: = %v", err)
	}
}
