package settings

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/sluice-project/sluice/internal/action"
)

// Typed is an action's settings, declared and parsed from one struct type C: each field tagged
// `with:"key"` is the setting key, with its type taken from the field's Go type, its
// documentation from the tag `doc:"…"`, and `required:"true"` when a step must set it (workflow
// validation refuses a step without it; the check function says what an empty value lacks). The
// spec's Settings, its Validate and the action's Run all come from the same struct, so the
// keys a workflow may set, the types it is checked against and the values Run sees cannot
// disagree.
type Typed[C any] struct {
	defaults func() C
	check    func(*C) error
	decls    []action.Setting
}

// For returns the [Typed] settings of C. defaults returns the values of absent keys (nil: the
// zero C); check, when not nil, reports problems beyond types (ranges, combinations) as an
// [*action.SettingError] naming the key. For panics on a field of a type no setting has: that is
// a mistake in the build, found by any test that registers the action.
func For[C any](defaults func() C, check func(*C) error) *Typed[C] {
	if defaults == nil {
		defaults = func() C { var c C; return c }
	}
	return &Typed[C]{defaults: defaults, check: check, decls: declare(reflect.TypeFor[C]())}
}

// WithDoc returns the settings with key's documentation replaced, for a documentation made at
// run time (a list of the platforms registered); the struct tag's stays for the other keys. It
// panics for a key C does not declare.
func (t *Typed[C]) WithDoc(key, doc string) *Typed[C] {
	c := *t
	c.decls = slices.Clone(t.decls)
	for i := range c.decls {
		if c.decls[i].Name == key {
			c.decls[i].Doc = doc
			return &c
		}
	}
	panic(fmt.Sprintf("settings: WithDoc of %q, which %T does not declare", key, *new(C)))
}

// Settings returns the declarations of the keys, for [action.Spec.Settings].
func (t *Typed[C]) Settings() []action.Setting { return t.decls }

// Parse returns the settings of a step's `with:`: the defaults, overridden by the keys set,
// checked. Its error is an [*action.SettingError] naming the key.
func (t *Typed[C]) Parse(with map[string]any) (C, error) { return t.ParseOver(t.defaults(), with) }

// ParseOver is [Typed.Parse] with the defaults of one action's instance (an action built with
// limits of its own).
func (t *Typed[C]) ParseOver(c C, with map[string]any) (C, error) {
	if err := Decode(with, &c); err != nil {
		return c, err
	}
	if t.check != nil {
		if err := t.check(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Validate is [Typed.Parse] for [action.Spec.Validate]: a workflow with a bad value is refused
// when it is saved, naming the step's key.
func (t *Typed[C]) Validate(with map[string]any) error {
	_, err := t.Parse(with)
	return err
}

// Run is [Typed.Parse] for an action's Run: a bad value fails the task permanently (running it
// again cannot help).
func (t *Typed[C]) Run(with map[string]any) (C, error) { return t.RunOver(t.defaults(), with) }

// RunOver is [Typed.Run] with the defaults of one action's instance.
func (t *Typed[C]) RunOver(c C, with map[string]any) (C, error) {
	c, err := t.ParseOver(c, with)
	if err != nil {
		return c, action.Permanentf("setting %v", err)
	}
	return c, nil
}

// declare returns the settings the tagged fields of st declare, in field order.
func declare(st reflect.Type) []action.Setting {
	if st.Kind() != reflect.Struct {
		panic(fmt.Sprintf("settings: For[%s], want a struct", st))
	}
	var out []action.Setting
	tagged(st, nil, func(f reflect.StructField, _ []int) {
		out = append(out, action.Setting{Name: f.Tag.Get("with"), Type: typeOf(f.Type), Required: f.Tag.Get("required") == "true", Doc: f.Tag.Get("doc")})
	})
	return out
}

// typeOf is the setting type of a field that [Decode] fills.
func typeOf(t reflect.Type) action.SettingType {
	if t == reflect.TypeFor[time.Duration]() {
		return action.TypeDuration
	}
	switch t.Kind() {
	case reflect.String:
		return action.TypeString
	case reflect.Bool:
		return action.TypeBool
	case reflect.Int, reflect.Int64:
		return action.TypeInt
	case reflect.Float64:
		return action.TypeNumber
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return action.TypeStrings
		}
		return action.TypeAny
	case reflect.Map:
		return action.TypeObject
	case reflect.Interface:
		return action.TypeAny
	case reflect.Pointer:
		return typeOf(t.Elem())
	}
	panic(fmt.Sprintf("settings: a field of type %s is no setting", t))
}
