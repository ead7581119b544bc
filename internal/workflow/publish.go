package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Outcomes a step's publish rule selects with on:.
const (
	OutcomeComplete = "complete" // the task completed
	OutcomeFailed   = "failed"   // the task failed for good (no attempt left, or a permanent error)
)

// MaxPublishRules bounds the publish rules of a step or of a workflow.
const MaxPublishRules = 20

// PublishRule is one entry of a step's or a workflow's publish: list: which outcomes or events
// become messages, to which sink and subject, with which attributes. Messages are written to
// the outbox in the transaction that commits what they report (see internal/outbox).
//
// On a step, On lists outcomes ([OutcomeComplete], [OutcomeFailed]; empty means both) and
// Subject defaults to "WORKFLOW.STEP". On a workflow, On lists events (required), published
// when one of them first fires on an item, and Subject defaults to "WORKFLOW.EVENT".
type PublishRule struct {
	// Sink names a sink the node is configured with (--sink NAME=URL). Required.
	Sink    string   `json:"sink"`
	Subject string   `json:"subject,omitempty"`
	On      []string `json:"on,omitempty"`
	// Context is the message's context attribute (Meadow's "Sheet", "FileSet"); empty: none.
	Context string `json:"context,omitempty"`
	// Attributes are more attributes, constant.
	Attributes map[string]string `json:"attributes,omitempty"`
	// Keys are item metadata keys copied into attributes (a correlation key, a sheet row).
	Keys []string `json:"keys,omitempty"`
	// Body, when set, makes the message's body one value as it is instead of Sluice's envelope
	// (a consumer that reads another system's wire format): "output:KIND", the task's output of
	// that kind (a step's rule), or "metadata:KEY", the item's metadata value of that key.
	Body string `json:"body,omitempty"`
}

// BodyOutput and BodyMetadata are the prefixes of [PublishRule.Body].
const (
	BodyOutput   = "output:"
	BodyMetadata = "metadata:"
)

// subjectPattern is the syntax of subjects: dot-separated tokens usable in NATS subjects, file
// names and URLs.
var subjectPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// attrPattern is the syntax of attribute names (headers on the wire).
var attrPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// publishRules reads a publish: list. It decodes the node's JSON shape strictly (unknown fields
// are errors) and checks names.
func (p *parser) publishRules(n *yaml.Node, step string) ([]PublishRule, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n.Line, step, "publish", "must be a list of rules such as {sink: bus, on: [complete]}, got %s", describe(n))
	}
	if len(n.Content) > MaxPublishRules {
		return nil, p.errf(n.Content[MaxPublishRules].Line, step, "publish", "%d rules; the limit is %d", len(n.Content), MaxPublishRules)
	}
	var rules []PublishRule
	for i, e := range n.Content {
		field := fmt.Sprintf("publish[%d]", i)
		if e.Kind != yaml.MappingNode {
			return nil, p.errf(e.Line, step, field, "a rule must be a mapping with sink, got %s", describe(e))
		}
		v, err := p.value(e, step, field, 1)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, p.errf(e.Line, step, field, "%v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var r PublishRule
		if err := dec.Decode(&r); err != nil {
			return nil, p.errf(e.Line, step, field, "%v (fields: sink, subject, on, context, attributes, keys, body)", err)
		}
		if msg := r.check(step != ""); msg != "" {
			return nil, p.errf(e.Line, step, field, "%s", msg)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// check returns why the rule is invalid, or "".
func (r *PublishRule) check(onStep bool) string {
	if msg := checkName("sink name", r.Sink); msg != "" {
		return msg
	}
	if r.Subject != "" && (len(r.Subject) > 2*MaxNameLen || !subjectPattern.MatchString(r.Subject)) {
		return fmt.Sprintf("invalid subject %q: dot-separated tokens of letters, digits, '_' and '-'", r.Subject)
	}
	if !onStep && len(r.On) == 0 {
		return "a workflow's publish rule needs on: the events to publish"
	}
	if len(r.On) > MaxListLen {
		return fmt.Sprintf("on: %d entries; the limit is %d", len(r.On), MaxListLen)
	}
	for _, o := range r.On {
		if onStep {
			if o != OutcomeComplete && o != OutcomeFailed {
				return fmt.Sprintf("on: %q is not an outcome (complete, failed)", o)
			}
		} else if msg := checkName("event name", o); msg != "" {
			return "on: " + msg
		}
	}
	for k := range r.Attributes {
		if !attrPattern.MatchString(k) || len(k) > MaxNameLen {
			return fmt.Sprintf("attributes: invalid name %q: lowercase letters, digits, '_' and '-'", k)
		}
	}
	for _, k := range r.Keys {
		if k == "" || len(k) > MaxNameLen {
			return fmt.Sprintf("keys: invalid metadata key %q", k)
		}
	}
	if r.Body != "" {
		out, isOut := strings.CutPrefix(r.Body, BodyOutput)
		md, isMD := strings.CutPrefix(r.Body, BodyMetadata)
		switch {
		case isOut && !onStep:
			return fmt.Sprintf("body: %q: a workflow's rule publishes an event, which has no outputs (metadata:KEY)", r.Body)
		case isOut && out != "" && len(out) <= MaxNameLen, isMD && md != "" && len(md) <= MaxNameLen:
		default:
			return fmt.Sprintf("body: %q is not output:KIND or metadata:KEY", r.Body)
		}
	}
	return ""
}

// Selects reports whether the rule publishes outcome (a step's rule) or event (a workflow's).
func (r *PublishRule) Selects(outcome string) bool {
	return len(r.On) == 0 || slices.Contains(r.On, outcome)
}

// Publishes reports whether the workflow or any of its steps has publish rules.
func (d *Definition) Publishes() bool {
	if len(d.Publish) > 0 {
		return true
	}
	for _, s := range d.Steps {
		if len(s.Publish) > 0 {
			return true
		}
	}
	return false
}

func writePublish(b *bytes.Buffer, rules []PublishRule) error {
	if len(rules) == 0 {
		return nil
	}
	raw, err := json.Marshal(rules) // fixed field order; attributes' keys sorted by encoding/json
	if err != nil {
		return err
	}
	b.WriteString(`,"publish":`)
	b.Write(raw)
	return nil
}
