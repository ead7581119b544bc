package workflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/when"
)

// Lookup returns the spec of the named action and whether it exists. [action.Catalog.Spec]
// satisfies it.
type Lookup func(action string) (action.Spec, bool)

// Severity is how bad a [Diagnostic] is.
type Severity string

// The severities of a [Diagnostic].
const (
	SeverityError   Severity = "error"   // the workflow cannot be stored or run
	SeverityWarning Severity = "warning" // probably a mistake, but the workflow can run
)

// Diagnostic is one problem found in a workflow.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Step     string   `json:"step,omitempty"`  // the step's name; empty for workflow-level problems
	Field    string   `json:"field,omitempty"` // such as "needs", "with.url" or "external"
	Line     int      `json:"line,omitempty"`  // 1-based source line; 0 when unknown
	Message  string   `json:"message"`
}

// ValidationError is the error [Validate] returns: every error-severity problem found.
type ValidationError struct {
	Workflow    string
	Diagnostics []Diagnostic
}

// Error lists the problems one per line as `workflow "NAME": line L: step "S": FIELD: MESSAGE`,
// leaving out the parts that are empty.
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, d := range e.Diagnostics {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "workflow %q: ", e.Workflow)
		if d.Line > 0 {
			fmt.Fprintf(&b, "line %d: ", d.Line)
		}
		writeStepField(&b, d.Step, d.Field)
		b.WriteString(d.Message)
	}
	return b.String()
}

// Validate checks def against the catalog of actions and the rules of DESIGN §3:
//   - every action exists (an unknown one gets the closest of actions as a suggestion) and the
//     step's with: settings match its declared settings and its Validate function;
//   - every event a step needs can be produced: by start, children.done, a declared external
//     event, a step's success or failure, or an action's outcome;
//   - every step can run: a step that needs an event only steps that can never run produce
//     (including a cycle with no way in) is an error;
//   - a deadline is set only on a step that needs an external event;
//   - every when: condition parses, reads only known variables and is a boolean;
//   - names do not collide: step names (case-insensitively), external events with the built-in
//     start, children.done, fail and ok, duplicate list entries; fail and ok cannot be needed,
//     start and children.done cannot be fired by a step.
//
// Warnings — an outcome, success, failure or external event that no step needs, a when:
// condition that can never hold — are returned whatever the
// outcome; problems of error severity are returned as a *[ValidationError]. Diagnostics are
// sorted by line. actions, when given, are the names the catalog holds, used for suggestions.
// Validate does not modify def.
func Validate(def *Definition, lookup Lookup, actions ...string) (warnings []Diagnostic, err error) {
	if def == nil {
		return nil, &ValidationError{Diagnostics: []Diagnostic{{Severity: SeverityError, Message: "nil definition"}}}
	}
	v := &validator{def: def, lookup: lookup, actions: actions, specs: make(map[*Step]*action.Spec)}
	v.structure()
	v.conditions()
	v.keyed()
	v.actionsAndSettings()
	v.events()
	slices.SortStableFunc(v.diags, func(a, b Diagnostic) int { return a.Line - b.Line })
	var errs []Diagnostic
	for _, d := range v.diags {
		if d.Severity == SeverityError {
			errs = append(errs, d)
		} else {
			warnings = append(warnings, d)
		}
	}
	if len(errs) > 0 {
		return warnings, &ValidationError{Workflow: def.Name, Diagnostics: errs}
	}
	return warnings, nil
}

type validator struct {
	def     *Definition
	lookup  Lookup
	actions []string
	specs   map[*Step]*action.Spec // resolved actions whose settings are valid
	diags   []Diagnostic
}

func (v *validator) add(sev Severity, line int, step, field, format string, args ...any) {
	v.diags = append(v.diags, Diagnostic{Severity: sev, Step: step, Field: field, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) errorf(line int, step, field, format string, args ...any) {
	v.add(SeverityError, line, step, field, format, args...)
}

// structure repeats Parse's shape checks for definitions built in Go and adds the name
// collision checks.
func (v *validator) structure() {
	def := v.def
	nameLine := 0
	if def.pos != nil {
		nameLine = def.pos.name
	}
	if msg := checkName("workflow name", def.Name); msg != "" {
		v.errorf(nameLine, "", "name", "%s", msg)
	}
	if len(def.Steps) == 0 {
		v.errorf(0, "", "steps", "no steps; a workflow needs at least one")
	}
	if len(def.Steps) > MaxSteps {
		v.errorf(0, "", "steps", "%d steps; the limit is %d", len(def.Steps), MaxSteps)
	}
	seenExt := make(map[string]bool)
	for i, e := range def.External {
		line := 0
		if def.pos != nil && i < len(def.pos.external) {
			line = def.pos.external[i]
		}
		if msg := checkName("external event name", e); msg != "" {
			v.errorf(line, "", "external", "%s", msg)
		}
		switch e {
		case EventStart, EventChildrenDone, EventFail, EventOK:
			v.errorf(line, "", "external", "external event %q collides with the built-in event of that name", e)
		}
		if seenExt[e] {
			v.errorf(line, "", "external", "duplicate external event %q", e)
		}
		seenExt[e] = true
	}
	byFold := make(map[string]string)
	for i, s := range def.Steps {
		if s == nil {
			v.errorf(0, "", "steps", "step %d is nil", i)
			continue
		}
		if msg := checkName("step name", s.Name); msg != "" {
			v.errorf(s.Line, s.Name, "", "%s", msg)
		}
		fold := strings.ToLower(s.Name)
		if other, dup := byFold[fold]; dup {
			if other == s.Name {
				v.errorf(s.Line, s.Name, "", "duplicate step name %q", s.Name)
			} else {
				v.errorf(s.Line, s.Name, "", "step name %q collides with step %q (names are compared case-insensitively)", s.Name, other)
			}
		} else {
			byFold[fold] = s.Name
		}
		if s.Action == "" {
			v.errorf(s.Line, s.Name, "action", "missing action")
		}
		if len(s.Needs) == 0 {
			v.errorf(s.Line, s.Name, "needs", "empty needs; a step needs at least one event (use [start] for a first step)")
		}
		if s.Concurrency < 0 {
			v.errorf(s.fieldLine("concurrency"), s.Name, "concurrency", "must not be negative, got %d", s.Concurrency)
		}
		if s.Attempts < 0 || s.Attempts > MaxAttemptsLimit {
			v.errorf(s.fieldLine("attempts"), s.Name, "attempts", "must be between 0 and %d, got %d", MaxAttemptsLimit, s.Attempts)
		}
		if s.Deadline < 0 {
			v.errorf(s.fieldLine("deadline"), s.Name, "deadline", "must not be negative, got %s", s.Deadline)
		}
		if s.Deadline > 0 && !slices.ContainsFunc(s.Needs, def.IsExternal) {
			v.errorf(s.fieldLine("deadline"), s.Name, "deadline", "a deadline bounds a wait for an external event, and the step needs none")
		}
		if s.Timeout < 0 {
			v.errorf(s.fieldLine("timeout"), s.Name, "timeout", "must not be negative, got %s", s.Timeout)
		}
		if w := s.ProgressWeight; w != nil && !(*w >= 0 && *w <= 1) {
			v.errorf(s.fieldLine("progress_weight"), s.Name, "progress_weight", "must be between 0 and 1, got %v", *w)
		}
		for _, list := range []struct {
			field  string
			events []string
		}{{"needs", s.Needs}, {"success", s.Success}, {"failure", s.Failure}} {
			seen := make(map[string]bool, len(list.events))
			for j, e := range list.events {
				line := s.entryLine(list.field, j)
				if msg := checkName("event name", e); msg != "" {
					v.errorf(line, s.Name, list.field, "%s", msg)
				}
				if seen[e] {
					v.errorf(line, s.Name, list.field, "duplicate event %q", e)
				}
				seen[e] = true
				switch {
				case list.field == "needs" && (e == EventFail || e == EventOK):
					v.errorf(line, s.Name, list.field, "%q is a built-in sink; no step can wait for it", e)
				case list.field != "needs" && (e == EventStart || e == EventChildrenDone):
					v.errorf(line, s.Name, list.field, "%q is fired by the engine; a step cannot fire it", e)
				}
			}
		}
	}
}

// conditions checks each step's when: condition, and warns about one that can never hold.
func (v *validator) conditions() {
	for _, s := range v.def.Steps {
		if s == nil || s.When == "" {
			continue
		}
		e, err := when.Parse(s.When)
		if err != nil {
			v.errorf(s.fieldLine("when"), s.Name, "when", "invalid condition %q: %s", s.When, err)
			continue
		}
		if constant, value := e.Constant(); constant && !value {
			v.add(SeverityWarning, s.fieldLine("when"), s.Name, "when", "condition %q can never hold: the step never runs", s.When)
		}
	}
}

// actionsAndSettings resolves each step's action and checks its with: settings.
func (v *validator) actionsAndSettings() {
	for _, s := range v.def.Steps {
		if s == nil || s.Action == "" {
			continue
		}
		var spec action.Spec
		ok := false
		if v.lookup != nil {
			spec, ok = v.lookup(s.Action)
		}
		if !ok {
			msg := fmt.Sprintf("unknown action %q", s.Action)
			if c := closest(s.Action, v.actions); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			}
			v.errorf(s.fieldLine("action"), s.Name, "action", "%s", msg)
			continue
		}
		if v.settings(s, &spec) {
			v.specs[s] = &spec
		}
	}
}

// settings checks a step's with: against spec and reports whether they are valid.
func (v *validator) settings(s *Step, spec *action.Spec) bool {
	before := len(v.diags)
	declared := make(map[string]action.Setting, len(spec.Settings))
	names := make([]string, 0, len(spec.Settings))
	for _, st := range spec.Settings {
		declared[st.Name] = st
		names = append(names, st.Name)
	}
	keys := make([]string, 0, len(s.With))
	for k := range s.With {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		st, ok := declared[k]
		if !ok {
			switch {
			case len(names) == 0:
				v.errorf(s.withLine(k), s.Name, "with."+k, "unknown setting %q: action %q takes no settings", k, spec.Name)
			case closest(k, names) != "":
				v.errorf(s.withLine(k), s.Name, "with."+k, "unknown setting %q for action %q (did you mean %q?)", k, spec.Name, closest(k, names))
			default:
				v.errorf(s.withLine(k), s.Name, "with."+k, "unknown setting %q for action %q (known: %s)", k, spec.Name, strings.Join(names, ", "))
			}
			continue
		}
		if msg := settings.Check(st.Type, s.With[k]); msg != "" {
			v.errorf(s.withLine(k), s.Name, "with."+k, "%s", msg)
		}
	}
	for _, st := range spec.Settings {
		if _, ok := s.With[st.Name]; st.Required && !ok {
			v.errorf(s.fieldLine("with"), s.Name, "with", "missing required setting %q of action %q", st.Name, spec.Name)
		}
	}
	if len(v.diags) > before {
		return false
	}
	if spec.Validate != nil {
		if err := callValidate(spec.Validate, s.With); err != nil {
			var se *action.SettingError
			if errors.As(err, &se) {
				v.errorf(s.withLine(se.Key), s.Name, "with."+se.Key, "%s", se.Reason)
			} else {
				v.errorf(s.fieldLine("with"), s.Name, "with", "%s", err)
			}
			return false
		}
	}
	return true
}

// callValidate runs an action's Validate. A panic there is the action's bug, but the input
// comes from users (the web editor), so it becomes a message rather than a crash.
func callValidate(f func(map[string]any) error, with map[string]any) error {
	err := action.Safe(func() error { return f(with) })
	if pe := (*action.PanicError)(nil); errors.As(err, &pe) {
		return fmt.Errorf("settings check of the action panicked: %v", pe.Value)
	}
	return err
}

func callOutcomesFor(f func(map[string]any) []string, with map[string]any) (out []string, err error) {
	err = action.Safe(func() error { out = f(with); return nil })
	if pe := (*action.PanicError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("outcomes of the action panicked: %v", pe.Value)
	}
	return out, nil
}

// events checks that every needed event can be produced and every step can run, and warns
// about outcomes and external events that no step needs.
func (v *validator) events() {
	def := v.def
	steps := make([]*Step, 0, len(def.Steps))
	for _, s := range def.Steps {
		if s != nil {
			steps = append(steps, s)
		}
	}
	// What each step can fire: success, failure and its action's outcomes.
	fires := make(map[*Step][]string, len(steps))
	outcomes := make(map[*Step][]string, len(steps))
	for _, s := range steps {
		out := slices.Concat(s.Success, s.Failure)
		if s.Claim != nil {
			out = append(out, s.Claim.Reused...)
		}
		if spec := v.specs[s]; spec != nil {
			oc := slices.Clone(spec.Outcomes)
			if spec.OutcomesFor != nil {
				more, err := callOutcomesFor(spec.OutcomesFor, s.With)
				if err != nil {
					v.errorf(s.fieldLine("with"), s.Name, "with", "%s", err)
				}
				oc = append(oc, more...)
			}
			slices.Sort(oc)
			oc = slices.Compact(oc)
			outcomes[s] = oc
			out = append(out, oc...)
		}
		fires[s] = out
	}
	producers := make(map[string][]*Step)
	for _, s := range steps {
		for _, e := range fires[s] {
			if ps := producers[e]; len(ps) == 0 || ps[len(ps)-1] != s {
				producers[e] = append(ps, s)
			}
		}
	}
	builtin := func(e string) bool {
		return e == EventStart || e == EventChildrenDone || def.IsExternal(e)
	}

	// Fixed point: an event is available when it is built in or fired by a step that can run; a
	// step can run when all its needs are available.
	available := make(map[string]bool)
	runs := make(map[*Step]bool, len(steps))
	for changed := true; changed; {
		changed = false
		for _, s := range steps {
			if runs[s] {
				continue
			}
			ok := true
			for _, e := range s.Needs {
				if !builtin(e) && !available[e] {
					ok = false
					break
				}
			}
			if ok {
				runs[s], changed = true, true
				for _, e := range fires[s] {
					available[e] = true
				}
			}
		}
	}

	known := []string{EventStart, EventChildrenDone}
	known = append(known, def.External...)
	for e := range producers {
		known = append(known, e)
	}
	slices.Sort(known)
	for _, s := range steps {
		unproduced := false
		var blockedBy []string
		for j, e := range s.Needs {
			if builtin(e) || e == EventFail || e == EventOK {
				continue
			}
			if len(producers[e]) == 0 {
				unproduced = true
				msg := fmt.Sprintf("event %q is never produced: no step, action outcome, start, children.done or external event fires it", e)
				if c := closest(e, known); c != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", c)
				}
				v.errorf(s.entryLine("needs", j), s.Name, "needs", "%s", msg)
			} else if !available[e] {
				blockedBy = append(blockedBy, e)
			}
		}
		if runs[s] || unproduced || len(blockedBy) == 0 {
			continue
		}
		e := blockedBy[0]
		var names []string
		for _, p := range producers[e] {
			names = append(names, p.Name)
		}
		v.errorf(s.fieldLine("needs"), s.Name, "needs",
			"step can never run: %q is produced only by steps that can never run (%s)", e, strings.Join(names, ", "))
	}

	v.ends(steps, fires, runs)

	for _, s := range steps {
		for _, e := range outcomes[s] {
			if e == EventFail || e == EventOK || def.used(e) {
				continue
			}
			v.add(SeverityWarning, s.fieldLine("action"), s.Name, "action",
				"outcome %q of action %q is not needed by any step", e, s.Action)
		}
	}
	for _, s := range steps {
		for _, list := range []struct {
			field  string
			events []string
		}{{"success", s.Success}, {"failure", s.Failure}} {
			for j, e := range list.events {
				if e == EventFail || e == EventOK || def.used(e) {
					continue
				}
				v.add(SeverityWarning, s.entryLine(list.field, j), s.Name, list.field,
					"event %q is fired but no step needs it", e)
			}
		}
	}
	for i, e := range def.External {
		if !def.used(e) {
			line := 0
			if def.pos != nil && i < len(def.pos.external) {
				line = def.pos.external[i]
			}
			v.add(SeverityWarning, line, "", "external", "external event %q is not needed by any step", e)
		}
	}
}

// ends warns about steps that can run but have no path to an end: whether they succeed or fail,
// they fire events other steps need, and so on, round a loop. A path ends at a step that, on
// success or on failure, fires no event another step needs (nothing at all, ok, fail, a fact for
// the record). Such a loop stops, since each
// event fires once per item, but nothing after it says the item's work is done.
func (v *validator) ends(steps []*Step, fires map[*Step][]string, runs map[*Step]bool) {
	consumers := make(map[string][]*Step)
	for _, s := range steps {
		for _, e := range s.Needs {
			consumers[e] = append(consumers[e], s)
		}
	}
	// A path ends where the step succeeds or fails firing nothing another step needs (its
	// action's outcomes may not come, so they are not counted as a way on).
	endsOn := func(events []string) bool {
		return !slices.ContainsFunc(events, func(e string) bool { return len(consumers[e]) > 0 })
	}
	reaches := make(map[*Step]bool, len(steps))
	for _, s := range steps {
		reaches[s] = endsOn(s.Success) || endsOn(s.Failure) || slices.Contains(fires[s], EventOK) || slices.Contains(fires[s], EventFail)
	}
	for changed := true; changed; {
		changed = false
		for _, s := range steps {
			if reaches[s] {
				continue
			}
			for _, e := range fires[s] {
				if slices.ContainsFunc(consumers[e], func(c *Step) bool { return reaches[c] }) {
					reaches[s], changed = true, true
					break
				}
			}
		}
	}
	for _, s := range steps {
		if runs[s] && !reaches[s] {
			v.add(SeverityWarning, s.Line, s.Name, "", "step has no path to an end: every event it fires leads back into a loop (fire ok where its work is done)")
		}
	}
}
