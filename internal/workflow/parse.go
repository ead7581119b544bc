package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Limits on a workflow source. They bound the work Parse and Validate do for untrusted input
// (the web editor, the API).
const (
	// MaxSourceBytes is the largest workflow source Parse accepts.
	MaxSourceBytes = 1 << 20
	// MaxSteps is the largest number of steps in a workflow.
	MaxSteps = 500
	// MaxNameLen is the longest workflow, step, event or action name, in bytes.
	MaxNameLen = 100
	// MaxListLen is the longest needs, success, failure or external list.
	MaxListLen = 100
	// MaxAttemptsLimit is the largest value of a step's attempts.
	MaxAttemptsLimit = 100
	// maxWithDepth bounds the nesting of a step's with: values.
	maxWithDepth = 32
)

// ParseError is the error Parse returns: a problem in the source, with its line.
type ParseError struct {
	File    string // the filename given to Parse; may be empty
	Line    int    // 1-based; 0 when the YAML library did not report one
	Step    string // the step the problem is in, if any
	Field   string // the field the problem is in, such as "needs" or "with.url", if any
	Message string
}

// Error formats the error as "FILE:LINE: step "S": FIELD: MESSAGE", leaving out the parts that
// are empty.
func (e *ParseError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	writeStepField(&b, e.Step, e.Field)
	b.WriteString(e.Message)
	return b.String()
}

// Diagnostic returns the error as an error-severity [Diagnostic], for editors that show parse
// and validation problems the same way.
func (e *ParseError) Diagnostic() Diagnostic {
	return Diagnostic{Severity: SeverityError, Step: e.Step, Field: e.Field, Line: e.Line, Message: e.Message}
}

func writeStepField(b *strings.Builder, step, field string) {
	if step != "" {
		fmt.Fprintf(b, "step %q: ", step)
	}
	if field != "" {
		b.WriteString(field)
		b.WriteString(": ")
	}
}

// defPos records where the parts of a definition are in its source, for messages.
type defPos struct {
	name     int
	external []int // line of each external entry
}

// stepPos records where the fields of a step are in its source.
type stepPos struct {
	fields map[string]int   // field name -> line of its value
	lists  map[string][]int // needs/success/failure -> line of each entry
	with   map[string]int   // with key -> line of its value
}

// fieldLine returns the line of a step's field, or the step's line when unknown.
func (s *Step) fieldLine(field string) int {
	if s.pos != nil {
		if l := s.pos.fields[field]; l > 0 {
			return l
		}
	}
	return s.Line
}

// entryLine returns the line of the i-th entry of a step's event list.
func (s *Step) entryLine(list string, i int) int {
	if s.pos != nil {
		if ls := s.pos.lists[list]; i < len(ls) {
			return ls[i]
		}
	}
	return s.fieldLine(list)
}

// withLine returns the line of a with: key.
func (s *Step) withLine(key string) int {
	if s.pos != nil {
		if l := s.pos.with[key]; l > 0 {
			return l
		}
	}
	return s.fieldLine("with")
}

// Parse reads a workflow definition from YAML or JSON (JSON is read as YAML, so both give the
// same messages). It checks the shape of the document strictly — unknown keys, wrong types,
// duplicate keys, missing fields, names, ranges and limits — and returns a *[ParseError] with
// the line of the first problem. filename is only used in messages. Parse does not check
// actions or events; call [Validate] for that.
//
// Anchors, aliases and merge keys are rejected: they allow a small document to expand into a
// huge one, and a workflow has no need for them.
func Parse(src []byte, filename string) (*Definition, error) {
	p := &parser{file: filename}
	def, err := p.parse(src)
	if err != nil {
		return nil, err
	}
	return def, nil
}

type parser struct {
	file string
}

func (p *parser) errf(line int, step, field, format string, args ...any) *ParseError {
	return &ParseError{File: p.file, Line: line, Step: step, Field: field, Message: fmt.Sprintf(format, args...)}
}

// yamlLine extracts "line N" from a yaml.v3 error message.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the problems yaml.v3's parser (not its scanner) reports. It gives their
// line 0-based — the line of the construct being parsed, such as the "[" of an unclosed flow
// sequence — and leaves the line out when it is the first, where it reports its scanner's
// problems 1-based: without this table a syntax error was reported one line early.
var yamlParserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"found undefined tag handle",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

func (p *parser) syntaxErr(err error) *ParseError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if slices.Contains(yamlParserProblems, msg) {
		line++
	}
	return p.errf(line, "", "", "invalid YAML: %s", msg)
}

func (p *parser) parse(src []byte) (*Definition, error) {
	if len(src) > MaxSourceBytes {
		return nil, p.errf(0, "", "", "workflow source is %d bytes; the limit is %d", len(src), MaxSourceBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.errf(1, "", "", "empty workflow")
		}
		return nil, p.syntaxErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, p.errf(extra.Line, "", "", "multiple YAML documents; a workflow is a single document")
	} else if !errors.Is(err, io.EOF) {
		return nil, p.syntaxErr(err)
	}
	if err := p.noAliases(&doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		return nil, p.errf(max(doc.Line, 1), "", "", "empty workflow")
	}
	return p.definition(doc.Content[0])
}

// noAliases rejects anchors and aliases anywhere in the document (billion laughs).
func (p *parser) noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return p.errf(n.Line, "", "", "anchors and aliases are not allowed")
	}
	for _, c := range n.Content {
		if err := p.noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// describe names the YAML type of a node for "got X" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "string"
		case "!!int", "!!float":
			return "number"
		case "!!bool":
			return "boolean"
		case "!!null":
			return "null"
		case "!!timestamp":
			return "timestamp"
		}
		return n.ShortTag()
	}
	return "unknown"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// keyValue is one entry of a mapping node.
type keyValue struct {
	key   string
	kline int
	value *yaml.Node
}

// entries returns a mapping's entries, rejecting duplicate keys, merge keys and non-scalar keys.
func (p *parser) entries(m *yaml.Node, step, field string) ([]keyValue, error) {
	out := make([]keyValue, 0, len(m.Content)/2)
	seen := make(map[string]int, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.errf(k.Line, step, field, "keys must be strings, got %s", describe(k))
		}
		if k.ShortTag() == "!!merge" {
			return nil, p.errf(k.Line, step, field, "merge keys (<<) are not allowed")
		}
		if first, dup := seen[k.Value]; dup {
			return nil, p.errf(k.Line, step, field, "duplicate key %q (first at line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
		out = append(out, keyValue{key: k.Value, kline: k.Line, value: v})
	}
	return out, nil
}

func (p *parser) unknownField(kv keyValue, step string, known []string) error {
	msg := fmt.Sprintf("unknown field %q", kv.key)
	if s := closest(kv.key, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else {
		msg += " (known: " + strings.Join(known, ", ") + ")"
	}
	return p.errf(kv.kline, step, "", "%s", msg)
}

var topFields = []string{"name", "external", "steps", "publish"}

func (p *parser) definition(root *yaml.Node) (*Definition, error) {
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root.Line, "", "", "workflow must be a mapping with name, external and steps, got %s", describe(root))
	}
	kvs, err := p.entries(root, "", "")
	if err != nil {
		return nil, err
	}
	def := &Definition{pos: &defPos{}}
	var haveName, haveSteps bool
	for _, kv := range kvs {
		switch kv.key {
		case "name":
			haveName = true
			s, err := p.str(kv.value, "", "name")
			if err != nil {
				return nil, err
			}
			if msg := checkName("workflow name", s); msg != "" {
				return nil, p.errf(kv.value.Line, "", "name", "%s", msg)
			}
			def.Name = s
			def.pos.name = kv.value.Line
		case "external":
			list, lines, err := p.names(kv.value, "", "external", "external event")
			if err != nil {
				return nil, err
			}
			def.External, def.pos.external = list, lines
		case "publish":
			if def.Publish, err = p.publishRules(kv.value, ""); err != nil {
				return nil, err
			}
		case "steps":
			haveSteps = true
			if def.Steps, err = p.steps(kv.value); err != nil {
				return nil, err
			}
		default:
			return nil, p.unknownField(kv, "", topFields)
		}
	}
	if !haveName {
		return nil, p.errf(root.Line, "", "", "missing name")
	}
	if !haveSteps {
		return nil, p.errf(root.Line, "", "", "missing steps")
	}
	return def, nil
}

func (p *parser) steps(n *yaml.Node) ([]*Step, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n.Line, "", "steps", "must be a mapping of step name to step, got %s", describe(n))
	}
	kvs, err := p.entries(n, "", "steps")
	if err != nil {
		return nil, err
	}
	if len(kvs) == 0 {
		return nil, p.errf(n.Line, "", "steps", "no steps; a workflow needs at least one")
	}
	if len(kvs) > MaxSteps {
		return nil, p.errf(kvs[MaxSteps].kline, "", "steps", "%d steps; the limit is %d", len(kvs), MaxSteps)
	}
	steps := make([]*Step, 0, len(kvs))
	for _, kv := range kvs {
		if msg := checkName("step name", kv.key); msg != "" {
			return nil, p.errf(kv.kline, "", "steps", "%s", msg)
		}
		s, err := p.step(kv)
		if err != nil {
			return nil, err
		}
		steps = append(steps, s)
	}
	return steps, nil
}

var stepFields = []string{"action", "needs", "when", "deadline", "success", "failure", "with", "concurrency", "claim", "limit", "correlate", "timeout", "attempts", "progress_weight", "publish"}

func (p *parser) step(kv keyValue) (*Step, error) {
	name, n := kv.key, kv.value
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n.Line, name, "", "a step must be a mapping with action and needs, got %s", describe(n))
	}
	kvs, err := p.entries(n, name, "")
	if err != nil {
		return nil, err
	}
	s := &Step{Name: name, Line: kv.kline, pos: &stepPos{fields: map[string]int{}, lists: map[string][]int{}}}
	var haveAction, haveNeeds bool
	for _, f := range kvs {
		v := f.value
		s.pos.fields[f.key] = f.kline
		switch f.key {
		case "action":
			haveAction = true
			if s.Action, err = p.str(v, name, "action"); err != nil {
				return nil, err
			}
			if s.Action == "" {
				return nil, p.errf(v.Line, name, "action", "empty action")
			}
			if len(s.Action) > MaxNameLen {
				return nil, p.errf(v.Line, name, "action", "action name is %d characters; the limit is %d", len(s.Action), MaxNameLen)
			}
		case "needs":
			haveNeeds = true
			if isNull(v) {
				return nil, p.errf(v.Line, name, "needs", "empty needs; a step needs at least one event (use [start] for a first step)")
			}
			list, lines, err := p.names(v, name, "needs", "event")
			if err != nil {
				return nil, err
			}
			if len(list) == 0 {
				return nil, p.errf(v.Line, name, "needs", "empty needs; a step needs at least one event (use [start] for a first step)")
			}
			s.Needs, s.pos.lists["needs"] = list, lines
		case "when":
			if isNull(v) {
				continue
			}
			if s.When, err = p.str(v, name, "when"); err != nil {
				return nil, p.errf(v.Line, name, "when", "must be a condition in quotes, such as \"depth == 0\", got %s", describe(v))
			}
			if strings.TrimSpace(s.When) == "" {
				return nil, p.errf(v.Line, name, "when", "empty condition; leave when: out for a step that applies to every item")
			}
		case "success", "failure":
			list, lines, err := p.names(v, name, f.key, "event")
			if err != nil {
				return nil, err
			}
			if f.key == "success" {
				s.Success = list
			} else {
				s.Failure = list
			}
			s.pos.lists[f.key] = lines
		case "with":
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				return nil, p.errf(v.Line, name, "with", "must be a mapping of settings, got %s", describe(v))
			}
			with, err := p.value(v, name, "with", 0)
			if err != nil {
				return nil, err
			}
			if m := with.(map[string]any); len(m) > 0 {
				s.With = m
			}
			s.pos.with = map[string]int{}
			for i := 0; i+1 < len(v.Content); i += 2 {
				s.pos.with[v.Content[i].Value] = v.Content[i].Line
			}
		case "concurrency":
			if s.Concurrency, err = p.int(v, name, "concurrency"); err != nil {
				return nil, err
			}
			if s.Concurrency < 0 {
				return nil, p.errf(v.Line, name, "concurrency", "must not be negative, got %d", s.Concurrency)
			}
		case "claim":
			if s.Claim, err = p.claim(s, v); err != nil {
				return nil, err
			}
		case "limit":
			if s.Limit, err = p.limit(s, v); err != nil {
				return nil, err
			}
		case "correlate":
			if s.Correlate, err = p.correlate(s, v); err != nil {
				return nil, err
			}
		case "attempts":
			if s.Attempts, err = p.int(v, name, "attempts"); err != nil {
				return nil, err
			}
			if s.Attempts < 0 {
				return nil, p.errf(v.Line, name, "attempts", "must not be negative, got %d", s.Attempts)
			}
			if s.Attempts > MaxAttemptsLimit {
				return nil, p.errf(v.Line, name, "attempts", "must be at most %d, got %d", MaxAttemptsLimit, s.Attempts)
			}
		case "timeout", "deadline":
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
				return nil, p.errf(v.Line, name, f.key, "must be a duration string such as \"30s\" or \"5m\", got %s", describe(v))
			}
			d, err := time.ParseDuration(v.Value)
			if err != nil {
				return nil, p.errf(v.Line, name, f.key, "invalid duration %q (use a Go duration such as \"30s\" or \"5m\")", v.Value)
			}
			if d < 0 {
				return nil, p.errf(v.Line, name, f.key, "must not be negative, got %s", v.Value)
			}
			if f.key == "timeout" {
				s.Timeout = Duration(d)
			} else {
				s.Deadline = Duration(d)
			}
		case "progress_weight":
			if isNull(v) {
				continue
			}
			w, err := p.float(v, name, "progress_weight")
			if err != nil {
				return nil, err
			}
			if w < 0 || w > 1 {
				return nil, p.errf(v.Line, name, "progress_weight", "must be between 0 and 1, got %s", v.Value)
			}
			if w == 0 {
				w = 0 // normalize -0
			}
			s.ProgressWeight = &w
		case "publish":
			if s.Publish, err = p.publishRules(v, name); err != nil {
				return nil, err
			}
		default:
			return nil, p.unknownField(f, name, stepFields)
		}
	}
	if !haveAction {
		return nil, p.errf(kv.kline, name, "", "missing action")
	}
	if !haveNeeds {
		return nil, p.errf(kv.kline, name, "", "missing needs; a step needs at least one event (use [start] for a first step)")
	}
	return s, nil
}

// str reads a string scalar. Null is not a string.
func (p *parser) str(n *yaml.Node, step, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", p.errf(n.Line, step, field, "must be a string, got %s", describe(n))
	}
	return n.Value, nil
}

// int reads an integer scalar; null reads as 0 (unset).
func (p *parser) int(n *yaml.Node, step, field string) (int, error) {
	if isNull(n) {
		return 0, nil
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, p.errf(n.Line, step, field, "must be an integer, got %s", describe(n))
	}
	var i int64
	if err := n.Decode(&i); err != nil {
		return 0, p.errf(n.Line, step, field, "integer %s is out of range", n.Value)
	}
	if i > math.MaxInt32 || i < math.MinInt32 {
		return 0, p.errf(n.Line, step, field, "integer %s is out of range", n.Value)
	}
	return int(i), nil
}

// float reads a number scalar.
func (p *parser) float(n *yaml.Node, step, field string) (float64, error) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return 0, p.errf(n.Line, step, field, "must be a number, got %s", describe(n))
	}
	var f float64
	if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, p.errf(n.Line, step, field, "number %s is out of range", n.Value)
	}
	return f, nil
}

// names reads a list of names (events). Null reads as an empty list.
func (p *parser) names(n *yaml.Node, step, field, kind string) ([]string, []int, error) {
	if isNull(n) {
		return nil, nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, nil, p.errf(n.Line, step, field, "must be a list of %s names, got %s", kind, describe(n))
	}
	if len(n.Content) > MaxListLen {
		return nil, nil, p.errf(n.Content[MaxListLen].Line, step, field, "%d entries; the limit is %d", len(n.Content), MaxListLen)
	}
	list := make([]string, 0, len(n.Content))
	lines := make([]int, 0, len(n.Content))
	seen := make(map[string]bool, len(n.Content))
	for _, e := range n.Content {
		s, err := p.str(e, step, field)
		if err != nil {
			return nil, nil, p.errf(e.Line, step, field, "%s names must be strings, got %s", kind, describe(e))
		}
		if msg := checkName(kind+" name", s); msg != "" {
			return nil, nil, p.errf(e.Line, step, field, "%s", msg)
		}
		if seen[s] {
			return nil, nil, p.errf(e.Line, step, field, "duplicate %s %q", kind, s)
		}
		seen[s] = true
		list = append(list, s)
		lines = append(lines, e.Line)
	}
	return list, lines, nil
}

// value converts a with: node into JSON-shaped Go values: map[string]any, []any, string, int,
// float64, bool and nil. Integers stay int so that actions and the canonical JSON see what the
// user wrote; non-finite floats are rejected because JSON cannot hold them.
func (p *parser) value(n *yaml.Node, step, field string, depth int) (any, error) {
	if depth > maxWithDepth {
		return nil, p.errf(n.Line, step, field, "nested deeper than %d levels", maxWithDepth)
	}
	switch n.Kind {
	case yaml.MappingNode:
		kvs, err := p.entries(n, step, field)
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, len(kvs))
		for _, kv := range kvs {
			if m[kv.key], err = p.value(kv.value, step, field+"."+kv.key, depth+1); err != nil {
				return nil, err
			}
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := p.value(c, step, fmt.Sprintf("%s[%d]", field, i), depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!str", "!!timestamp":
			return n.Value, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, p.errf(n.Line, step, field, "invalid boolean %q", n.Value)
			}
			return b, nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				return nil, p.errf(n.Line, step, field, "integer %s is out of range", n.Value)
			}
			return int(i), nil
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, p.errf(n.Line, step, field, "number %s is not finite or out of range", n.Value)
			}
			if f == 0 {
				f = 0 // normalize -0
			}
			return f, nil
		}
		return nil, p.errf(n.Line, step, field, "unsupported YAML tag %q", n.Tag)
	}
	return nil, p.errf(n.Line, step, field, "unsupported YAML node")
}
