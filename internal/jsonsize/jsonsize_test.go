package jsonsize

import (
	"errors"
	"strings"
	"testing"
)

// TestCheck counts values and list members at and one past each bound (3 members, 10 values):
// arrays and objects alike, nested lists each within the list bound but over the value bound,
// keys not counted as values, strings holding brackets not counted, and documents that are not
// JSON left to their decoder.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, doc string
		want      *Error // nil for none
	}{
		{name: "array at the list bound", doc: `[1,2,3]`},
		{name: "array over the list bound", doc: `[1,2,3,4]`, want: &Error{List: true, Limit: 3}},
		{name: "object at the list bound", doc: `{"a":1,"b":2,"c":3}`},
		{name: "object over the list bound", doc: `{"a":1,"b":2,"c":3,"d":{}}`, want: &Error{List: true, Limit: 3}},
		{name: "nested list over the list bound", doc: `{"a":{"b":[[],[],[],[]]}}`, want: &Error{List: true, Limit: 3}},
		{name: "at the value bound", doc: `[[1,2,3],[4,5,6],[]]`},
		{name: "over the value bound", doc: `[[1,2,3],[4,5,6],[7]]`, want: &Error{Limit: 10}},
		{name: "keys are not values", doc: `{"a":{"x":1,"y":2,"z":3},"b":{"x":1,"y":2,"z":3},"c":"x"}`},
		{name: "brackets in strings", doc: `["[[[[", "{{{{,,,,", "]]]]"]`},
		{name: "a scalar", doc: `"a string"`},
		{name: "not JSON", doc: `<html>[1,2,3,4]`},
		{name: "truncated", doc: `[1,2`},
		{name: "trailing data not read", doc: `[1] [1,2,3,4]`},
	} {
		err := Check([]byte(c.doc), 3, 10)
		var e *Error
		if c.want == nil && err != nil || c.want != nil && (!errors.As(err, &e) || *e != *c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := Check([]byte(`[`+strings.Repeat(`[`, 20)), 3, 10); err == nil || err.Error() != "over 10 values" {
		t.Errorf("deep nesting: %v, want over 10 values", err)
	}
}
