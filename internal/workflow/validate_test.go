package workflow_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/workflow"
)

// mediathread is Banzai's Mediathread workflow (DESIGN §3) with real settings in place of {...}.
const mediathread = `name: mediathread-video
external: [et-job-finished]
steps:
  extract-metadata: {action: exec, needs: [start], success: [metadata-extracted], failure: [failed], with: {command: [mediainfo, --output=JSON]}}
  create-transcode: {action: http, needs: [start], success: [et-job-created], failure: [failed], with: {url: "https://transcoder.example/jobs", method: POST}}
  pull-thumbnails:  {action: http, needs: [et-job-finished], success: [poster-created], failure: [failed], with: {url: "https://transcoder.example/thumbs"}}
  copy-to-cunix:    {action: exec, needs: [et-job-finished], success: [uploaded-to-cunix], failure: [failed], with: {command: [rsync, out/, cunix:h264/]}}
  submit:           {action: http, needs: [metadata-extracted, poster-created, uploaded-to-cunix], success: [submitted], failure: [failed], with: {url: "https://mediathread.example/api"}}
  email-success:    {action: email, needs: [submitted], success: [ok], with: {to: uploader@example.edu}}
  email-failure:    {action: email, needs: [failed], success: [fail], failure: [fail], with: {to: uploader@example.edu}}
`

// validExamples are workflows that must parse and validate.
var validExamples = map[string]string{
	"mediathread": mediathread,
	"router": `name: documents
steps:
  detect: {action: detect, needs: [start], failure: [fail]}
  unpack: {action: noop, needs: [detected.archive]}
  pdf:    {action: noop, needs: [detected.pdf], success: [has-text]}
  summary: {action: noop, needs: [has-text, children.done]}
`,
	"configured outcomes": `name: emitter
steps:
  route: {action: emit, needs: [start], with: {events: [select.unknown, select.done]}}
  fetch: {action: noop, needs: [select.unknown], success: [ok]}
  done:  {action: noop, needs: [select.done]}
`,
	"retry loop": `# a step may wait for an event it fires itself once something else fires it first
name: loop
steps:
  poll: {action: noop, needs: [start], success: [polled]}
  again: {action: noop, needs: [polled], failure: [polled]}
`,
	"json": `{"name": "j", "steps": {"s": {"action": "noop", "needs": ["start"], "success": ["ok"]}}}`,
}

func TestValidExamples(t *testing.T) {
	t.Parallel()
	for name, src := range validExamples {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mustValid(t, src)
		})
	}
}

func TestMediathread(t *testing.T) {
	t.Parallel()
	def, warnings := mustValid(t, mediathread)
	// et-job-created is a fact for the record: nothing waits for it.
	if len(warnings) != 1 || warnings[0].Step != "create-transcode" || warnings[0].Field != "success" || warnings[0].Line != 5 ||
		warnings[0].Message != `event "et-job-created" is fired but no step needs it` {
		t.Errorf("warnings: %+v; want the one for et-job-created", warnings)
	}
	if len(def.Steps) != 7 || def.Steps[4].Name != "submit" || def.Steps[4].Line != 8 {
		t.Fatalf("steps: %+v", def.Steps)
	}
	if !def.IsExternal("et-job-finished") || def.NeedsChildrenDone() {
		t.Error("external / children.done")
	}
	if got := len(def.Consumers("failed")); got != 1 {
		t.Errorf("consumers of failed: %d", got)
	}
}

func TestWhen(t *testing.T) {
	t.Parallel()
	def, warnings := mustValid(t, `name: w
steps:
  approve: {action: noop, needs: [start], when: root && metadata.kind == "sheet"}
  digest:  {action: noop, needs: [start], when: "!root"}
  never:   {action: noop, needs: [start], when: 1 == 2}
  all:     {action: noop, needs: [start]}
`)
	if got := def.Step("approve").When; got != `root && metadata.kind == "sheet"` {
		t.Errorf("approve.When = %q", got)
	}
	if def.Step("all").When != "" {
		t.Errorf("all.When = %q, want empty", def.Step("all").When)
	}
	assertWarning(t, warnings, `condition "1 == 2" can never hold: the step never runs`)
	if len(warnings) != 1 || warnings[0].Line != 5 || warnings[0].Step != "never" || warnings[0].Field != "when" {
		t.Errorf("warnings %+v, want one on line 5, step never, field when", warnings)
	}
	// The condition is part of the definition's identity and survives the canonical form.
	canon, err := workflow.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	back, err := workflow.Parse(canon, "canonical")
	if err != nil {
		t.Fatal(err)
	}
	if back.Step("digest").When != "!root" || workflow.Digest(back) != workflow.Digest(def) {
		t.Errorf("canonical form %s lost the condition", canon)
	}
	dl, _ := mustValid(t, "name: d\nexternal: [approved]\nsteps:\n  a: {action: noop, needs: [start, approved], deadline: 90m}\n")
	if c, _ := workflow.Marshal(dl); dl.Step("a").Deadline != workflow.Duration(90*time.Minute) || !strings.Contains(string(c), `"deadline":"1h30m0s"`) {
		t.Errorf("deadline %v, canonical %s", dl.Step("a").Deadline, c)
	}
	other, _ := mustValid(t, strings.Replace(string(canon), `"!root"`, `"root"`, 1))
	if workflow.Digest(other) == workflow.Digest(def) {
		t.Error("a different condition gives the same digest")
	}
}

func TestUnconsumedEvents(t *testing.T) {
	t.Parallel()
	_, warnings := mustValid(t, `name: w
steps:
  a: {action: noop, needs: [start], success: [a.done, ok], failure: [a.failed, fail]}
  b: {action: noop, needs: [a.done], success: [b.done]}
  c: {action: noop, needs: [b.done]}
`)
	if len(warnings) != 1 || warnings[0].Step != "a" || warnings[0].Field != "failure" || warnings[0].Line != 3 ||
		warnings[0].Message != `event "a.failed" is fired but no step needs it` {
		t.Errorf("warnings %+v; want one for a.failed (ok and fail are sinks)", warnings)
	}
}

func TestNoPathToEnd(t *testing.T) {
	t.Parallel()
	_, warnings := mustValid(t, `name: w
steps:
  a: {action: noop, needs: [start], success: [go], failure: [go]}
  b: {action: noop, needs: [go], success: [back], failure: [back]}
  c: {action: noop, needs: [back], success: [go], failure: [go]}
  d: {action: noop, needs: [start], success: [again], failure: [ok]}
  e: {action: noop, needs: [again], success: [again2], failure: [again2]}
  f: {action: noop, needs: [again2], success: [again], failure: [again]}
  g: {action: noop, needs: [again2], success: [again]}
`)
	var got []string
	for _, w := range warnings {
		if strings.Contains(w.Message, "no path to an end") {
			got = append(got, fmt.Sprintf("%s:%d", w.Step, w.Line))
		}
	}
	// a, b and c only feed the go/back loop; d ends when it fails (ok); e and f loop too, but
	// e also leads to g, which ends when it fails (it fires nothing).
	if want := []string{"a:3", "b:4", "c:5"}; !slices.Equal(got, want) {
		t.Errorf("no path to an end for %v, want %v (warnings %+v)", got, want, warnings)
	}
}

func TestValidateWarnings(t *testing.T) {
	t.Parallel()
	_, warnings := mustValid(t, `name: w
external: [unused-ext]
steps:
  detect: {action: detect, needs: [start]}
  pdf: {action: noop, needs: [detected.pdf]}
`)
	assertWarning(t, warnings, `outcome "detected.archive" of action "detect" is not needed by any step`)
	assertWarning(t, warnings, `external event "unused-ext" is not needed by any step`)
	if len(warnings) != 2 {
		t.Errorf("warnings: %+v", warnings)
	}
	if warnings[0].Line != 2 || warnings[0].Field != "external" || warnings[1].Step != "detect" || warnings[1].Line != 4 {
		t.Errorf("warning positions: %+v", warnings)
	}
}

func TestValidateWarningsWithErrors(t *testing.T) {
	t.Parallel()
	_, warnings, err := parseAndValidate(`name: w
steps:
  detect: {action: detect, needs: [start]}
  pdf: {action: noop, needs: [detected.pfd]}
`)
	assertProblem(t, err, `(did you mean "detected.pdf"?)`, 4)
	assertWarning(t, warnings, `outcome "detected.archive"`)
}

func TestValidationErrorFormat(t *testing.T) {
	t.Parallel()
	_, _, err := parseAndValidate(`name: fmt
steps:
  a: {action: noop, needs: [start], with: {x: 1}}
  b: {action: htp, needs: [nope]}
`)
	var ve *workflow.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T %v", err, err)
	}
	want := strings.Join([]string{
		`workflow "fmt": line 3: step "a": with.x: unknown setting "x": action "noop" takes no settings`,
		`workflow "fmt": line 4: step "b": action: unknown action "htp" (did you mean "http"?)`,
		`workflow "fmt": line 4: step "b": needs: event "nope" is never produced: no step, action outcome, start, children.done or external event fires it`,
	}, "\n")
	if err.Error() != want {
		t.Fatalf("Error():\n%s\nwant:\n%s", err, want)
	}
}

// TestValidateBuiltInGo checks definitions built in Go, with no source positions.
func TestValidateBuiltInGo(t *testing.T) {
	t.Parallel()
	lk, _ := lookup()
	def := &workflow.Definition{Name: "go", Steps: []*workflow.Step{
		{Name: "step", Action: "noop", Needs: []string{"start"}},
		{Name: "Step", Action: "noop", Needs: []string{"start"}},
		{Name: "empty", Action: "noop"},
		{Name: "neg", Action: "noop", Needs: []string{"start"}, Concurrency: -1},
	}}
	_, err := workflow.Validate(def, lk)
	for _, want := range []string{
		`step "Step": step name "Step" collides with step "step"`,
		`step "empty": needs: empty needs`,
		`step "neg": concurrency: must not be negative`,
	} {
		assertProblem(t, err, want, 0)
	}
	if _, err := workflow.Validate(nil, lk); err == nil {
		t.Error("nil definition validated")
	}
	// Without a lookup every action is unknown.
	if _, err := workflow.Validate(&workflow.Definition{Name: "x", Steps: []*workflow.Step{{Name: "s", Action: "noop", Needs: []string{"start"}}}}, nil); err == nil {
		t.Error("nil lookup accepted an action")
	}
}

func TestValidatePanickingAction(t *testing.T) {
	t.Parallel()
	lk := func(name string) (action.Spec, bool) {
		return action.Spec{
			Name:        name,
			Validate:    func(map[string]any) error { panic("boom") },
			OutcomesFor: func(map[string]any) []string { panic("boom") },
		}, true
	}
	def, err := workflow.Parse([]byte("name: p\nsteps:\n  s: {action: bad, needs: [start]}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = workflow.Validate(def, lk)
	assertProblem(t, err, "settings check of the action panicked: boom", 3)
}

// TestPublishedEventsAreUsed: an event a workflow-level publish: rule publishes is used — its
// consumer is the sink — so neither an action's outcome, a success or failure event nor an
// external event is warned about when it is only published.
func TestPublishedEventsAreUsed(t *testing.T) {
	t.Parallel()
	_, warnings := mustValid(t, `name: w
external: [ext]
publish:
  - {sink: out, on: [detected.archive, a.failed, ext], subject: w.events}
steps:
  detect: {action: detect, needs: [start]}
  pdf: {action: noop, needs: [detected.pdf]}
  a: {action: noop, needs: [start], success: [ok], failure: [a.failed]}
`)
	if len(warnings) != 0 {
		t.Errorf("warnings %+v; want none: every event fired is needed or published", warnings)
	}
	// A step's own publish: rules publish its outcome (complete, failed), not its events: an
	// event fired and published by no workflow-level rule is still unused.
	_, warnings = mustValid(t, `name: w
steps:
  a: {action: noop, needs: [start], success: [a.done], publish: [{sink: out, on: [complete]}]}
`)
	assertWarning(t, warnings, `event "a.done" is fired but no step needs it`)
}
