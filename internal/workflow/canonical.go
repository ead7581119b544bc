package workflow

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// MarshalJSON writes the duration as a Go duration string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string such as "30s". It rejects numbers, whose unit
// would be a guess.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// String returns the duration as a Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// Marshal returns def as canonical JSON: the same shape as the source format (steps a mapping
// from name to step, in the definition's order), fields in a fixed order, empty optional fields
// left out, with: keys sorted, no insignificant whitespace. [Parse] reads it back to an equal
// definition, so it is the form to store. Identical definitions marshal to identical bytes,
// whatever the source's formatting, comments or key order within a step.
//
// It returns an error when def cannot be represented: nil, duplicate step names, or with:
// values JSON cannot hold (NaN, channels).
func Marshal(def *Definition) ([]byte, error) {
	if def == nil {
		return nil, errors.New("marshal workflow: nil definition")
	}
	var b bytes.Buffer
	b.WriteString(`{"name":`)
	writeString(&b, def.Name)
	if len(def.External) > 0 {
		b.WriteString(`,"external":`)
		writeStrings(&b, def.External)
	}
	b.WriteString(`,"steps":{`)
	seen := make(map[string]bool, len(def.Steps))
	for i, s := range def.Steps {
		if s == nil {
			return nil, fmt.Errorf("marshal workflow %q: step %d is nil", def.Name, i)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("marshal workflow %q: duplicate step %q", def.Name, s.Name)
		}
		seen[s.Name] = true
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, s.Name)
		b.WriteString(`:{"action":`)
		writeString(&b, s.Action)
		b.WriteString(`,"needs":`)
		writeStrings(&b, s.Needs)
		if s.When != "" {
			b.WriteString(`,"when":`)
			writeString(&b, s.When)
		}
		if len(s.Success) > 0 {
			b.WriteString(`,"success":`)
			writeStrings(&b, s.Success)
		}
		if len(s.Failure) > 0 {
			b.WriteString(`,"failure":`)
			writeStrings(&b, s.Failure)
		}
		if len(s.With) > 0 {
			b.WriteString(`,"with":`)
			if err := writeValue(&b, s.With, 0); err != nil {
				return nil, fmt.Errorf("marshal workflow %q: step %q: with: %w", def.Name, s.Name, err)
			}
		}
		if s.Concurrency != 0 {
			fmt.Fprintf(&b, `,"concurrency":%d`, s.Concurrency)
		}
		writeKeyed(&b, s)
		if s.Deadline != 0 {
			b.WriteString(`,"deadline":`)
			writeString(&b, s.Deadline.String())
		}
		if s.Timeout != 0 {
			b.WriteString(`,"timeout":`)
			writeString(&b, s.Timeout.String())
		}
		if s.Attempts != 0 {
			fmt.Fprintf(&b, `,"attempts":%d`, s.Attempts)
		}
		if s.ProgressWeight != nil {
			b.WriteString(`,"progress_weight":`)
			if err := writeFloat(&b, *s.ProgressWeight); err != nil {
				return nil, fmt.Errorf("marshal workflow %q: step %q: progress_weight: %w", def.Name, s.Name, err)
			}
		}
		if err := writePublish(&b, s.Publish); err != nil {
			return nil, fmt.Errorf("marshal workflow %q: step %q: publish: %w", def.Name, s.Name, err)
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	if err := writePublish(&b, def.Publish); err != nil {
		return nil, fmt.Errorf("marshal workflow %q: publish: %w", def.Name, err)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Digest returns the hex SHA-256 of def's canonical JSON ([Marshal]): equal digests mean the
// same workflow version. It returns "" when def cannot be marshalled.
func Digest(def *Definition) string {
	b, err := Marshal(def)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // the newline Encode adds
}

func writeStrings(b *bytes.Buffer, l []string) {
	b.WriteByte('[')
	for i, s := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, s)
	}
	b.WriteByte(']')
}

func writeFloat(b *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("number %v cannot be represented in JSON", f)
	}
	if f == 0 {
		f = 0 // -0 and 0 are the same setting
	}
	out, err := json.Marshal(f)
	if err != nil {
		return err
	}
	b.Write(out)
	return nil
}

// writeValue writes a with: value with sorted keys. Parse produces only JSON-shaped values;
// other Go values (from definitions built in code) go through encoding/json.
func writeValue(b *bytes.Buffer, v any, depth int) error {
	if depth > maxWithDepth+1 {
		return fmt.Errorf("nested deeper than %d levels", maxWithDepth)
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		writeString(b, v)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		return writeFloat(b, v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeValue(b, v[k], depth+1); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, e, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		b.WriteByte(']')
	default:
		// Round-trip through encoding/json so the result is JSON-shaped and canonical too.
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(raw, &generic); err != nil {
			return err
		}
		return writeValue(b, generic, depth)
	}
	return nil
}
