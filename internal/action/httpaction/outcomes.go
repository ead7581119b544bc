package httpaction

import (
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/action/settings"
)

// mapping is what a status mapped by the `outcomes` setting means: an outcome event, and
// whether the call succeeded (the step's success events fire) or failed for good (its failure
// events fire, and the item gets the status as its error).
type mapping struct {
	event   string
	failure bool
}

// outcome returns what a status maps to: an exact code first, then its class.
func (c *config) outcome(status int) (mapping, bool) {
	if len(c.outcomes) == 0 {
		return mapping{}, false
	}
	if m, ok := c.outcomes[strconv.Itoa(status)]; ok {
		return m, true
	}
	m, ok := c.outcomes[strconv.Itoa(status/100)+"xx"]
	return m, ok
}

// parseOutcomes reads `outcomes`: status or class → an event (a success), or
// {event: E, outcome: success|failure}.
func parseOutcomes(raw map[string]any) (map[string]mapping, error) {
	out := make(map[string]mapping, len(raw))
	for key, v := range raw {
		k := strings.ToLower(key)
		if !validStatusKey(k) {
			return nil, settings.Errorf("outcomes", "key %q is not a status code (100 to 599) or class (1xx to 5xx)", key)
		}
		var m mapping
		switch v := v.(type) {
		case string:
			m.event = v
		case map[string]any:
			for f, fv := range v {
				s, ok := fv.(string)
				switch {
				case f == "event" && ok:
					m.event = s
				case f == "outcome" && ok && (s == "success" || s == "failure"):
					m.failure = s == "failure"
				case f == "outcome":
					return nil, settings.Errorf("outcomes", "status %s: outcome must be success or failure, got %v", key, fv)
				case f == "event":
					return nil, settings.Errorf("outcomes", "status %s: event must be a string", key)
				default:
					return nil, settings.Errorf("outcomes", "status %s: unknown field %q (want event and outcome)", key, f)
				}
			}
		default:
			return nil, settings.Errorf("outcomes", "status %s must map to an event or to {event, outcome}", key)
		}
		if m.event == "" {
			return nil, settings.Errorf("outcomes", "status %s maps to an empty event", key)
		}
		out[k] = m
	}
	return out, nil
}

func validStatusKey(k string) bool {
	if len(k) != 3 {
		return false
	}
	if k[1:] == "xx" {
		return '1' <= k[0] && k[0] <= '5'
	}
	n, err := strconv.Atoi(k)
	return err == nil && 100 <= n && n <= 599 && k[0] != '+'
}
