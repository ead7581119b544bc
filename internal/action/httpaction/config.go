package httpaction

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/action/tasktemplate"
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

type header struct {
	name  string // canonical
	value *template.Template
}

// templateData is what the `url` and `headers` templates see.
type templateData struct {
	Item tasktemplate.Item
	Step string
	Job  int64
}

// sampleData is executed at validation time to catch templates that name unknown fields.
var sampleData = templateData{
	Item: tasktemplate.SampleItem,
	Step: "step", Job: 1,
}

var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// stepSettings are the keys of a step's `with:`, as [settings.Decode] fills them.
type stepSettings struct {
	URL      string            `with:"url" required:"true" doc:"The URL, a Go text/template with .Item.Name, .Item.ID, .Item.ContentType, .Item.Metadata, .Item.Options, .Step and .Job; escape inserted values with urlquery, queryescape or pathescape."`
	Method   string            `with:"method" doc:"The request method. Defaults to POST."`
	Headers  map[string]string `with:"headers" doc:"Request headers, each value a template like the URL. Idempotency-Key defaults to one per job, item and step, because the call may be repeated."`
	Body     string            `with:"body" doc:"What to send: \"item\", the item as JSON {\"job_id\", \"item_id\", \"name\", \"content_type\", \"size\", \"sha256\", \"metadata\", \"options\", \"step\"}; \"blob\", the item's content; or \"none\". Defaults to \"item\" for POST, PUT and PATCH, else \"none\"."`
	Timeout  time.Duration     `with:"timeout" doc:"Bounds the request, response included; the step's per-attempt timeout applies as well. A timeout is retried."`
	Outcomes map[string]any    `with:"outcomes" doc:"Maps statuses (\"404\") or classes (\"2xx\") to outcome events; an exact status wins over its class. A status mapped to an event is a success; one mapped to {event: E, outcome: failure} fails the task for good and fires E with the step's failure events."`
	Events   []string          `with:"events" doc:"Further outcome events a JSON response may name."`
	Response string            `with:"response" doc:"What a successful response means: \"ignore\", or \"json\", an object {\"events\": [...], \"metadata\": {...}, \"text\": \"...\", \"error\": \"...\", \"children\": [...]} whose events must be declared, whose metadata is merged, whose error fails the item and whose children are created (content inline or a blob's sha256). At most 1 MiB is read. Defaults to \"ignore\"."`
}

// typed declares and parses stepSettings.
var typed = settings.For(func() stepSettings { return stepSettings{Method: http.MethodPost, Response: responseIgnore} }, nil)

// parseConfig reads and checks with. Errors are [*action.SettingError]s.
func parseConfig(with map[string]any) (*config, error) {
	s, err := typed.Parse(with)
	if err != nil {
		return nil, err
	}
	c := &config{method: strings.ToUpper(s.Method), response: s.Response, timeout: s.Timeout, declared: map[string]bool{}}

	if s.URL == "" {
		return nil, settings.Errorf("url", "must be a non-empty string")
	}
	if c.url, err = parseTemplate("url", s.URL); err != nil {
		return nil, settings.Errorf("url", "%v", err)
	}
	if !slices.Contains(methods, c.method) {
		return nil, settings.Errorf("method", "unknown method %q: want one of %s", s.Method, strings.Join(methods, ", "))
	}

	c.body = bodyNone
	switch c.method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		c.body = bodyItem
	}
	switch s.Body {
	case "":
	case bodyItem, bodyBlob, bodyNone:
		c.body = s.Body
	default:
		return nil, settings.Errorf("body", "unknown body %q: want item, blob or none", s.Body)
	}

	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		if !validToken(name) {
			return nil, settings.Errorf("headers", "%q is not a valid header name", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if canon == "Content-Length" || canon == "Transfer-Encoding" {
			return nil, settings.Errorf("headers", "%s is set from the body and cannot be configured", canon)
		}
		tm, err := parseTemplate("headers."+name, s.Headers[name])
		if err != nil {
			return nil, settings.Errorf("headers", "%v", err)
		}
		c.headers = append(c.headers, header{name: canon, value: tm})
	}

	if c.outcomes, err = parseOutcomes(s.Outcomes); err != nil {
		return nil, err
	}
	for _, m := range c.outcomes {
		c.declared[m.event] = true
	}
	for _, e := range s.Events {
		if e == "" {
			return nil, settings.Errorf("events", "an event name is empty")
		}
		c.declared[e] = true
	}

	switch s.Response {
	case responseIgnore, responseJSON:
	default:
		return nil, settings.Errorf("response", "unknown mode %q: want ignore or json", s.Response)
	}
	return c, nil
}

// Check executes every template with sample data, reporting templates that name unknown fields,
// and checks a URL whose scheme and host are literal.
func (c *config) Check() error {
	u, err := render(c.url, sampleData)
	if err != nil {
		if tasktemplate.Structural(err) {
			return settings.Errorf("url", "%v", err)
		}
	} else if _, err := parseURL(u); err != nil && !strings.HasPrefix(c.url.Root.String(), "{{") {
		return settings.Errorf("url", "%v", err)
	}
	for _, h := range c.headers {
		if _, err := render(h.value, sampleData); err != nil && tasktemplate.Structural(err) {
			return settings.Errorf("headers", "%v", err)
		}
	}
	return nil
}

// Outcomes returns the events the step can emit, sorted.
func (c *config) Outcomes() []string {
	return slices.Sorted(maps.Keys(c.declared))
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

// render executes tm, refusing values the item does not have and control characters.
func render(tm *template.Template, data templateData) (string, error) {
	return tasktemplate.Render(tm, data, "\x00\r\n", "a control character")
}
