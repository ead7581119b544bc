package settings_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
)

type shared struct {
	Timeout time.Duration `with:"timeout" doc:"time limit"`
}

type typedConfig struct {
	shared
	Name  string   `with:"name" required:"true" doc:"who"`
	Count int64    `with:"count"`
	Tags  []string `with:"tags"`
	cache int      // no tag: no setting
}

var tc = settings.For(func() typedConfig { return typedConfig{shared: shared{Timeout: time.Minute}, Count: 3} },
	func(c *typedConfig) error {
		if c.Count <= 0 {
			return &action.SettingError{Key: "count", Reason: "must be positive"}
		}
		return nil
	})

// TestTyped: one struct declares the settings (embedded fields first, types from Go types) and
// parses them: defaults for absent keys, the check, types, unknown keys, and a permanent error in Run.
func TestTyped(t *testing.T) {
	want := []action.Setting{
		{Name: "timeout", Type: action.TypeDuration, Doc: "time limit"},
		{Name: "name", Type: action.TypeString, Required: true, Doc: "who"},
		{Name: "count", Type: action.TypeInt},
		{Name: "tags", Type: action.TypeStrings},
	}
	if got := tc.Settings(); !reflect.DeepEqual(got, want) {
		t.Errorf("Settings() = %+v\nwant %+v", got, want)
	}
	c, err := tc.Parse(map[string]any{"name": "a", "tags": []any{"x"}, "timeout": "5s"})
	if err != nil || c.Name != "a" || c.Count != 3 || c.Timeout != 5*time.Second || !reflect.DeepEqual(c.Tags, []string{"x"}) {
		t.Errorf("Parse = %+v, %v", c, err)
	}
	var se *action.SettingError
	for with, key := range map[*map[string]any]string{
		{"name": "a", "count": 0}:       "count",   // the check
		{"name": "a", "count": "two"}:   "count",   // the type
		{"name": "a", "colour": "blue"}: "colour",  // unknown
		{"name": "a", "timeout": "-1s"}: "timeout", // a duration is positive
	} {
		if _, err := tc.Parse(*with); !errors.As(err, &se) || se.Key != key {
			t.Errorf("Parse(%v) = %v, want a setting error naming %s", *with, err, key)
		}
		if _, err := tc.Run(*with); !action.IsPermanent(err) {
			t.Errorf("Run(%v) = %v, want a permanent error", *with, err)
		}
	}
	c, err = tc.ParseOver(typedConfig{Count: 9}, map[string]any{"name": "b"})
	if err != nil || c.Count != 9 || c.Timeout != 0 {
		t.Errorf("ParseOver = %+v, %v; want the instance's defaults", c, err)
	}
}

// TestWithDoc: a documentation made at run time replaces the tag's for its key only, in a copy.
func TestWithDoc(t *testing.T) {
	d := tc.WithDoc("name", "one of a, b")
	if got := d.Settings()[1].Doc; got != "one of a, b" {
		t.Errorf("WithDoc: name's doc = %q", got)
	}
	if got := tc.Settings()[1].Doc; got != "who" {
		t.Errorf("WithDoc changed the original: %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("WithDoc of an undeclared key did not panic")
		}
	}()
	tc.WithDoc("colour", "")
}
