// Package metadata decodes the user's metadata of jobs and items exactly as it was given. JSON
// numbers decode as [json.Number], never float64, so that a 20-digit id or 1.50 comes back as
// written after any number of decodes and encodes (inheriting, merging, exporting); strings stay
// strings. Every decode of stored or submitted metadata goes through this package.
package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
)

// Decode decodes a JSON object, numbers as [json.Number]. Empty input and null decode to an
// empty map; anything else that is not one JSON object is an error.
func Decode(raw []byte) (map[string]any, error) {
	var m map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := Unmarshal(raw, &m); err != nil {
			return nil, err
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// Unmarshal is [json.Unmarshal] with numbers in interface values decoded as [json.Number]: for
// request bodies and records that hold metadata.
func Unmarshal(data []byte, v any) error {
	return Decoder(bytes.NewReader(data)).DecodeAll(v)
}

// Dec is a JSON decoder that keeps numbers as [json.Number].
type Dec struct{ *json.Decoder }

// Decoder returns a decoder of r that keeps numbers as [json.Number].
func Decoder(r io.Reader) Dec {
	d := json.NewDecoder(r)
	d.UseNumber()
	return Dec{d}
}

// DecodeAll decodes one JSON value into v and fails when anything but space follows it.
func (d Dec) DecodeAll(v any) error {
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("metadata: data after the JSON value")
	}
	return nil
}

// Float returns a metadata number as a float64: a [json.Number], or a Go number an action or a
// test set.
func Float(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// Int returns a metadata number that is a whole number as an int64.
func Int(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return i, true
		}
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	f, ok := Float(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}
