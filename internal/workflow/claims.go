package workflow

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/when"
)

// Claim scopes.
const (
	ScopeJob          = "job"          // tasks of one job share a key
	ScopeInstallation = "installation" // tasks of every job of the store share a key
)

// Claim is a step's keyed claim (claim or park): of the tasks of the step whose items render
// the same key, the first to run claims it and runs its action; the others park — no lease, no
// polling — until it finishes. When it completes, its result (metadata, outputs, outcome events,
// text, content type) is recorded with the claim and each parked task completes with it without
// running its action, firing the step's success events and Reused; a later task with the key
// (in the claim's scope) completes the same way at once. When the claimer fails for good (or is
// canceled) the claim is dropped and the parked tasks run again, one of them claiming the key.
type Claim struct {
	// Key is a [when.Template] over the item: "{{metadata.package}}@{{metadata.version}}".
	Key string `json:"key"`
	// Scope is ScopeJob (the default) or ScopeInstallation.
	Scope string `json:"scope,omitempty"`
	// Reused are events fired on the items whose task took the claimer's result instead of
	// running (Cartographer's AVOIDED), on top of the step's success events.
	Reused []string `json:"reused,omitempty"`
}

// ScopeOrDefault returns the claim's scope, ScopeJob when unset.
func (c *Claim) ScopeOrDefault() string {
	if c.Scope == "" {
		return ScopeJob
	}
	return c.Scope
}

// Limit bounds the step's tasks per key, across every process of the store: at most
// Concurrency running at once, and starts at most Rate apart. A task over the limit is put back
// (snoozed, its attempt not spent) until a slot or its start time comes.
type Limit struct {
	// Key is a [when.Template] over the item: "{{metadata.host}}".
	Key string `json:"key"`
	// Concurrency is the most tasks of the key running at once; 0: no bound.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate bounds how often a task of the key starts; zero: no bound.
	Rate Rate `json:"rate,omitzero"`
}

// Rate is N starts per period, written "10/s", "30/m", "100/h" or "5/10s". Starts are spaced
// evenly, Per/N apart: there is no burst.
type Rate struct {
	N   int
	Per time.Duration
}

// IsZero reports whether the rate is unset.
func (r Rate) IsZero() bool { return r.N == 0 }

// Interval is the least time between two starts.
func (r Rate) Interval() time.Duration {
	if r.N <= 0 {
		return 0
	}
	return r.Per / time.Duration(r.N)
}

// String writes the rate as it is parsed.
func (r Rate) String() string {
	unit := time.Duration(r.Per).String()
	switch r.Per {
	case time.Second:
		unit = "s"
	case time.Minute:
		unit = "m"
	case time.Hour:
		unit = "h"
	}
	return strconv.Itoa(r.N) + "/" + unit
}

// ParseRate reads "N/s", "N/m", "N/h" or "N/DURATION".
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf("invalid rate %q (use N/s, N/m, N/h or N/DURATION, such as \"10/s\")", s)
	}
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || count <= 0 || count > 1_000_000 {
		return Rate{}, fmt.Errorf("invalid rate %q: the count must be an integer from 1 to 1000000", s)
	}
	var per time.Duration
	switch unit = strings.TrimSpace(unit); unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		if per, err = time.ParseDuration(unit); err != nil || per <= 0 {
			return Rate{}, fmt.Errorf("invalid rate %q (use N/s, N/m, N/h or N/DURATION, such as \"10/s\")", s)
		}
	}
	return Rate{N: count, Per: per}, nil
}

// MarshalJSON writes the rate as a string such as "10/s".
func (r Rate) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(r.String())), nil }

// Correlation says how an external event's body finds the items it fires on, and what of the
// body lands in their metadata.
type Correlation struct {
	// Path locates the correlation value in the body: keys separated by dots, an integer
	// indexing a list ("detail.userMetadata.file_set_id"). A string that holds JSON is entered
	// as the value it encodes, so "Message.detail.id" reads into an SNS envelope's Message.
	Path string `json:"path"`
	// Key is the metadata key whose value must equal the body's value at Path.
	Key string `json:"key"`
	// Metadata maps metadata keys to paths in the body: the values merged into each item's
	// metadata as the event fires (keys the item has already are kept).
	Metadata map[string]string `json:"metadata,omitempty"`
}

var (
	claimFields       = []string{"key", "scope", "reused"}
	limitFields       = []string{"key", "concurrency", "rate"}
	correlationFields = []string{"path", "key", "metadata"}
)

// MaxPathLen is the longest correlation path.
const MaxPathLen = 500

// mapping checks that n is a mapping and returns its entries, recording their lines under
// prefix in the step's positions.
func (p *parser) mapping(s *Step, n *yaml.Node, field, what string) ([]keyValue, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n.Line, s.Name, field, "must be a mapping (%s), got %s", what, describe(n))
	}
	kvs, err := p.entries(n, s.Name, field)
	if err != nil {
		return nil, err
	}
	for _, kv := range kvs {
		s.pos.fields[field+"."+kv.key] = kv.value.Line
	}
	return kvs, nil
}

func (p *parser) claim(s *Step, n *yaml.Node) (*Claim, error) {
	kvs, err := p.mapping(s, n, "claim", "key, scope")
	if err != nil {
		return nil, err
	}
	c := &Claim{}
	for _, kv := range kvs {
		switch kv.key {
		case "key":
			if c.Key, err = p.str(kv.value, s.Name, "claim.key"); err != nil {
				return nil, err
			}
		case "scope":
			if c.Scope, err = p.str(kv.value, s.Name, "claim.scope"); err != nil {
				return nil, err
			}
		case "reused":
			list, lines, err := p.names(kv.value, s.Name, "claim.reused", "event")
			if err != nil {
				return nil, err
			}
			c.Reused, s.pos.lists["claim.reused"] = list, lines
		default:
			return nil, p.unknownField(kv, s.Name, claimFields)
		}
	}
	if c.Key == "" {
		return nil, p.errf(n.Line, s.Name, "claim", "missing key (a template such as \"{{metadata.package}}\")")
	}
	return c, nil
}

func (p *parser) limit(s *Step, n *yaml.Node) (*Limit, error) {
	kvs, err := p.mapping(s, n, "limit", "key, concurrency, rate")
	if err != nil {
		return nil, err
	}
	l := &Limit{}
	for _, kv := range kvs {
		switch kv.key {
		case "key":
			if l.Key, err = p.str(kv.value, s.Name, "limit.key"); err != nil {
				return nil, err
			}
		case "concurrency":
			if l.Concurrency, err = p.int(kv.value, s.Name, "limit.concurrency"); err != nil {
				return nil, err
			}
			if l.Concurrency < 0 {
				return nil, p.errf(kv.value.Line, s.Name, "limit.concurrency", "must not be negative, got %d", l.Concurrency)
			}
		case "rate":
			str, err := p.str(kv.value, s.Name, "limit.rate")
			if err != nil {
				return nil, err
			}
			if l.Rate, err = ParseRate(str); err != nil {
				return nil, p.errf(kv.value.Line, s.Name, "limit.rate", "%s", err)
			}
		default:
			return nil, p.unknownField(kv, s.Name, limitFields)
		}
	}
	if l.Key == "" {
		return nil, p.errf(n.Line, s.Name, "limit", "missing key (a template such as \"{{metadata.host}}\")")
	}
	if l.Concurrency == 0 && l.Rate.IsZero() {
		return nil, p.errf(n.Line, s.Name, "limit", "a limit needs concurrency, rate or both")
	}
	return l, nil
}

func (p *parser) correlate(s *Step, n *yaml.Node) (map[string]*Correlation, error) {
	kvs, err := p.mapping(s, n, "correlate", "external event to path and key")
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Correlation, len(kvs))
	for _, ev := range kvs {
		field := "correlate." + ev.key
		ckvs, err := p.mapping(s, ev.value, field, "path, key, metadata")
		if err != nil {
			return nil, err
		}
		c := &Correlation{}
		for _, kv := range ckvs {
			switch kv.key {
			case "path":
				if c.Path, err = p.str(kv.value, s.Name, field+".path"); err != nil {
					return nil, err
				}
			case "key":
				if c.Key, err = p.str(kv.value, s.Name, field+".key"); err != nil {
					return nil, err
				}
			case "metadata":
				mkvs, err := p.mapping(s, kv.value, field+".metadata", "metadata key to path")
				if err != nil {
					return nil, err
				}
				c.Metadata = make(map[string]string, len(mkvs))
				for _, m := range mkvs {
					if c.Metadata[m.key], err = p.str(m.value, s.Name, field+".metadata."+m.key); err != nil {
						return nil, err
					}
				}
			default:
				return nil, p.unknownField(kv, s.Name, correlationFields)
			}
		}
		if c.Path == "" || c.Key == "" {
			return nil, p.errf(ev.value.Line, s.Name, field, "needs path (where the body holds the value) and key (the metadata key it matches)")
		}
		out[ev.key] = c
	}
	return out, nil
}

// keyed checks claims, limits and correlations: templates, scopes, paths and events.
func (v *validator) keyed() {
	for _, s := range v.def.Steps {
		if s == nil {
			continue
		}
		if c := s.Claim; c != nil {
			if _, err := when.ParseTemplate(c.Key); err != nil {
				v.errorf(s.fieldLine("claim.key"), s.Name, "claim.key", "invalid template %q: %s", c.Key, err)
			}
			if c.Scope != "" && c.Scope != ScopeJob && c.Scope != ScopeInstallation {
				v.errorf(s.fieldLine("claim.scope"), s.Name, "claim.scope", "unknown scope %q (job or installation)", c.Scope)
			}
			for j, e := range c.Reused {
				if msg := checkName("event name", e); msg != "" {
					v.errorf(s.entryLine("claim.reused", j), s.Name, "claim.reused", "%s", msg)
				}
			}
		}
		if l := s.Limit; l != nil {
			if l.Key == "" {
				v.errorf(s.fieldLine("limit"), s.Name, "limit", "missing key")
			} else if _, err := when.ParseTemplate(l.Key); err != nil {
				v.errorf(s.fieldLine("limit.key"), s.Name, "limit.key", "invalid template %q: %s", l.Key, err)
			}
			if l.Concurrency < 0 || (l.Concurrency == 0 && l.Rate.IsZero()) {
				v.errorf(s.fieldLine("limit"), s.Name, "limit", "a limit needs a positive concurrency, a rate or both")
			}
		}
		for _, ev := range slices.Sorted(maps.Keys(s.Correlate)) {
			c := s.Correlate[ev]
			field := "correlate." + ev
			if !v.def.IsExternal(ev) {
				v.errorf(s.fieldLine(field), s.Name, field, "%q is not a declared external event", ev)
			} else if !slices.Contains(s.Needs, ev) {
				v.errorf(s.fieldLine(field), s.Name, field, "the step does not need %q", ev)
			}
			if err := CheckPath(c.Path); err != nil {
				v.errorf(s.fieldLine(field+".path"), s.Name, field+".path", "%s", err)
			}
			if c.Key == "" {
				v.errorf(s.fieldLine(field+".key"), s.Name, field+".key", "missing key")
			}
			for _, k := range slices.Sorted(maps.Keys(c.Metadata)) {
				if err := CheckPath(c.Metadata[k]); err != nil {
					v.errorf(s.fieldLine(field+".metadata."+k), s.Name, field+".metadata."+k, "%s", err)
				}
			}
		}
	}
}

// CheckPath checks a correlation path: keys separated by dots, none empty.
func CheckPath(path string) error {
	if path == "" {
		return fmt.Errorf("empty path")
	}
	if len(path) > MaxPathLen {
		return fmt.Errorf("path is %d bytes; the limit is %d", len(path), MaxPathLen)
	}
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			return fmt.Errorf("invalid path %q: an empty key (use keys separated by single dots)", path)
		}
	}
	return nil
}

// writeKeyed writes a step's claim, limit and correlate in canonical form.
func writeKeyed(b *bytes.Buffer, s *Step) {
	if c := s.Claim; c != nil {
		b.WriteString(`,"claim":{"key":`)
		writeString(b, c.Key)
		if c.Scope != "" {
			b.WriteString(`,"scope":`)
			writeString(b, c.Scope)
		}
		if len(c.Reused) > 0 {
			b.WriteString(`,"reused":`)
			writeStrings(b, c.Reused)
		}
		b.WriteByte('}')
	}
	if l := s.Limit; l != nil {
		b.WriteString(`,"limit":{"key":`)
		writeString(b, l.Key)
		if l.Concurrency != 0 {
			fmt.Fprintf(b, `,"concurrency":%d`, l.Concurrency)
		}
		if !l.Rate.IsZero() {
			b.WriteString(`,"rate":`)
			writeString(b, l.Rate.String())
		}
		b.WriteByte('}')
	}
	if len(s.Correlate) > 0 {
		b.WriteString(`,"correlate":{`)
		for i, ev := range slices.Sorted(maps.Keys(s.Correlate)) {
			c := s.Correlate[ev]
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, ev)
			b.WriteString(`:{"path":`)
			writeString(b, c.Path)
			b.WriteString(`,"key":`)
			writeString(b, c.Key)
			if len(c.Metadata) > 0 {
				b.WriteString(`,"metadata":{`)
				for j, k := range slices.Sorted(maps.Keys(c.Metadata)) {
					if j > 0 {
						b.WriteByte(',')
					}
					writeString(b, k)
					b.WriteByte(':')
					writeString(b, c.Metadata[k])
				}
				b.WriteByte('}')
			}
			b.WriteByte('}')
		}
		b.WriteByte('}')
	}
}

// Correlations returns the correlations the steps declare for an external event, in step
// order, without duplicates.
func (d *Definition) Correlations(event string) []*Correlation {
	var out []*Correlation
	for _, s := range d.Steps {
		if c := s.Correlate[event]; c != nil && !slices.ContainsFunc(out, func(o *Correlation) bool {
			return o.Path == c.Path && o.Key == c.Key && fmt.Sprint(o.Metadata) == fmt.Sprint(c.Metadata)
		}) {
			out = append(out, c)
		}
	}
	return out
}

// PathValue returns the value at path in a decoded JSON body (see [Correlation.Path]): keys
// separated by dots, an integer indexing a list, and a string that holds JSON entered as the
// value it encodes (an SNS envelope's Message). ok is false when the path leads nowhere.
func PathValue(body any, path string) (v any, ok bool) {
	v = body
	for _, seg := range strings.Split(path, ".") {
		if s, isStr := v.(string); isStr {
			var inner any // numbers as written: a 20-digit key matches as it was sent
			if metadata.Unmarshal([]byte(s), &inner) != nil {
				return nil, false
			}
			v = inner
		}
		switch x := v.(type) {
		case map[string]any:
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}
