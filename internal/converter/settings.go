package converter

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/textclean"
)

// Settings are the `with:` keys every converter action accepts, parsed by [ParseSettings].
func Settings() []action.Setting {
	return []action.Setting{
		{Name: "timeout", Type: action.TypeDuration, Doc: "time limit of each external tool run. Defaults to 120s."},
		{Name: "memory_limit", Type: action.TypeInt, Doc: "address-space limit of each external tool in bytes. Defaults to 2 GiB."},
		{Name: "max_text_chars", Type: action.TypeInt, Doc: "cap on a document's text in characters. Defaults to 1,000,000."},
	}
}

// Config is a converter action's parsed settings.
type Config struct {
	Limits Limits
	// MaxTextChars caps text per document. Defaults to [textclean.DefaultMaxChars].
	MaxTextChars int
}

// ParseSettings reads the keys of [Settings] from a step's `with:`; absent keys get their
// defaults. It returns a permanent error naming a key of the wrong type.
func ParseSettings(with map[string]any) (Config, error) {
	c := Config{Limits: Limits{Timeout: DefaultTimeout, MemoryLimit: DefaultMemoryLimit}, MaxTextChars: textclean.DefaultMaxChars}
	if v, ok := with["timeout"]; ok {
		d, err := toDuration(v)
		if err != nil || d <= 0 {
			return c, action.Permanentf("setting timeout: want a positive duration such as \"120s\", got %v", v)
		}
		c.Limits.Timeout = d
	}
	if v, ok := with["memory_limit"]; ok {
		n, err := toInt(v)
		if err != nil {
			return c, action.Permanentf("setting memory_limit: %v", err)
		}
		c.Limits.MemoryLimit = n
	}
	if v, ok := with["max_text_chars"]; ok {
		n, err := toInt(v)
		if err != nil || n <= 0 {
			return c, action.Permanentf("setting max_text_chars: want a positive integer, got %v", v)
		}
		c.MaxTextChars = int(n)
	}
	return c, nil
}

func toDuration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case time.Duration:
		return x, nil
	case string:
		return time.ParseDuration(x)
	case float64:
		return time.Duration(x * float64(time.Second)), nil
	case int:
		return time.Duration(x) * time.Second, nil
	case int64:
		return time.Duration(x) * time.Second, nil
	}
	return 0, fmt.Errorf("not a duration: %T", v)
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case float64:
		if x != float64(int64(x)) {
			return 0, fmt.Errorf("want an integer, got %v", x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("want an integer, got %T", v)
}

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
