package workflow_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/workflow"
)

// TestKeyed reads claim:, limit: and correlate:, keeps them through the canonical form, and
// reports bad ones with the step and the line.
func TestKeyed(t *testing.T) {
	t.Parallel()
	def, _ := mustValid(t, `name: k
external: [transcoded]
steps:
  resolve:
    action: noop
    needs: [start]
    success: [resolved]
    claim: {key: "{{metadata.package}}@{{metadata.version}}", scope: installation, reused: [avoided]}
  fetch:
    action: noop
    needs: [resolved]
    limit: {key: "{{metadata.host}}", concurrency: 2, rate: 10/s}
  done:
    action: noop
    needs: [avoided, transcoded]
    correlate:
      transcoded: {path: Message.detail.id, key: file_set_id, metadata: {status: Message.detail.status}}
`)
	c := def.Step("resolve").Claim
	if c == nil || c.Key != "{{metadata.package}}@{{metadata.version}}" || c.Scope != "installation" || !reflect.DeepEqual(c.Reused, []string{"avoided"}) {
		t.Fatalf("claim %+v", c)
	}
	l := def.Step("fetch").Limit
	if l == nil || l.Concurrency != 2 || l.Rate.Interval() != 100*time.Millisecond {
		t.Fatalf("limit %+v", l)
	}
	co := def.Step("done").Correlate["transcoded"]
	if co == nil || co.Path != "Message.detail.id" || co.Key != "file_set_id" || co.Metadata["status"] != "Message.detail.status" {
		t.Fatalf("correlate %+v", co)
	}
	canon, err := workflow.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	back, err := workflow.Parse(canon, "canonical")
	if err != nil {
		t.Fatalf("%v in %s", err, canon)
	}
	if workflow.Digest(back) != workflow.Digest(def) || !reflect.DeepEqual(back.Step("fetch").Limit, l) || !reflect.DeepEqual(back.Step("done").Correlate, def.Step("done").Correlate) {
		t.Errorf("canonical form %s lost a field", canon)
	}
	if !strings.Contains(string(canon), `"rate":"10/s"`) {
		t.Errorf("canonical %s", canon)
	}

	for _, tc := range []struct{ name, step, want string }{
		{"unknown claim field", `{action: noop, needs: [start], claim: {key: a, scop: job}}`, `test.yaml:4: step "a": unknown field "scop" (did you mean "scope"?)`},
		{"claim without key", "{action: noop, needs: [start], claim: {scope: job}}", `test.yaml:4: step "a": claim: missing key`},
		{"limit without key", "{action: noop, needs: [start], limit: {concurrency: 2}}", `test.yaml:4: step "a": limit: missing key`},
		{"limit without bound", "{action: noop, needs: [start], limit: {key: a}}", `test.yaml:4: step "a": limit: a limit needs concurrency, rate or both`},
		{"bad rate", "{action: noop, needs: [start], limit: {key: a, rate: fast}}", `test.yaml:4: step "a": limit.rate: invalid rate "fast"`},
		{"bad template", `{action: noop, needs: [start], claim: {key: "{{metadata.}}"}}`, `line 4: step "a": claim.key: invalid template`},
		{"bad limit template", "\n    action: noop\n    needs: [start]\n    limit:\n      key: \"{{nope}}\"\n      rate: 1/s", `line 8: step "a": limit.key: invalid template "{{nope}}": column 3: unknown variable "nope"`},
		{"bad scope", "{action: noop, needs: [start], claim: {key: a, scope: world}}", `step "a": claim.scope: unknown scope "world"`},
		{"correlate not external", "{action: noop, needs: [start], correlate: {start: {path: a, key: b}}}", `"start" is not a declared external event`},
		{"correlate bad path", "{action: noop, needs: [start, ext], correlate: {ext: {path: a..b, key: b}}}", `correlate.ext.path: invalid path "a..b"`},
		{"correlate unknown field", "{action: noop, needs: [start, ext], correlate: {ext: {path: a, key: b, value: c}}}", `unknown field "value"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseAndValidate("name: w\nexternal: [ext]\nsteps:\n  a: " + tc.step + "\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want %q", err, tc.want)
			}
		})
	}
}

// TestPathValueNumbers: a correlation path through a string holding JSON (an SNS envelope's
// Message) reaches a 20-digit id and 1.50 as they were sent, not rounded through float64, so
// that they match an item's metadata as written.
func TestPathValueNumbers(t *testing.T) {
	t.Parallel()
	body, err := metadata.Decode([]byte(`{"Type":"Notification","Message":"{\"order\":{\"id\":12345678901234567890,\"price\":1.50}}"}`))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]json.Number{"Message.order.id": "12345678901234567890", "Message.order.price": "1.50"} {
		if v, ok := workflow.PathValue(body, path); !ok || v != want {
			t.Errorf("PathValue(%s) = %v (%T), %v; want %s", path, v, v, ok, want)
		}
	}
}
