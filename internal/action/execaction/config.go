package execaction

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/action/tasktemplate"
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
	Item    tasktemplate.Item
	Input   string // path of the input file when input is "file"; empty otherwise
	TempDir string
	Step    string
	Job     int64
}

// sampleData is executed at validation time to catch templates that name unknown fields.
var sampleData = templateData{
	Item:  tasktemplate.SampleItem,
	Input: "/tmp/input", TempDir: "/tmp", Step: "step", Job: 1,
}

func newTemplateData(t *action.Task, input string) templateData {
	return templateData{
		Item:  tasktemplate.ItemOf(t.Item),
		Input: input, TempDir: t.TempDir, Step: t.Step, Job: t.JobID,
	}
}

// stepSettings are the keys of a step's `with:`, as [settings.Decode] fills them.
type stepSettings struct {
	Command            []string          `with:"command" required:"true" doc:"The program and its arguments. Each is a Go text/template with .Item.Name, .Item.ID, .Item.ContentType, .Item.Metadata, .Item.Options, .Input (the input file's path), .TempDir, .Step and .Job."`
	Input              string            `with:"input" doc:"How the item's blob reaches the command: \"stdin\", \"file\" (its path is .Input) or \"none\". Defaults to \"stdin\"."`
	Env                map[string]string `with:"env" doc:"Environment variables to add, each value a template like the command's. The base environment is only PATH, HOME and TMPDIR (the temp dir) and LANG."`
	Timeout            time.Duration     `with:"timeout" doc:"Kills the command after this long; the step's per-attempt timeout applies as well. A timeout is retried."`
	Outcomes           map[string]string `with:"outcomes" doc:"Maps exit codes, as strings, to outcome events, such as {\"0\": \"converted\", \"3\": \"skipped-no-text\"}. A mapped non-zero exit is a success."`
	Events             []string          `with:"events" doc:"Further outcome events the command may name in its JSON stdout."`
	Stdout             string            `with:"stdout" doc:"What stdout means: \"ignore\"; \"text\", the item's text; or \"json\", an object {\"events\": [...], \"metadata\": {...}, \"text\": \"...\", \"error\": \"...\", \"children\": [...]} whose events must be declared, whose metadata is merged, whose error fails the item and whose children are created (see package result: content inline, a file in the temp dir, or a blob's sha256). At most 16 MiB is read. Defaults to \"ignore\"."`
	PermanentExitCodes []int             `with:"permanent_exit_codes" doc:"A list of exit codes that mean bad input: the item fails without a retry. Other non-zero exits are retried."`
}

// typed declares and parses stepSettings.
var typed = settings.For(func() stepSettings { return stepSettings{Input: inputStdin, Stdout: stdoutIgnore} }, nil)

// parseConfig reads and checks with. Errors are [*action.SettingError]s.
func parseConfig(with map[string]any) (*config, error) {
	s, err := typed.Parse(with)
	if err != nil {
		return nil, err
	}
	c := &config{input: s.Input, stdout: s.Stdout, timeout: s.Timeout, declared: map[string]bool{}}

	if len(s.Command) == 0 {
		return nil, settings.Errorf("command", "must be a non-empty list of strings (program and arguments)")
	}
	for i, arg := range s.Command {
		tm, err := parseTemplate(fmt.Sprintf("command[%d]", i), arg)
		if err != nil {
			return nil, settings.Errorf("command", "%v", err)
		}
		c.command = append(c.command, tm)
	}
	if strings.TrimSpace(s.Command[0]) == "" {
		return nil, settings.Errorf("command", "the program (first element) is empty")
	}
	switch s.Input {
	case inputStdin, inputFile, inputNone:
	default:
		return nil, settings.Errorf("input", "unknown mode %q: want stdin, file or none", s.Input)
	}
	switch s.Stdout {
	case stdoutIgnore, stdoutJSON, stdoutText:
	default:
		return nil, settings.Errorf("stdout", "unknown mode %q: want ignore, json or text", s.Stdout)
	}

	for _, name := range slices.Sorted(maps.Keys(s.Env)) {
		if !validEnvName(name) {
			return nil, settings.Errorf("env", "%q is not a valid variable name", name)
		}
		tm, err := parseTemplate("env."+name, s.Env[name])
		if err != nil {
			return nil, settings.Errorf("env", "%v", err)
		}
		c.env = append(c.env, envVar{name: name, value: tm})
	}

	c.outcomes = make(map[int]string, len(s.Outcomes))
	for key, event := range s.Outcomes {
		code, err := strconv.Atoi(key)
		if err != nil || code < 0 || code > 255 || strconv.Itoa(code) != key {
			return nil, settings.Errorf("outcomes", "key %q is not an exit code (0 to 255)", key)
		}
		if event == "" {
			return nil, settings.Errorf("outcomes", "exit code %s maps to an empty event", key)
		}
		c.outcomes[code] = event
		c.declared[event] = true
	}
	for _, e := range s.Events {
		if e == "" {
			return nil, settings.Errorf("events", "an event name is empty")
		}
		c.declared[e] = true
	}
	c.permanent = make(map[int]bool, len(s.PermanentExitCodes))
	for _, code := range s.PermanentExitCodes {
		if code < 1 || code > 255 {
			return nil, settings.Errorf("permanent_exit_codes", "%d is not a non-zero exit code (1 to 255)", code)
		}
		if ev, ok := c.outcomes[code]; ok {
			return nil, settings.Errorf("permanent_exit_codes", "exit code %d is also mapped to outcome %q", code, ev)
		}
		c.permanent[code] = true
	}
	return c, nil
}

// Outcomes returns the events the step can emit, sorted.
func (c *config) Outcomes() []string {
	return slices.Sorted(maps.Keys(c.declared))
}

// Check executes every template with sample data, reporting templates that name unknown fields.
// Errors that depend on the data (a missing metadata key indexed, say) are left to run time.
func (c *config) Check() error {
	for _, tm := range c.command {
		if _, err := render(tm, sampleData); err != nil && tasktemplate.Structural(err) {
			return settings.Errorf("command", "%v", err)
		}
	}
	for _, e := range c.env {
		if _, err := render(e.value, sampleData); err != nil && tasktemplate.Structural(err) {
			return settings.Errorf("env", "%v", err)
		}
	}
	return nil
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

// render executes tm, refusing values the item does not have and NUL bytes.
func render(tm *template.Template, data templateData) (string, error) {
	return tasktemplate.Render(tm, data, "\x00", "a NUL byte")
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
