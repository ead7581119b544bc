package settings_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
)

type typed struct {
	Name    string            `with:"name"`
	On      bool              `with:"on"`
	N       int               `with:"n"`
	F       float64           `with:"f"`
	Timeout time.Duration     `with:"timeout"`
	List    []string          `with:"list"`
	Codes   []int             `with:"codes"`
	Env     map[string]string `with:"env"`
	Obj     map[string]any    `with:"obj"`
	Any     any               `with:"any"`
}

// TestDecode fills every supported field type from the values YAML and JSON decoders produce
// (float64 numbers, []any, map[string]any) and from Go values; absent keys keep their defaults.
func TestDecode(t *testing.T) {
	t.Parallel()
	with := map[string]any{"name": "a", "on": true, "n": 3.0, "f": 2, "timeout": "30s",
		"list": []any{"x", "y"}, "codes": []any{1.0, int64(2), 3}, "env": map[string]any{"K": "v"},
		"obj": map[string]any{"k": []any{1.0}}, "any": []any{"z"}}
	got := typed{Name: "default"}
	if err := settings.Decode(with, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "a" || !got.On || got.N != 3 || got.F != 2 || got.Timeout != 30*time.Second ||
		!slices.Equal(got.List, []string{"x", "y"}) || !slices.Equal(got.Codes, []int{1, 2, 3}) ||
		got.Env["K"] != "v" || got.Obj["k"] == nil || got.Any == nil {
		t.Fatalf("Decode = %+v", got)
	}

	goValues := typed{Name: "default"}
	if err := settings.Decode(map[string]any{"list": []string{"p"}, "timeout": time.Minute, "env": map[string]string{"A": "b"}}, &goValues); err != nil {
		t.Fatal(err)
	}
	if goValues.Name != "default" || goValues.List[0] != "p" || goValues.Timeout != time.Minute || goValues.Env["A"] != "b" {
		t.Fatalf("Decode of Go values = %+v", goValues)
	}
}

// TestDecodeErrors checks that every wrong value names its key with the reason workflow
// validation shows beside the step's line.
func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		with       map[string]any
		key, ruled string
	}{
		{map[string]any{"nope": 1}, "nope", "unknown setting"},
		{map[string]any{"name": 1.0}, "name", "must be a string, got number"},
		{map[string]any{"on": "yes"}, "on", "must be a boolean, got string"},
		{map[string]any{"n": 1.5}, "n", "must be an integer, got number"},
		{map[string]any{"f": "1"}, "f", "must be a number, got string"},
		{map[string]any{"timeout": "soon"}, "timeout", `invalid duration "soon"`},
		{map[string]any{"timeout": 30.0}, "timeout", `must be a duration string such as "30s", got number`},
		{map[string]any{"timeout": "-1s"}, "timeout", "must be a positive duration"},
		{map[string]any{"list": "ls -l"}, "list", "must be a list of strings, got string"},
		{map[string]any{"list": []any{"a", 1.0}}, "list", "entry 1 must be a string, got number"},
		{map[string]any{"codes": []any{1.5}}, "codes", "entry 0 must be an integer, got number"},
		{map[string]any{"env": map[string]any{"A": 1.0}}, "env", `value of "A" must be a string, got number`},
		{map[string]any{"obj": []any{}}, "obj", "must be a mapping, got list"},
	}
	for _, tt := range tests {
		var got typed
		err := settings.Decode(tt.with, &got)
		var se *action.SettingError
		if !errors.As(err, &se) || se.Key != tt.key || !strings.Contains(se.Reason, tt.ruled) {
			t.Errorf("Decode(%v) = %v; want a SettingError for %q containing %q", tt.with, err, tt.key, tt.ruled)
		}
	}
}

// TestCheck checks declared setting types with the same rules.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		typ   action.SettingType
		value any
		want  string
	}{
		{action.TypeString, "a", ""},
		{action.TypeString, 1.0, "must be a string, got number"},
		{action.TypeInt, 2.0, ""},
		{action.TypeInt, 2.5, "must be an integer"},
		{action.TypeNumber, 2, ""},
		{action.TypeDuration, "1m", ""},
		{action.TypeStrings, []any{"a", true}, "entry 1 must be a string, got boolean"},
		{action.TypeObject, map[string]any{"a": 1}, ""},
		{action.TypeAny, []any{1}, ""},
		{"color", "red", `unknown setting type "color"`},
	} {
		if got := settings.Check(tt.typ, tt.value); (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("Check(%s, %v) = %q; want %q", tt.typ, tt.value, got, tt.want)
		}
	}
}
