package converter

import (
	"fmt"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/textclean"
)

// Config is a converter action's settings, a step's `with:` keys: the [Limits] of its tool runs
// and the cap on a document's text.
type Config struct {
	Limits
	TextCap
}

// TextCap is the setting that caps a document's text, for the actions that extract text.
type TextCap struct {
	MaxTextChars int `with:"max_text_chars" doc:"cap on a document's text in characters. Defaults to 1,000,000."`
}

// Check reports a cap that is not positive.
func (c TextCap) Check() error {
	if c.MaxTextChars <= 0 {
		return &action.SettingError{Key: "max_text_chars", Reason: fmt.Sprintf("must be a positive integer, got %d", c.MaxTextChars)}
	}
	return nil
}

// DefaultTextCap is the cap of a step that sets none.
var DefaultTextCap = TextCap{MaxTextChars: textclean.DefaultMaxChars}

// typed declares and parses [Config].
var typed = settings.For(func() Config {
	return Config{Limits: Limits{Timeout: DefaultTimeout, MemoryLimit: DefaultMemoryLimit}, TextCap: DefaultTextCap}
}, func(c *Config) error { return c.TextCap.Check() })

// Settings are the `with:` keys every converter action accepts, parsed by [ParseSettings].
func Settings() []action.Setting { return typed.Settings() }

// ValidateSettings checks a step's `with:` as [ParseSettings] would, for [action.Spec.Validate].
func ValidateSettings(with map[string]any) error { return typed.Validate(with) }

// ParseSettings reads the keys of [Settings] from a step's `with:`; absent keys get their
// defaults. It returns a permanent error naming a key of the wrong type.
func ParseSettings(with map[string]any) (Config, error) { return typed.Run(with) }

// BoolOption reports whether the item option key is true (a JSON true or the string "true").
func BoolOption(opts map[string]any, key string) bool {
	switch v := opts[key].(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true") || v == "1"
	}
	return false
}

// StringOption returns the item option key if it is a string.
func StringOption(opts map[string]any, key string) string {
	s, _ := opts[key].(string)
	return s
}
