package execaction

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/sluice-project/sluice/internal/action"
)

// Input modes of the `input` setting.
const (
	inputStdin = "stdin"
	inputFile  = "file"
	inputNone  = "none"
)

// Stdout modes of the `stdout` setting.
const (
	stdoutIgnore = "ignore"
	stdoutJSON   = "json"
	stdoutText   = "text"
)

// config is a step's validated `with:`.
type config struct {
	command   []*template.Template
	input     string
	env       []envVar // sorted by name, so the environment is deterministic
	timeout   time.Duration
	outcomes  map[int]string // exit code → event
	declared  map[string]bool
	stdout    string
	permanent map[int]bool // exit codes that mean bad input
}

type envVar struct {
	name  string
	value *template.Template
}

// templateData is what templates in `command` and `env` see. A template that names any other
// field is rejected when the workflow is validated.
type templateData struct {
	Item    templateItem
	Input   string // path of the input file when input is "file"; empty otherwise
	TempDir string
	Step    string
	Job     int64
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
	Input: "/tmp/input", TempDir: "/tmp", Step: "step", Job: 1,
}

func newTemplateData(t *action.Task, input string) templateData {
	return templateData{
		Item: templateItem{ID: t.Item.ID, Name: t.Item.Name, ContentType: t.Item.ContentType,
			Metadata: t.Item.Metadata, Options: t.Item.Options},
		Input: input, TempDir: t.TempDir, Step: t.Step, Job: t.JobID,
	}
}

func settingErr(key, format string, args ...any) error {
	return &action.SettingError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// parseConfig reads and checks with. Errors are [*action.SettingError]s.
func parseConfig(with map[string]any) (*config, error) {
	c := &config{input: inputStdin, stdout: stdoutIgnore, declared: map[string]bool{}}

	argv, ok, err := stringsSetting(with, "command")
	if err != nil {
		return nil, err
	}
	if !ok || len(argv) == 0 {
		return nil, settingErr("command", "must be a non-empty list of strings (program and arguments)")
	}
	for i, arg := range argv {
		key := fmt.Sprintf("command[%d]", i)
		tm, err := parseTemplate(key, arg)
		if err != nil {
			return nil, settingErr("command", "%v", err)
		}
		c.command = append(c.command, tm)
	}
	if strings.TrimSpace(argv[0]) == "" {
		return nil, settingErr("command", "the program (first element) is empty")
	}

	if s, ok, err := stringSetting(with, "input"); err != nil {
		return nil, err
	} else if ok {
		switch s {
		case inputStdin, inputFile, inputNone:
			c.input = s
		default:
			return nil, settingErr("input", "unknown mode %q: want stdin, file or none", s)
		}
	}

	if s, ok, err := stringSetting(with, "stdout"); err != nil {
		return nil, err
	} else if ok {
		switch s {
		case stdoutIgnore, stdoutJSON, stdoutText:
			c.stdout = s
		default:
			return nil, settingErr("stdout", "unknown mode %q: want ignore, json or text", s)
		}
	}

	env, _, err := objectSetting(with, "env")
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if !validEnvName(name) {
			return nil, settingErr("env", "%q is not a valid variable name", name)
		}
		tm, err := parseTemplate("env."+name, env[name])
		if err != nil {
			return nil, settingErr("env", "%v", err)
		}
		c.env = append(c.env, envVar{name: name, value: tm})
	}

	if c.timeout, _, err = durationSetting(with, "timeout"); err != nil {
		return nil, err
	}

	outcomes, _, err := objectSetting(with, "outcomes")
	if err != nil {
		return nil, err
	}
	c.outcomes = make(map[int]string, len(outcomes))
	for key, event := range outcomes {
		code, err := strconv.Atoi(key)
		if err != nil || code < 0 || code > 255 || strconv.Itoa(code) != key {
			return nil, settingErr("outcomes", "key %q is not an exit code (0 to 255)", key)
		}
		if event == "" {
			return nil, settingErr("outcomes", "exit code %s maps to an empty event", key)
		}
		c.outcomes[code] = event
		c.declared[event] = true
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

	codes, _, err := intsSetting(with, "permanent_exit_codes")
	if err != nil {
		return nil, err
	}
	c.permanent = make(map[int]bool, len(codes))
	for _, code := range codes {
		if code < 1 || code > 255 {
			return nil, settingErr("permanent_exit_codes", "%d is not a non-zero exit code (1 to 255)", code)
		}
		if ev, ok := c.outcomes[code]; ok {
			return nil, settingErr("permanent_exit_codes", "exit code %d is also mapped to outcome %q", code, ev)
		}
		c.permanent[code] = true
	}
	return c, nil
}

// outcomeEvents returns the events the step can emit, sorted.
func (c *config) outcomeEvents() []string {
	return slices.Sorted(maps.Keys(c.declared))
}

// check executes every template with sample data, reporting templates that name unknown fields.
// Errors that depend on the data (a missing metadata key indexed, say) are left to run time.
func (c *config) check() error {
	for _, tm := range c.command {
		if _, err := render(tm, sampleData); err != nil && structural(err) {
			return settingErr("command", "%v", err)
		}
	}
	for _, e := range c.env {
		if _, err := render(e.value, sampleData); err != nil && structural(err) {
			return settingErr("env", "%v", err)
		}
	}
	return nil
}

// structural reports whether a template execution error comes from the template's shape rather
// than from the data it ran on.
func structural(err error) bool {
	s := err.Error()
	return strings.Contains(s, "can't evaluate field") || strings.Contains(s, "wrong number of args")
}

// argv renders the command for one task.
func (c *config) argv(data templateData) ([]string, error) {
	argv := make([]string, len(c.command))
	for i, tm := range c.command {
		s, err := render(tm, data)
		if err != nil {
			return nil, err
		}
		argv[i] = s
	}
	if argv[0] == "" {
		return nil, errors.New("command[0]: the program renders empty")
	}
	return argv, nil
}

// environ renders the command's environment: a minimal base (PATH, HOME and TMPDIR in the task's
// temp dir, LANG) overridden by the `env` setting. Nothing else of Sluice's environment leaks in:
// it may hold database credentials.
func (c *config) environ(data templateData, dir string) ([]string, error) {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	base := [][2]string{{"PATH", path}, {"HOME", dir}, {"TMPDIR", dir}, {"LANG", "C.UTF-8"}}
	env := make([]string, 0, len(base)+len(c.env))
	for _, kv := range base {
		if !slices.ContainsFunc(c.env, func(e envVar) bool { return e.name == kv[0] }) {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	for _, e := range c.env {
		s, err := render(e.value, data)
		if err != nil {
			return nil, err
		}
		env = append(env, e.name+"="+s)
	}
	return env, nil
}

func parseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Option("missingkey=default").Parse(text)
}

// render executes tm. A map key the item lacks renders as "<no value>" in text/template; that
// would silently become an argument, so it is an error naming the template instead.
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
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("%s: %q renders a NUL byte", tm.Name(), tm.Root.String())
	}
	return s, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// The setting readers below accept both Go values and what YAML and JSON decoders produce
// ([]any, map[string]any, float64 numbers). They return ok=false when the key is absent.

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

func intsSetting(with map[string]any, key string) ([]int, bool, error) {
	var list []any
	switch v := with[key].(type) {
	case nil:
		return nil, false, nil
	case []int:
		return v, true, nil
	case []any:
		list = v
	default:
		return nil, false, settingErr(key, "must be a list of integers")
	}
	out := make([]int, len(list))
	for i, e := range list {
		switch n := e.(type) {
		case int:
			out[i] = n
		case int64:
			out[i] = int(n)
		case uint64:
			out[i] = int(min(n, math.MaxInt32))
		case float64:
			if n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
				return nil, false, settingErr(key, "element %d is not an integer", i)
			}
			out[i] = int(n)
		default:
			return nil, false, settingErr(key, "element %d is not an integer", i)
		}
	}
	return out, true, nil
}
