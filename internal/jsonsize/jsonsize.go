// Package jsonsize counts the values of an untrusted JSON document before it is decoded. A
// document's bytes do not bound its decoding: each value decoded costs tens to hundreds of times
// its bytes (a 64 MiB list of {} decoded into a slice of structs held 14.5 GB; a 64 MiB list of
// 0s decoded into []json.RawMessage, 3.1 GB), so a caller that can say how many values its
// documents need refuses the others with [Check] first.
package jsonsize

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Error is the error of [Check]: the bound the document breaks.
type Error struct {
	// List is true for one array or object of more than Limit members, false for a document of
	// more than Limit values.
	List  bool
	Limit int
}

func (e *Error) Error() string {
	if e.List {
		return fmt.Sprintf("a list of over %d entries", e.Limit)
	}
	return fmt.Sprintf("over %d values", e.Limit)
}

// Check reads the first JSON value of data token by token, keeping none of them, and returns an
// [*Error] when one array or object in it has more than maxList members, or when it holds more
// than maxValues values (arrays and objects count, and so does each value in them; an object's
// keys do not). It returns nil for data that is not JSON, as far as it is read: decoding it
// reports that.
func Check(data []byte, maxList, maxValues int) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj, wantKey bool
		n            int
	}
	var stack []frame
	values := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if d, ok := tok.(json.Delim); ok && (d == ']' || d == '}') {
			if stack = stack[:len(stack)-1]; len(stack) == 0 {
				return nil
			}
			continue
		}
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if top.obj && top.wantKey {
				top.wantKey = false
				continue
			}
			top.wantKey = top.obj
			if top.n++; top.n > maxList {
				return &Error{List: true, Limit: maxList}
			}
		}
		if values++; values > maxValues {
			return &Error{Limit: maxValues}
		}
		switch tok {
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
		default:
			if len(stack) == 0 {
				return nil
			}
		}
	}
}
