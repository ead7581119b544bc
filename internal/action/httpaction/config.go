package httpaction

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/sluice-project/sluice/internal/action"
)

// Body modes of the `body` setting.
const (
	bodyItem = "item"
	bodyBlob = "blob"
	bodyNone = "none"
)

// Response modes of the `response` setting.
const (
	responseIgnore = "ignore"
	responseJSON   = "json"
)

// config is a step's validated `with:`.
type config struct {
	url      *template.Template
	method   string
	headers  []header // sorted by name
	timeout  time.Duration
	outcomes map[string]mapping // "404" or "4xx" → what the status means
	declared map[string]bool
	response string
	body     string
}

// mapping is what a status mapped by the `outcomes` setting means: an outcome event, and
// whether the call succeeded (the step's success events fire) or failed for good (its failure
// events fire, and the item gets the status as its error).
type mapping struct {
	event   string
	failure bool
}

type header struct {
	name  string // canonical
	value *template.Template
}

// templateData is what the `url` and `headers` templates see.
type templateData struct {
	Item templateItem
	Step string
	Job  int64
}

type templateItem struct {
	ID          int64
	Name        string
	ContentType string
	Metadata    map[string]any
	Options     map[string]any
}

// sampleData is executed at validation time to catch templates that name unknown fields.
var sampleData = templateData{
	Item: templateItem{ID: 1, Name: "dir/sample.pdf", ContentType: "application/pdf",
		Metadata: map[string]any{}, Options: map[string]any{}},
	Step: "step", Job: 1,
}

func newTemplateData(t *action.Task) templateData {
	return templateData{
		Item: templateItem{ID: t.Item.ID, Name: t.Item.Name, ContentType: t.Item.ContentType,
			Metadata: t.Item.Metadata, Options: t.Item.Options},
		Step: t.Step, Job: t.JobID,
	}
}

var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

func settingErr(key, format string, args ...any) error {
	return &action.SettingError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// parseConfig reads and checks with. Errors are [*action.SettingError]s.
func parseConfig(with map[string]any) (*config, error) {
	c := &config{method: http.MethodPost, response: responseIgnore, declared: map[string]bool{}}

	raw, ok, err := stringSetting(with, "url")
	if err != nil {
		return nil, err
	}
	if !ok || raw == "" {
		return nil, settingErr("url", "must be a non-empty string")
	}
	if c.url, err = parseTemplate("url", raw); err != nil {
		return nil, settingErr("url", "%v", err)
	}

	if m, ok, err := stringSetting(with, "method"); err != nil {
		return nil, err
	} else if ok {
		c.method = strings.ToUpper(m)
		if !slices.Contains(methods, c.method) {
			return nil, settingErr("method", "unknown method %q: want one of %s", m, strings.Join(methods, ", "))
		}
	}

	c.body = bodyNone
	switch c.method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		c.body = bodyItem
	}
	if b, ok, err := stringSetting(with, "body"); err != nil {
		return nil, err
	} else if ok {
		switch b {
		case bodyItem, bodyBlob, bodyNone:
			c.body = b
		default:
			return nil, settingErr("body", "unknown body %q: want item, blob or none", b)
		}
	}

	headers, _, err := objectSetting(with, "headers")
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		if !validToken(name) {
			return nil, settingErr("headers", "%q is not a valid header name", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if canon == "Content-Length" || canon == "Transfer-Encoding" {
			return nil, settingErr("headers", "%s is set from the body and cannot be configured", canon)
		}
		tm, err := parseTemplate("headers."+name, headers[name])
		if err != nil {
			return nil, settingErr("headers", "%v", err)
		}
		c.headers = append(c.headers, header{name: canon, value: tm})
	}

	if c.timeout, _, err = durationSetting(with, "timeout"); err != nil {
		return nil, err
	}

	if c.outcomes, err = outcomesSetting(with); err != nil {
		return nil, err
	}
	for _, m := range c.outcomes {
		c.declared[m.event] = true
	}

	events, _, err := stringsSetting(with, "events")
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		if e == "" {
			return nil, settingErr("events", "an event name is empty")
		}
		c.declared[e] = true
	}

	if r, ok, err := stringSetting(with, "response"); err != nil {
		return nil, err
	} else if ok {
		switch r {
		case responseIgnore, responseJSON:
			c.response = r
		default:
			return nil, settingErr("response", "unknown mode %q: want ignore or json", r)
		}
	}
	return c, nil
}

// check executes every template with sample data, reporting templates that name unknown fields,
// and checks a URL whose scheme and host are literal.
func (c *config) check() error {
	u, err := render(c.url, sampleData)
	if err != nil {
		if structural(err) {
			return settingErr("url", "%v", err)
		}
	} else if _, err := parseURL(u); err != nil && !strings.HasPrefix(c.url.Root.String(), "{{") {
		return settingErr("url", "%v", err)
	}
	for _, h := range c.headers {
		if _, err := render(h.value, sampleData); err != nil && structural(err) {
			return settingErr("headers", "%v", err)
		}
	}
	return nil
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

// outcomesSetting reads `outcomes`: status or class → an event (a success), or
// {event: E, outcome: success|failure}.
func outcomesSetting(with map[string]any) (map[string]mapping, error) {
	var raw map[string]any
	switch v := with["outcomes"].(type) {
	case nil:
		return nil, nil
	case map[string]any:
		raw = v
	case map[string]string:
		raw = make(map[string]any, len(v))
		for k, e := range v {
			raw[k] = e
		}
	default:
		return nil, settingErr("outcomes", "must be an object")
	}
	out := make(map[string]mapping, len(raw))
	for key, v := range raw {
		k := strings.ToLower(key)
		if !validStatusKey(k) {
			return nil, settingErr("outcomes", "key %q is not a status code (100 to 599) or class (1xx to 5xx)", key)
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
					return nil, settingErr("outcomes", "status %s: outcome must be success or failure, got %v", key, fv)
				case f == "event":
					return nil, settingErr("outcomes", "status %s: event must be a string", key)
				default:
					return nil, settingErr("outcomes", "status %s: unknown field %q (want event and outcome)", key, f)
				}
			}
		default:
			return nil, settingErr("outcomes", "status %s must map to an event or to {event, outcome}", key)
		}
		if m.event == "" {
			return nil, settingErr("outcomes", "status %s maps to an empty event", key)
		}
		out[k] = m
	}
	return out, nil
}

// outcomeEvents returns the events the step can emit, sorted.
func (c *config) outcomeEvents() []string {
	return slices.Sorted(maps.Keys(c.declared))
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

// validToken reports whether s is an RFC 9110 token, the syntax of header names.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}

// funcs are available in the action's templates besides text/template's built-ins (which include
// urlquery).
var funcs = template.FuncMap{"pathescape": url.PathEscape, "queryescape": url.QueryEscape}

func parseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(funcs).Parse(text)
}

// render executes tm. A map key the item lacks renders as "<no value>" in text/template; that
// would silently reach the request, so it is an error naming the template instead.
func render(tm *template.Template, data templateData) (string, error) {
	var b strings.Builder
	if err := tm.Execute(&b, data); err != nil {
		return "", err
	}
	s := b.String()
	if strings.Contains(s, "<no value>") {
		return "", fmt.Errorf("%s: %q refers to a value the item does not have "+
			`(use {{or .Item.Metadata.key "default"}} for optional values)`, tm.Name(), tm.Root.String())
	}
	if strings.ContainsAny(s, "\x00\r\n") {
		return "", fmt.Errorf("%s: %q renders a control character", tm.Name(), tm.Root.String())
	}
	return s, nil
}

// structural reports whether a template execution error comes from the template's shape rather
// than from the data it ran on.
func structural(err error) bool {
	s := err.Error()
	return strings.Contains(s, "can't evaluate field") || strings.Contains(s, "wrong number of args")
}

// The setting readers below accept both Go values and what YAML and JSON decoders produce
// ([]any, map[string]any). They return ok=false when the key is absent.

func stringSetting(with map[string]any, key string) (string, bool, error) {
	v, ok := with[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, settingErr(key, "must be a string")
	}
	return s, true, nil
}

func stringsSetting(with map[string]any, key string) ([]string, bool, error) {
	switch v := with[key].(type) {
	case nil:
		return nil, false, nil
	case []string:
		return v, true, nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false, settingErr(key, "element %d is not a string", i)
			}
			out[i] = s
		}
		return out, true, nil
	default:
		return nil, false, settingErr(key, "must be a list of strings")
	}
}

func objectSetting(with map[string]any, key string) (map[string]string, bool, error) {
	var m map[string]any
	switch v := with[key].(type) {
	case nil:
		return nil, false, nil
	case map[string]string:
		return v, true, nil
	case map[string]any:
		m = v
	case map[any]any:
		m = make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = e
		}
	default:
		return nil, false, settingErr(key, "must be an object")
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, false, settingErr(key, "value of %q is not a string", k)
		}
		out[k] = s
	}
	return out, true, nil
}

func durationSetting(with map[string]any, key string) (time.Duration, bool, error) {
	var d time.Duration
	switch v := with[key].(type) {
	case nil:
		return 0, false, nil
	case time.Duration:
		d = v
	case string:
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, false, settingErr(key, "%q is not a duration such as \"30s\"", v)
		}
	default:
		return 0, false, settingErr(key, "must be a duration such as \"30s\"")
	}
	if d <= 0 {
		return 0, false, settingErr(key, "must be positive")
	}
	return d, true, nil
}
