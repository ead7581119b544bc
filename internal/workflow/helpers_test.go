package workflow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/workflow"
)

// fakeActions is a small catalog for validation tests: the actions Banzai's Mediathread
// workflow uses, a router with outcomes, an action with configured outcomes and one with a
// Validate func.
func fakeActions() map[string]action.Spec {
	specs := []action.Spec{
		{Name: "exec", Settings: []action.Setting{
			{Name: "command", Type: action.TypeStrings, Required: true},
			{Name: "env", Type: action.TypeObject},
			{Name: "grace", Type: action.TypeDuration},
		}},
		{Name: "http", Settings: []action.Setting{
			{Name: "url", Type: action.TypeString, Required: true},
			{Name: "method", Type: action.TypeString},
			{Name: "headers", Type: action.TypeObject},
			{Name: "body", Type: action.TypeAny},
			{Name: "retry", Type: action.TypeBool},
		}},
		{Name: "email", Settings: []action.Setting{
			{Name: "to", Type: action.TypeString, Required: true},
			{Name: "subject", Type: action.TypeString},
		}},
		{Name: "noop"},
		{Name: "detect", Outcomes: []string{"detected.pdf", "detected.archive"}},
		{Name: "emit",
			Settings: []action.Setting{{Name: "events", Type: action.TypeStrings, Required: true}},
			OutcomesFor: func(with map[string]any) []string {
				var out []string
				for _, e := range with["events"].([]any) {
					out = append(out, e.(string))
				}
				return out
			}},
		{Name: "limited",
			Settings: []action.Setting{{Name: "n", Type: action.TypeInt}, {Name: "ratio", Type: action.TypeNumber}},
			Validate: func(with map[string]any) error {
				if n, ok := with["n"].(int); ok && n > 10 {
					return &action.SettingError{Key: "n", Reason: "must be at most 10"}
				}
				if _, ok := with["ratio"]; ok && with["n"] == nil {
					return fmt.Errorf("ratio needs n")
				}
				return nil
			}},
	}
	m := make(map[string]action.Spec, len(specs))
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}

func lookup() (workflow.Lookup, []string) {
	m := fakeActions()
	var names []string
	for n := range m {
		names = append(names, n)
	}
	return func(name string) (action.Spec, bool) {
		s, ok := m[name]
		return s, ok
	}, names
}

// parseAndValidate parses src and validates it with the fake catalog.
func parseAndValidate(src string) (*workflow.Definition, []workflow.Diagnostic, error) {
	def, err := workflow.Parse([]byte(src), "test.yaml")
	if err != nil {
		return nil, nil, err
	}
	lk, names := lookup()
	warnings, err := workflow.Validate(def, lk, names...)
	return def, warnings, err
}

// mustValid parses and validates src and fails the test on any error.
func mustValid(t *testing.T, src string) (*workflow.Definition, []workflow.Diagnostic) {
	t.Helper()
	def, warnings, err := parseAndValidate(src)
	if err != nil {
		t.Fatalf("unexpected error:\n%v\nsource:\n%s", err, src)
	}
	return def, warnings
}

// assertProblem checks that err reports a problem whose message contains want at line.
func assertProblem(t *testing.T, err error, want string, line int) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q at line %d", want, line)
	}
	var pe *workflow.ParseError
	var ve *workflow.ValidationError
	switch {
	case errors.As(err, &pe):
		if !strings.Contains(pe.Error(), want) || pe.Line != line {
			t.Fatalf("parse error %q (line %d); want %q at line %d", pe.Error(), pe.Line, want, line)
		}
	case errors.As(err, &ve):
		for _, d := range ve.Diagnostics {
			if d.Severity != workflow.SeverityError {
				t.Errorf("diagnostic %+v in a ValidationError is not an error", d)
			}
		}
		for _, d := range ve.Diagnostics {
			full := d.Message
			if d.Field != "" {
				full = d.Field + ": " + full
			}
			if d.Step != "" {
				full = fmt.Sprintf("step %q: %s", d.Step, full)
			}
			if strings.Contains(full, want) && d.Line == line {
				return
			}
		}
		t.Fatalf("validation error:\n%v\nwant %q at line %d", err, want, line)
	default:
		t.Fatalf("error %T %v is neither *ParseError nor *ValidationError", err, err)
	}
}

// assertWarning checks that warnings hold one containing want.
func assertWarning(t *testing.T, warnings []workflow.Diagnostic, want string) {
	t.Helper()
	for _, w := range warnings {
		if w.Severity == workflow.SeverityWarning && strings.Contains(w.Message, want) {
			return
		}
	}
	t.Fatalf("warnings %+v; want one containing %q", warnings, want)
}
