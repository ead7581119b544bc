package workflow_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/workflow"
)

// lines joins source lines, so a case's line numbers can be read off its position in the list.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

type malformedCase struct {
	name string
	src  string
	want string // substring of the message
	line int
}

// malformedCases are workflows Parse or Validate must reject, each with its message and line.
func malformedCases() []malformedCase {
	manySteps := &strings.Builder{}
	manySteps.WriteString("name: big\nsteps:\n")
	for i := range workflow.MaxSteps + 1 {
		fmt.Fprintf(manySteps, "  s%d: {action: noop, needs: [start]}\n", i)
	}
	return []malformedCase{
		// Parse: the document.
		{"empty file", "", "empty workflow", 1},
		{"only a comment", "# nothing here\n", "empty workflow", 1},
		{"null document", "---\n", "empty workflow", 1},
		{"too large", "name: x\n" + strings.Repeat("#", workflow.MaxSourceBytes), "the limit is 1048576", 0},
		{"syntax error", lines("name: x", "steps: [a", "  b"), "invalid YAML: did not find expected ',' or ']'", 2},
		// yaml.v3 reports its parser's problems 0-based and its scanner's 1-based.
		{"unclosed flow sequence", lines("name: x", "steps:", "  a: {action: noop, needs: [start, success: [ok]}"), "invalid YAML: did not find expected ',' or ']'", 3},
		{"unclosed flow mapping", lines("name: x", "steps:", "  a: {action: noop, needs: [start]", "  b: 1"), "invalid YAML: did not find expected ',' or '}'", 3},
		{"block sequence broken", lines("name: x", "steps:", "  - a", "  b: 2"), "invalid YAML: did not find expected '-' indicator", 3},
		{"scanner error", lines("name: x", "steps:", "  a: b: c"), "invalid YAML: mapping values are not allowed in this context", 3},
		{"tab indentation", lines("name: x", "\tsteps: 1"), "invalid YAML: found a tab character", 2},
		{"multiple documents", lines("name: a", "steps: {s: {action: noop, needs: [start]}}", "---", "name: b"), "multiple YAML documents", 3},
		{"anchor", lines("name: a", "steps:", "  s: &x {action: noop, needs: [start]}", "  t: *x"), "anchors and aliases are not allowed", 3},
		{"billion laughs", lines("name: a", "x: &a [1, 1]", "y: &b [*a, *a]", "z: [*b, *b]"), "anchors and aliases are not allowed", 2},
		{"not a mapping", "- a\n- b\n", "workflow must be a mapping with name, external and steps, got list", 1},
		// Parse: top-level fields.
		{"unknown top field", lines("name: a", "step: {}"), `unknown field "step" (did you mean "steps"?)`, 2},
		{"unknown top field far", lines("name: a", "version: 2"), `unknown field "version" (known: name, external, steps, publish)`, 2},
		{"duplicate top key", lines("name: a", "name: b", "steps: {s: {action: noop, needs: [start]}}"), `duplicate key "name" (first at line 1)`, 2},
		{"missing name", lines("steps:", "  s: {action: noop, needs: [start]}"), "missing name", 1},
		{"name not a string", lines("name: 5", "steps: {}"), "name: must be a string, got number", 1},
		{"invalid workflow name", lines("name: Media Thread", "steps: {}"), `invalid workflow name "Media Thread"`, 1},
		{"missing steps", lines("name: a"), "missing steps", 1},
		{"steps is a list", lines("name: a", "steps:", "  - {action: noop}"), "steps: must be a mapping of step name to step, got list", 3},
		{"no steps", lines("name: a", "steps: {}"), "no steps", 2},
		{"too many steps", manySteps.String(), "501 steps; the limit is 500", workflow.MaxSteps + 3},
		{"external not a list", lines("name: a", "external: et-job-finished", "steps: {}"), "external: must be a list of external event names, got string", 2},
		// Parse: steps.
		{"invalid step name", lines("name: a", "steps:", "  Extract_Meta: {action: noop, needs: [start]}"), `invalid step name "Extract_Meta"`, 3},
		{"step name too long", lines("name: a", "steps:", "  "+strings.Repeat("s", 101)+": {action: noop, needs: [start]}"), "is 101 characters; the limit is 100", 3},
		{"step not a mapping", lines("name: a", "steps:", "  s: noop"), `step "s": a step must be a mapping with action and needs, got string`, 3},
		{"duplicate step", lines("name: a", "steps:", "  s: {action: noop, needs: [start]}", "  s: {action: noop, needs: [start]}"), `duplicate key "s" (first at line 3)`, 4},
		{"unknown step field", lines("name: a", "steps:", "  s:", "    action: noop", "    need: [start]"), `step "s": unknown field "need" (did you mean "needs"?)`, 5},
		{"duplicate step field", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    action: http"), `duplicate key "action" (first at line 4)`, 6},
		{"missing action", lines("name: a", "steps:", "  s: {needs: [start]}"), `step "s": missing action`, 3},
		{"action not a string", lines("name: a", "steps:", "  s:", "    action: [noop]", "    needs: [start]"), `step "s": action: must be a string, got list`, 4},
		{"missing needs", lines("name: a", "steps:", "  s: {action: noop}"), `step "s": missing needs`, 3},
		{"empty needs", lines("name: a", "steps:", "  s: {action: noop, needs: []}"), `step "s": needs: empty needs`, 3},
		{"null needs", lines("name: a", "steps:", "  s:", "    action: noop", "    needs:"), `needs: empty needs`, 5},
		{"needs a string", lines("name: a", "steps:", "  s: {action: noop, needs: start}"), "needs: must be a list of event names, got string", 3},
		{"needs a number", lines("name: a", "steps:", "  s:", "    action: noop", "    needs:", "      - start", "      - 42"), "needs: event names must be strings, got number", 7},
		{"invalid event name", lines("name: a", "steps:", "  s: {action: noop, needs: [Start]}"), `invalid event name "Start"`, 3},
		{"duplicate need", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start,", "      start]"), `needs: duplicate event "start"`, 6},
		{"duplicate success", lines("name: a", "steps:", "  s: {action: noop, needs: [start], success: [x, x]}"), `success: duplicate event "x"`, 3},
		{"negative concurrency", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    concurrency: -1"), "concurrency: must not be negative, got -1", 6},
		{"fractional concurrency", lines("name: a", "steps:", "  s: {action: noop, needs: [start], concurrency: 1.5}"), "concurrency: must be an integer, got number", 3},
		{"negative attempts", lines("name: a", "steps:", "  s: {action: noop, needs: [start], attempts: -2}"), "attempts: must not be negative", 3},
		{"too many attempts", lines("name: a", "steps:", "  s: {action: noop, needs: [start], attempts: 1000}"), "attempts: must be at most 100", 3},
		{"bad duration", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    timeout: 30x"), `timeout: invalid duration "30x"`, 6},
		{"numeric timeout", lines("name: a", "steps:", "  s: {action: noop, needs: [start], timeout: 30}"), `timeout: must be a duration string such as "30s"`, 3},
		{"negative timeout", lines("name: a", "steps:", "  s: {action: noop, needs: [start], timeout: -5s}"), "timeout: must not be negative", 3},
		{"progress weight above 1", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    progress_weight: 1.5"), "progress_weight: must be between 0 and 1, got 1.5", 6},
		{"progress weight negative", lines("name: a", "steps:", "  s: {action: noop, needs: [start], progress_weight: -0.1}"), "progress_weight: must be between 0 and 1, got -0.1", 3},
		{"progress weight string", lines("name: a", "steps:", "  s: {action: noop, needs: [start], progress_weight: half}"), "progress_weight: must be a number, got string", 3},
		{"with a list", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with: [url]"), "with: must be a mapping of settings, got list", 6},
		{"with NaN", lines("name: a", "steps:", "  s:", "    action: limited", "    needs: [start]", "    with:", "      ratio: .nan"), "with.ratio: number .nan is not finite", 7},
		{"with merge key", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with:", "      <<: {url: x}"), "merge keys (<<) are not allowed", 7},
		{"with custom tag", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with: {url: !secret x}"), `unsupported YAML tag "!secret"`, 6},
		{"with duplicate key", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with:", "      url: a", "      url: b"), `with: duplicate key "url" (first at line 7)`, 8},
		{"with too deep", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with: {body: "+strings.Repeat("[", 40)+strings.Repeat("]", 40)+"}"), "nested deeper than 32 levels", 6},

		// Validate: actions and settings.
		{"unknown action", lines("name: a", "steps:", "  s:", "    action: htp", "    needs: [start]"), `step "s": action: unknown action "htp" (did you mean "http"?)`, 4},
		{"unknown action far", lines("name: a", "steps:", "  s: {action: transmogrify, needs: [start]}"), `unknown action "transmogrify"`, 3},
		{"unknown setting", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with:", "      url: https://example.com", "      urll: x"), `with.urll: unknown setting "urll" for action "http" (did you mean "url"?)`, 8},
		{"setting for noop", lines("name: a", "steps:", "  s: {action: noop, needs: [start], with: {x: 1}}"), `unknown setting "x": action "noop" takes no settings`, 3},
		{"missing required setting", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with: {method: POST}"), `with: missing required setting "url" of action "http"`, 6},
		{"missing required setting no with", lines("name: a", "steps:", "  s: {action: email, needs: [start]}"), `missing required setting "to"`, 3},
		{"wrong setting type", lines("name: a", "steps:", "  s:", "    action: http", "    needs: [start]", "    with:", "      url: 42"), "with.url: must be a string, got number", 7},
		{"wrong strings entry", lines("name: a", "steps:", "  s:", "    action: exec", "    needs: [start]", "    with:", "      command: [ls, 1]"), "with.command: entry 1 must be a string, got number", 7},
		{"bad duration setting", lines("name: a", "steps:", "  s:", "    action: exec", "    needs: [start]", "    with:", "      command: [ls]", "      grace: soon"), `with.grace: invalid duration "soon"`, 8},
		{"object setting", lines("name: a", "steps:", "  s:", "    action: exec", "    needs: [start]", "    with: {command: [ls], env: [A=1]}"), "with.env: must be a mapping, got list", 6},
		{"int setting", lines("name: a", "steps:", "  s:", "    action: limited", "    needs: [start]", "    with: {n: 2.5}"), "with.n: must be an integer, got number", 6},
		{"action Validate names key", lines("name: a", "steps:", "  s:", "    action: limited", "    needs: [start]", "    with:", "      n: 11"), "with.n: must be at most 10", 7},
		{"action Validate other error", lines("name: a", "steps:", "  s:", "    action: limited", "    needs: [start]", "    with:", "      ratio: 0.5"), "with: ratio needs n", 6},

		// Parse and Validate: when: conditions.
		{"when not a string", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    when: true"), `when: must be a condition in quotes, such as "depth == 0", got boolean`, 6},
		{"when a tag", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    when: !root"), "when: must be a condition in quotes", 6},
		{"when empty", lines("name: a", "steps:", "  s: {action: noop, needs: [start], when: ' '}"), "when: empty condition", 3},
		{"when syntax", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    when: depth = 0"), `step "s": when: invalid condition "depth = 0": column 7: unexpected "="; compare with "=="`, 6},
		{"when unknown variable", lines("name: a", "steps:", "  s: {action: noop, needs: [start], when: deep == 0}"), `when: invalid condition "deep == 0": column 1: unknown variable "deep"`, 3},
		{"when not boolean", lines("name: a", "steps:", "  s: {action: noop, needs: [start]}", "  t:", "    action: noop", "    needs: [start]", "    when: content_type"), "condition is a string, not a boolean", 7},
		{"when type mismatch", lines("name: a", "steps:", "  s: {action: noop, needs: [start], when: 'depth == \"0\"'}"), `"==" compares an integer with a string`, 3},

		{"deadline not a duration", lines("name: a", "external: [x]", "steps:", "  s: {action: noop, needs: [x], deadline: 1}"), `deadline: must be a duration string such as "30s"`, 4},
		{"deadline bad", lines("name: a", "external: [x]", "steps:", "  s:", "    action: noop", "    needs: [x]", "    deadline: 1d"), `deadline: invalid duration "1d"`, 7},
		{"deadline without external", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    deadline: 1h"), `step "s": deadline: a deadline bounds a wait for an external event, and the step needs none`, 6},

		// Validate: events.
		{"need never produced", lines("name: a", "steps:", "  s: {action: noop, needs: [start], success: [metadata-extracted]}", "  t:", "    action: noop", "    needs: [metadata-extractd]"),
			`step "t": needs: event "metadata-extractd" is never produced: no step, action outcome, start, children.done or external event fires it (did you mean "metadata-extracted"?)`, 6},
		{"cycle without entry", lines("name: a", "steps:", "  a: {action: noop, needs: [start, b-done], success: [a-done]}", "  b:", "    action: noop", "    needs: [a-done]", "    success: [b-done]"),
			`step "b": needs: step can never run: "a-done" is produced only by steps that can never run (a)`, 6},
		{"transitively dead", lines("name: a", "steps:", "  a: {action: noop, needs: [nowhere], success: [x]}", "  b: {action: noop, needs: [x]}"),
			`step "b": needs: step can never run: "x" is produced only by steps that can never run (a)`, 4},
		{"needs fail", lines("name: a", "steps:", "  s: {action: noop, needs: [start, fail]}"), `needs: "fail" is a built-in sink; no step can wait for it`, 3},
		{"fires start", lines("name: a", "steps:", "  s:", "    action: noop", "    needs: [start]", "    failure: [start]"), `failure: "start" is fired by the engine; a step cannot fire it`, 6},
		{"external named start", lines("name: a", "external:", "  - start", "steps:", "  s: {action: noop, needs: [start]}"), `external: external event "start" collides with the built-in event of that name`, 3},
		{"external named ok", lines("name: a", "external: [ok]", "steps:", "  s: {action: noop, needs: [start]}"), `external event "ok" collides`, 2},
		{"duplicate external", lines("name: a", "external: [x, x]", "steps:", "  s: {action: noop, needs: [x]}"), `external: duplicate external event "x"`, 2},
	}
}

func TestParseValidateMalformed(t *testing.T) {
	t.Parallel()
	cases := malformedCases()
	seen := make(map[string]bool)
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := parseAndValidate(tc.src)
			assertProblem(t, err, tc.want, tc.line)
		})
	}
}

func TestParseErrorFormat(t *testing.T) {
	t.Parallel()
	_, err := workflow.Parse([]byte(lines("name: a", "steps:", "  s: {action: noop, needs: start}")), "wf.yaml")
	want := `wf.yaml:3: step "s": needs: must be a list of event names, got string`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v; want %s", err, want)
	}
	_, err = workflow.Parse([]byte("name: a\n"), "")
	if err == nil || err.Error() != "line 1: missing steps" {
		t.Fatalf("error %v; want %q", err, "line 1: missing steps")
	}
}

func TestParseFields(t *testing.T) {
	t.Parallel()
	src := lines(
		"# the submit step of a larger workflow",
		"name: fields",
		"external: [et-job-finished]",
		"steps:",
		"  b-first: {action: noop, needs: [start], success: [a]}",
		"  a-second:",
		"    action: http",
		"    needs: [a, et-job-finished]",
		"    success: [submitted]",
		"    failure: [fail]",
		"    concurrency: 2",
		"    timeout: 1m30s",
		"    attempts: 5",
		"    progress_weight: 0.5",
		"    with:",
		"      url: https://example.com/submit?a=1&b=<2>",
		"      retry: true",
		"      headers: {x-n: 0x10, x-f: 1.5, x-null: ~, x-date: 2024-01-02}",
	)
	def, _ := mustValid(t, src)
	if def.Name != "fields" || len(def.External) != 1 || def.External[0] != "et-job-finished" {
		t.Fatalf("definition %+v", def)
	}
	if len(def.Steps) != 2 || def.Steps[0].Name != "b-first" || def.Steps[1].Name != "a-second" {
		t.Fatalf("steps not in source order: %+v", def.Steps)
	}
	s := def.Step("a-second")
	if s.Line != 6 || def.Steps[0].Line != 5 {
		t.Errorf("lines %d, %d; want 6, 5", s.Line, def.Steps[0].Line)
	}
	if s.Concurrency != 2 || s.Attempts != 5 || s.MaxAttempts() != 5 || time.Duration(s.Timeout) != 90*time.Second {
		t.Errorf("tuning %+v", s)
	}
	if s.ProgressWeight == nil || *s.ProgressWeight != 0.5 {
		t.Errorf("progress weight %v", s.ProgressWeight)
	}
	if def.Steps[0].ProgressWeight != nil || def.Steps[0].MaxAttempts() != workflow.DefaultAttempts {
		t.Errorf("defaults %+v", def.Steps[0])
	}
	h := s.With["headers"].(map[string]any)
	if h["x-n"] != 16 || h["x-f"] != 1.5 || h["x-null"] != nil || h["x-date"] != "2024-01-02" || s.With["retry"] != true {
		t.Errorf("with %#v", s.With)
	}
	if got := strings.Join(s.Needs, ","); got != "a,et-job-finished" {
		t.Errorf("needs %s", got)
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	yamlSrc := lines(
		"name: j",
		"steps:",
		"  s:",
		"    action: http",
		"    needs: [start]",
		"    timeout: 30s",
		"    with: {url: \"https://x\", body: {b: [1, 2.5, true, null], a: \"\\u00e9\"}}",
	)
	jsonSrc := `{
  "steps": {
    "s": {"with": {"body": {"a": "é", "b": [1, 2.5, true, null]}, "url": "https://x"}, "timeout": "30s", "needs": ["start"], "action": "http"}
  },
  "name": "j"
}`
	a, _ := mustValid(t, yamlSrc)
	b, _ := mustValid(t, jsonSrc)
	if workflow.Digest(a) != workflow.Digest(b) || workflow.Digest(a) == "" {
		t.Fatalf("YAML and JSON digests differ: %s vs %s", workflow.Digest(a), workflow.Digest(b))
	}
	_, err := workflow.Parse([]byte("{\n  \"name\": \"j\",\n  \"steps\": {\"s\": {\"action\": \"http\", \"needs\": \"start\"}}\n}"), "j.json")
	assertProblem(t, err, "needs: must be a list", 3)
}

func TestMarshalCanonical(t *testing.T) {
	t.Parallel()
	def, _ := mustValid(t, lines(
		"name: m",
		"external: [ext]",
		"steps:",
		"  z:",
		"    progress_weight: 1",
		"    with: {url: \"<x>&\", method: GET}",
		"    needs: [start]",
		"    action: http",
		"    timeout: 90s",
		"  a: {action: noop, needs: [ext], failure: [fail]}",
	))
	got, err := workflow.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"m","external":["ext"],"steps":{"z":{"action":"http","needs":["start"],"with":{"method":"GET","url":"<x>&"},"timeout":"1m30s","progress_weight":1},"a":{"action":"noop","needs":["ext"],"failure":["fail"]}}}`
	if string(got) != want {
		t.Fatalf("Marshal:\n got %s\nwant %s", got, want)
	}
	again, err := workflow.Parse(got, "stored.json")
	if err != nil {
		t.Fatal(err)
	}
	got2, _ := workflow.Marshal(again)
	if !bytes.Equal(got, got2) {
		t.Fatalf("not stable:\n%s\n%s", got, got2)
	}
	if len(workflow.Digest(def)) != 64 {
		t.Fatalf("digest %q", workflow.Digest(def))
	}
	// A change anywhere is a new version.
	def.Steps[1].Attempts = 2
	if workflow.Digest(def) == workflow.Digest(again) {
		t.Fatal("digest did not change")
	}
}

func TestMarshalRejects(t *testing.T) {
	t.Parallel()
	if _, err := workflow.Marshal(nil); err == nil {
		t.Error("nil definition marshalled")
	}
	dup := &workflow.Definition{Name: "d", Steps: []*workflow.Step{
		{Name: "a", Action: "noop", Needs: []string{"start"}},
		{Name: "a", Action: "noop", Needs: []string{"start"}},
	}}
	if _, err := workflow.Marshal(dup); err == nil || !strings.Contains(err.Error(), `duplicate step "a"`) {
		t.Errorf("duplicate steps: %v", err)
	}
	if workflow.Digest(dup) != "" {
		t.Error("digest of an unmarshallable definition")
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	d := workflow.Duration(90 * time.Second)
	b, err := d.MarshalJSON()
	if err != nil || string(b) != `"1m30s"` {
		t.Fatalf("marshal %s %v", b, err)
	}
	var back workflow.Duration
	if err := back.UnmarshalJSON([]byte(`"1m30s"`)); err != nil || back != d {
		t.Fatalf("unmarshal %v %v", back, err)
	}
	if err := back.UnmarshalJSON([]byte(`90`)); err == nil {
		t.Fatal("number accepted")
	}
	if err := back.UnmarshalJSON([]byte(`"soon"`)); err == nil {
		t.Fatal("bad duration accepted")
	}
}
