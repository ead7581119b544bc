// Package settings decodes a step's `with:` into an action's typed settings: the one place that
// knows how the values YAML and JSON decoders produce (float64 numbers, []any, map[string]any)
// and those Go callers pass ([]string, time.Duration) map onto Go types. Workflow validation
// checks declared [action.Setting] types with [Check]; an action decodes its own settings struct
// with [Decode], from its spec's Validate (so a step's errors name its line) and again in Run.
package settings

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/sluice-project/sluice/internal/action"
)

// Config is an action's typed settings, as [Hooks] uses them.
type Config interface {
	// Check reports problems beyond the types of the settings (ranges, combinations), as an
	// [*action.SettingError] naming the key where it can.
	Check() error
	// Outcomes returns the outcome events the settings let the action emit, sorted.
	Outcomes() []string
}

// Hooks returns the [action.Spec] OutcomesFor and Validate functions of an action whose
// settings parse (with [Decode] and whatever else parse does) into a C.
func Hooks[C Config](parse func(with map[string]any) (C, error)) (outcomesFor func(map[string]any) []string, validate func(map[string]any) error) {
	outcomesFor = func(with map[string]any) []string {
		c, err := parse(with)
		if err != nil {
			return nil
		}
		return c.Outcomes()
	}
	validate = func(with map[string]any) error {
		c, err := parse(with)
		if err != nil {
			return err
		}
		return c.Check()
	}
	return outcomesFor, validate
}

// Decode fills the struct dst points to from with. A field tagged `with:"name"` takes the value of
// key name (the fields of an embedded struct too); an absent key or a null leaves the field as it was (so dst may hold the defaults).
// Field types: string, bool, int, int64, float64, time.Duration (a Go duration string, positive),
// []string, []int, map[string]string, map[string]any and any.
//
// It returns an [*action.SettingError] naming the key for a key no field takes and for a value
// of the wrong type, with the same reasons workflow validation gives.
func Decode(with map[string]any, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("settings: Decode into %T, want a pointer to a struct", dst))
	}
	sv := rv.Elem()
	fields := map[string][]int{}
	tagged(sv.Type(), nil, func(f reflect.StructField, index []int) { fields[f.Tag.Get("with")] = index })
	// Keys in a stable order, so the error reported for several bad keys is always the same.
	keys := make([]string, 0, len(with))
	for k := range with {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		i, ok := fields[k]
		if !ok {
			return &action.SettingError{Key: k, Reason: "unknown setting"}
		}
		if with[k] == nil {
			continue
		}
		if reason := decode(with[k], sv.FieldByIndex(i)); reason != "" {
			return &action.SettingError{Key: k, Reason: reason}
		}
	}
	return nil
}

// tagged calls fn with each field of st tagged `with:`, and its index, in field order; the
// fields of an embedded struct count as st's own, so settings shared by several actions are
// declared once and embedded.
func tagged(st reflect.Type, index []int, fn func(f reflect.StructField, index []int)) {
	for i := range st.NumField() {
		f := st.Field(i)
		at := append(slices.Clip(index), i)
		if _, ok := f.Tag.Lookup("with"); ok {
			fn(f, at)
		} else if f.Anonymous && f.Type.Kind() == reflect.Struct {
			tagged(f.Type, at, fn)
		}
	}
}

// Check returns why value is not a valid value of a setting of type t, or "". A setting of an
// unknown type is never valid: the action declares it wrongly.
func Check(t action.SettingType, value any) string {
	var v reflect.Value
	switch t {
	case action.TypeAny:
		return ""
	case action.TypeString:
		v = reflect.New(reflect.TypeFor[string]())
	case action.TypeBool:
		v = reflect.New(reflect.TypeFor[bool]())
	case action.TypeNumber:
		v = reflect.New(reflect.TypeFor[float64]())
	case action.TypeInt:
		v = reflect.New(reflect.TypeFor[int]())
	case action.TypeDuration:
		v = reflect.New(reflect.TypeFor[time.Duration]())
	case action.TypeStrings:
		v = reflect.New(reflect.TypeFor[[]string]())
	case action.TypeObject:
		v = reflect.New(reflect.TypeFor[map[string]any]())
	default:
		return fmt.Sprintf("the action declares the unknown setting type %q", t)
	}
	return decode(value, v.Elem())
}

var durationType = reflect.TypeFor[time.Duration]()

// decode sets dst from v and returns "", or returns why v does not fit dst's type.
func decode(v any, dst reflect.Value) string {
	if dst.Type() == durationType {
		return decodeDuration(v, dst)
	}
	switch dst.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return mustBe("a string", v)
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return mustBe("a boolean", v)
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, ok := integer(v)
		if !ok {
			return mustBe("an integer", v)
		}
		dst.SetInt(n)
	case reflect.Float64:
		f, ok := number(v)
		if !ok {
			return mustBe("a number", v)
		}
		dst.SetFloat(f)
	case reflect.Slice:
		return decodeList(v, dst)
	case reflect.Map:
		return decodeMap(v, dst)
	case reflect.Interface:
		dst.Set(reflect.ValueOf(v))
	case reflect.Pointer: // a setting whose absence the action tells from its zero value
		p := reflect.New(dst.Type().Elem())
		if reason := decode(v, p.Elem()); reason != "" {
			return reason
		}
		dst.Set(p)
	default:
		panic(fmt.Sprintf("settings: unsupported field type %s", dst.Type()))
	}
	return ""
}

func decodeDuration(v any, dst reflect.Value) string {
	var d time.Duration
	switch x := v.(type) {
	case time.Duration:
		d = x
	case string:
		var err error
		if d, err = time.ParseDuration(x); err != nil {
			return fmt.Sprintf("invalid duration %q (use a Go duration such as \"30s\" or \"5m\")", x)
		}
	default:
		return mustBe(`a duration string such as "30s"`, v)
	}
	if d <= 0 {
		return fmt.Sprintf("must be a positive duration, got %s", d)
	}
	dst.SetInt(int64(d))
	return ""
}

func decodeList(v any, dst reflect.Value) string {
	elem := dst.Type().Elem()
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	default:
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Slice {
			return mustBe(listOf(elem), v)
		}
		list = make([]any, rv.Len())
		for i := range list {
			list[i] = rv.Index(i).Interface()
		}
	}
	out := reflect.MakeSlice(dst.Type(), len(list), len(list))
	for i, e := range list {
		if reason := decode(e, out.Index(i)); reason != "" {
			return fmt.Sprintf("entry %d %s", i, reason)
		}
	}
	dst.Set(out)
	return ""
}

func decodeMap(v any, dst reflect.Value) string {
	var m map[string]any
	switch x := v.(type) {
	case map[string]any:
		m = x
	case map[any]any:
		m = make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = e
		}
	default:
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
			return mustBe("a mapping", v)
		}
		m = make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
	}
	out := reflect.MakeMapWithSize(dst.Type(), len(m))
	elem := dst.Type().Elem()
	for k, e := range m {
		ev := reflect.New(elem).Elem()
		if elem.Kind() == reflect.Interface {
			if e != nil {
				ev.Set(reflect.ValueOf(e))
			}
		} else if reason := decode(e, ev); reason != "" {
			return fmt.Sprintf("value of %q %s", k, reason)
		}
		out.SetMapIndex(reflect.ValueOf(k), ev)
	}
	dst.Set(out)
	return ""
}

func listOf(elem reflect.Type) string {
	switch elem.Kind() {
	case reflect.String:
		return "a list of strings"
	case reflect.Int:
		return "a list of integers"
	}
	return "a list"
}

func mustBe(want string, got any) string {
	return fmt.Sprintf("must be %s, got %s", want, JSONType(got))
}

func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	if i, ok := integer(v); ok {
		return float64(i), true
	}
	return 0, false
}

// JSONType names the JSON type of a `with:` value for messages: "string", "number", "list", …
func JSONType(value any) string {
	switch value.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int64, int32, uint64, float64, float32:
		return "number"
	case map[string]any, map[any]any, map[string]string:
		return "mapping"
	case []any, []string, []int:
		return "list"
	}
	return fmt.Sprintf("%T", value)
}

// Errorf returns an [*action.SettingError] for key with the formatted reason.
func Errorf(key, format string, args ...any) error {
	return &action.SettingError{Key: key, Reason: fmt.Sprintf(format, args...)}
}
