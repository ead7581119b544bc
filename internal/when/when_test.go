package when_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/when"
)

var (
	root = when.Item{Depth: 0, Name: "sheet.csv", ContentType: "text/csv",
		Metadata: map[string]any{"kind": "sheet", "n": float64(3), "tags": []any{"a", "b"}, "nested": map[string]any{"x": "y"}},
		Options:  map[string]any{"ocr": true}}
	row = when.Item{Depth: 1, Name: "sheet.csv/row-2.tif", ContentType: "image/tiff",
		Metadata: map[string]any{"role": "preservation"}, Options: map[string]any{}}
)

func TestEval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr      string
		root, row bool
	}{
		{"root", true, false},
		{"!root", false, true},
		{"depth == 0", true, false},
		{"depth >= 1 && depth < 2", false, true},
		{"-depth < 0", false, true},
		{`content_type == "text/csv"`, true, false},
		{`content_type.startsWith("image/")`, false, true},
		{`name.endsWith('.tif') || name.contains("nothing")`, false, true},
		{`metadata.kind == "sheet"`, true, false},
		{`metadata["kind"] == "sheet"`, true, false},
		{`metadata.role in ["preservation", "access"]`, false, true},
		{`"a" in metadata.tags`, true, false},
		{`"role" in metadata`, false, true},
		{`has(metadata.role)`, false, true},
		{`has(options.ocr) && options.ocr == true`, true, false},
		{`metadata.n == 3 && metadata.n > 2.5`, true, false},
		{`metadata.nested.x == "y"`, true, false},
		{`metadata.missing.deeper == null`, true, true},
		{`metadata.role != "access"`, true, true},  // a missing key is null, not "access"
		{`metadata.kind > 1`, false, false},        // a run-time type mismatch is false
		{`metadata.kind > 1 || root`, true, false}, // ... but the other side of || can decide
		{`false && metadata.kind > 1`, false, false},
		{`(root || depth == 1) && !(name == "x")`, true, true},
		{`metadata.tags[1] == "b"`, true, false},
		{`true`, true, true},
	} {
		e, err := when.Parse(tc.expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.expr, err)
			continue
		}
		if got := e.Eval(root); got != tc.root {
			t.Errorf("%q on the root = %v, want %v", tc.expr, got, tc.root)
		}
		if got := e.Eval(row); got != tc.row {
			t.Errorf("%q on a row = %v, want %v", tc.expr, got, tc.row)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr, want string
	}{
		{"", "empty condition"},
		{"dept == 0", `column 1: unknown variable "dept" (known: root, depth, name, content_type, metadata, options)`},
		{"depth", "column 1: condition is an integer, not a boolean"},
		{`content_type`, "condition is a string, not a boolean"},
		{"depth = 0", `column 7: unexpected "="; compare with "=="`},
		{"depth == ", "column 10: condition ends early"},
		{"root &&", "condition ends early"},
		{"(root", `expected ")", found end of condition`},
		{"root root", `column 6: unexpected "root"`},
		{`depth == "0"`, `column 7: "==" compares an integer with a string: it can never hold`},
		{`name < 3`, `"<" cannot order a string and an integer`},
		{`root && depth`, `"&&" needs booleans on both sides, not an integer`},
		{`depth.x == 1`, `cannot read field "x" of an integer`},
		{`name.lower() == "a"`, `unknown method "lower"`},
		{`size(name) > 0`, `unknown function "size"`},
		{`has(root)`, "has takes a field"},
		{`depth.startsWith("a")`, "startsWith is a method of strings, not of an integer"},
		{`name.startsWith(1)`, "startsWith takes a string, not an integer"},
		{`"a" in name`, `"in" needs a list or an object on its right, not a string`},
		{`name == "abc`, "string not closed"},
		{`name == "a\q"`, `unknown escape \q`},
		{`root # comment`, `unexpected character "#"`},
		{strings.Repeat("(", 60) + "root" + strings.Repeat(")", 60), "nested deeper than 50 levels"},
		{strings.Repeat("!", 60) + "root", "nested deeper than 50 levels"},
		{"depth == 99999999999999999999", "out of range"},
		{strings.Repeat("x", when.MaxLen+1), "the limit is 1000"},
	} {
		_, err := when.Parse(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error = %v, want %q", tc.expr, err, tc.want)
		}
	}
}

func TestConstant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr            string
		constant, value bool
	}{
		{"false", true, false},
		{"1 == 2", true, false},
		{`"a" in ["a"]`, true, true},
		{"root", false, false},
		{"depth == 0 && false", false, false},
	} {
		e, err := when.Parse(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		if c, v := e.Constant(); c != tc.constant || v != tc.value {
			t.Errorf("Constant(%q) = %v, %v; want %v, %v", tc.expr, c, v, tc.constant, tc.value)
		}
	}
}

// FuzzParse checks that no condition makes Parse or Eval panic, and that one Parse accepts
// evaluates to a boolean answer on any item.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"root", `metadata.role in ["a", 'b'] && !root`, `name.startsWith("x") || depth >= 2`, `has(options.ocr)`, `metadata["a"][0] == -1.5`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := when.Parse(s)
		if err != nil {
			var pe *when.Error
			if !asError(err, &pe) {
				t.Fatalf("Parse(%q) error %T, want *when.Error", s, err)
			}
			return
		}
		e.Eval(root)
		e.Eval(row)
		e.Eval(when.Item{})
	})
}

func asError(err error, target **when.Error) bool {
	e, ok := err.(*when.Error)
	*target = e
	return ok
}

// TestEvalJSONNumber: metadata numbers arrive as json.Number (kept exact from the user's JSON);
// conditions compare them as numbers, and key templates write them as given.
func TestEvalJSONNumber(t *testing.T) {
	t.Parallel()
	it := when.Item{Metadata: map[string]any{"n": json.Number("3"), "half": json.Number("1.5"),
		"big": json.Number("12345678901234567890"), "zip": "01234"}}
	for _, tc := range []struct {
		expr string
		want bool
	}{
		{`metadata.n == 3`, true},
		{`metadata.n > 2.5 && metadata.n < 4`, true},
		{`metadata.half == 1.5`, true},
		{`-metadata.n < 0`, true},
		{`metadata.n in [1, 2, 3]`, true},
		{`metadata.big > 1000`, true},
		{`metadata.zip == "01234"`, true},
		{`metadata.zip == 1234`, false}, // a string is not a number
	} {
		e, err := when.Parse(tc.expr)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.expr, err)
		}
		if got := e.Eval(it); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.expr, got, tc.want)
		}
	}
	tm, err := when.ParseTemplate(`{{metadata.big}}-{{metadata.half}}-{{metadata.zip}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tm.Render(it); err != nil || got != "12345678901234567890-1.5-01234" {
		t.Errorf("Render = %q, %v; want 12345678901234567890-1.5-01234", got, err)
	}
}
