// Package source feeds Sluice from messages: each message a source accepts becomes a job of a
// named workflow (its body as the root's metadata or as its file) or an external event fired on
// the item whose metadata holds the message's correlation key. A source is a JetStream durable
// consumer ([Consumer]) or an HTTP endpoint, POST /v1/sources/{name} ([Set.ServeHTTP]).
//
// Exactly once in effect: a message is acknowledged only after its job or event committed, and
// its job is keyed by the message's id (Nats-Msg-Id or Sluice-Message-Id, else the stream
// sequence or the body's hash), so a redelivered message finds its job instead of creating a
// second one; a repeated event is a no-op (events are a set).
package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/redact"
	"github.com/sluice-project/sluice/internal/sink"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Spec is a source's configuration, parsed from its URL ([Parse]):
//
//	nats://HOST:PORT[,HOST:PORT…]/SUBJECT?stream=S&durable=D&workflow=W[&replicas=N][&as=metadata|file][&filter.ATTR=V1,V2…][&headers=H1,H2…]
//	nats://HOST:PORT/SUBJECT?stream=S&durable=D&workflow=W&event=E&key=K[&filter.…]
//	webhook:?workflow=W[&as=…][&event=E&key=K][&secret=S][&filter.…][&headers=H1,H2…]
type Spec struct {
	Name string
	// URL is the source's URL, with secrets redacted.
	URL string
	// Server and Subject, Stream and Durable: the JetStream consumer (nats:// sources).
	// Server may name a cluster's nodes (nats://HOST:PORT,HOST:PORT,HOST:PORT); Replicas is the
	// replicas of the stream when the source creates it (replicas=, default 1).
	Server                   *url.URL
	Subject, Stream, Durable string
	Replicas                 int
	// Workflow is the workflow of the jobs (or, with Event, of the jobs searched for the item).
	Workflow string
	// As is how a job gets the body: "metadata" (a JSON object merged into the root's
	// metadata; other bodies as {"body": "…"}) or "file" (the root's file). Defaults to metadata.
	As string
	// Event, with Key, makes the message an external event fired on the item of a running job
	// of Workflow whose metadata Key equals the message's Key attribute (or body field).
	// Without Key, the body is correlated by the workflow's correlate: for the event, in every
	// running job of Workflow (a transcoder's Job State Change, by userMetadata.file_set_id).
	Event, Key string
	// Filters select messages by attribute: each named attribute must have one of the values.
	Filters map[string][]string
	// Secret, for webhook sources, is the HMAC-SHA256 key of the Sluice-Signature header.
	Secret string
	// Headers are the attributes (headers, lowercased) a job keeps in its root's
	// source_attributes: the allow list of headers=. Every other header is used for filters and
	// keys and then forgotten, so a request's credentials never reach the job's metadata. A
	// header that carries credentials ([redact.Secret]: Authorization, Cookie, *-Token, *-Key,
	// *-Secret …) is refused by [Parse] even when listed. Defaults to none.
	Headers []string
}

// Parse parses a source URL.
func Parse(name, raw string) (*Spec, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the whole URL, secrets and all.
		return nil, fmt.Errorf("source %s: %s: %w", name, redact.URL(raw), errors.Unwrap(err))
	}
	q := u.Query()
	s := &Spec{Name: name, Workflow: q.Get("workflow"), As: q.Get("as"), Event: q.Get("event"), Key: q.Get("key"),
		Secret: q.Get("secret"), Filters: map[string][]string{}}
	for k, vs := range q {
		if attr, ok := strings.CutPrefix(k, "filter."); ok {
			for _, v := range vs {
				s.Filters[strings.ToLower(attr)] = append(s.Filters[strings.ToLower(attr)], strings.Split(v, ",")...)
			}
		}
	}
	for _, v := range q["headers"] {
		for _, h := range strings.Split(v, ",") {
			h = strings.ToLower(strings.TrimSpace(h))
			if h == "" {
				continue
			}
			if redact.Secret(h) {
				return nil, fmt.Errorf("source %s: headers=%s: a header that carries credentials is never stored in a job (Authorization, Cookie, *-Token, *-Key, *-Secret …)", name, h)
			}
			if !slices.Contains(s.Headers, h) {
				s.Headers = append(s.Headers, h)
			}
		}
	}
	if s.As == "" {
		s.As = "metadata"
	}
	if s.As != "metadata" && s.As != "file" {
		return nil, fmt.Errorf("source %s: as=%q: metadata or file", name, s.As)
	}
	if s.Workflow == "" {
		return nil, fmt.Errorf("source %s: no workflow= (the workflow of its jobs)", name)
	}
	if s.Key != "" && s.Event == "" {
		return nil, fmt.Errorf("source %s: key= needs event= (the event it correlates)", name)
	}
	switch u.Scheme {
	case "nats":
		s.Subject = strings.Trim(u.Path, "/")
		s.Stream, s.Durable = q.Get("stream"), q.Get("durable")
		if s.Subject == "" || s.Stream == "" {
			return nil, fmt.Errorf("source %s: a nats source needs a subject and stream= (nats://host:4222/SUBJECT?stream=S&workflow=W)", name)
		}
		if s.Durable == "" {
			s.Durable = "sluice-" + name
		}
		if s.Replicas, err = sink.Replicas(q); err != nil {
			return nil, fmt.Errorf("source %s: %w", name, err)
		}
		server := *u
		server.Path, server.RawPath, server.RawQuery = "", "", ""
		s.Server = &server
	case "webhook":
	default:
		return nil, fmt.Errorf("source %s: unknown scheme %q (nats, webhook)", name, u.Scheme)
	}
	s.URL = redact.URL(raw)
	return s, nil
}

// Message is one message as a source received it.
type Message struct {
	// ID is the message's id; a redelivery has the same.
	ID      string
	Subject string
	// Attributes are its headers, names lowercased, credentials included: filters and keys read
	// them, and a job keeps only [Spec.Headers] of them.
	Attributes map[string]string
	Body       []byte
}

// Accepts reports whether the message passes the source's filters.
func (s *Spec) Accepts(m Message) bool {
	for attr, want := range s.Filters {
		v, ok := m.Attributes[attr]
		if !ok || !slices.Contains(want, v) {
			return false
		}
	}
	return true
}

// kept returns the attributes the source keeps ([Spec.Headers]).
func (s *Spec) kept(attrs map[string]string) map[string]string {
	out := map[string]string{}
	for _, h := range s.Headers {
		if v, ok := attrs[h]; ok {
			out[h] = v
		}
	}
	return out
}

// Outcome is what a message became.
type Outcome struct {
	// Filtered says the filters rejected the message (acknowledged, nothing done).
	Filtered bool  `json:"filtered,omitempty"`
	JobID    int64 `json:"job_id,omitempty"`
	// Created is false when the message's job existed (a redelivery).
	Created bool `json:"created,omitempty"`
	// Fired lists the items the event fired on (newly); Matched those that matched.
	Fired   []int64 `json:"fired,omitempty"`
	Matched int     `json:"matched,omitempty"`
}

// Handler turns accepted messages into jobs or events. It is safe for concurrent use.
type Handler struct {
	// Engine makes the jobs and fires the events.
	Engine *engine.Engine
	// Records reads the running jobs and their items an event message correlates with: the
	// store Engine writes.
	Records Records
	Blobs   blob.Store
	Logger  *slog.Logger
}

// Records is what a [Handler] reads to correlate an event message; a [store.Store] satisfies it.
type Records interface {
	JobListRunning(ctx context.Context) ([]*record.Job, error)
	ItemList(ctx context.Context, p store.ItemListParams) ([]*record.Item, error)
}

// JobKey returns the key of the job a source's message creates.
func JobKey(source, msgID string) string { return "source:" + source + ":" + msgID }

// Handle makes the message's job or fires its event and returns once that committed.
func (h *Handler) Handle(ctx context.Context, s *Spec, m Message) (Outcome, error) {
	if !s.Accepts(m) {
		return Outcome{Filtered: true}, nil
	}
	if m.ID == "" {
		sum := sha256.Sum256(m.Body)
		m.ID = "sha256:" + hex.EncodeToString(sum[:])
	}
	if s.Event != "" && s.Key == "" {
		return h.fireBody(ctx, s, m)
	}
	if s.Event != "" {
		return h.fire(ctx, s, m)
	}
	md := map[string]any{"source": s.Name, "source_message_id": m.ID, "source_subject": m.Subject, "source_attributes": s.kept(m.Attributes)}
	root := engine.Root{Ordinal: 0, Name: m.ID}
	if s.As == "file" {
		sha, size, err := h.Blobs.Put(ctx, bytes.NewReader(m.Body))
		if err != nil {
			return Outcome{}, fmt.Errorf("store the body of %s: %w", m.ID, err)
		}
		root.BlobSHA256, root.Size = sha, size
	} else {
		var obj map[string]any
		if metadata.Unmarshal(m.Body, &obj) == nil && obj != nil { // numbers as written: a 20-digit id stays one
			for k, v := range obj {
				if _, taken := md[k]; !taken {
					md[k] = v
				}
			}
		} else {
			md["body"] = string(m.Body)
		}
	}
	root.Metadata = md
	// Each step is idempotent: a redelivery after a crash anywhere here finds the job by its
	// key, adds the root unless it is recorded, and seals the job unless it is sealed.
	sub, err := h.Engine.Submit(ctx, engine.SubmitParams{Workflow: s.Workflow, Key: JobKey(s.Name, m.ID)})
	if err != nil {
		return Outcome{}, err
	}
	if err := sub.Add(ctx, root); err != nil {
		return Outcome{}, err
	}
	if err := sub.Seal(ctx); err != nil {
		return Outcome{}, err
	}
	return Outcome{JobID: sub.Job().ID, Created: sub.Created()}, nil
}

// fireBody fires the source's event with the message's body in every running job of its
// workflow: the workflow's correlate: for the event finds the items and lands the body's
// metadata on them. A body that correlates with nothing is acknowledged and fires nothing.
func (h *Handler) fireBody(ctx context.Context, s *Spec, m Message) (Outcome, error) {
	if !json.Valid(m.Body) {
		return Outcome{}, fmt.Errorf("event %s: the body of %s is not JSON", s.Event, m.ID)
	}
	jobs, err := h.Records.JobListRunning(ctx)
	if err != nil {
		return Outcome{}, err
	}
	var out Outcome
	for _, j := range jobs {
		if j.WorkflowName != s.Workflow {
			continue
		}
		f, err := h.Engine.Fire(ctx, engine.FireParams{JobID: j.ID, Event: s.Event, Body: m.Body})
		if _, none := errors.AsType[*engine.NoMatchError](err); none {
			continue // the message is for another job, or for none: acknowledged
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("event %s in job %d: %w", s.Event, j.ID, err)
		}
		out.Matched += len(f.Items)
		if f.Fired > 0 {
			out.Fired = append(out.Fired, f.Items...)
		}
	}
	return out, nil
}

// ErrNoKey is returned for an event message that carries no correlation key.
var ErrNoKey = errors.New("the message has no correlation key")

// fire fires the source's event on the items of running jobs of its workflow whose metadata
// key equals the message's.
func (h *Handler) fire(ctx context.Context, s *Spec, m Message) (Outcome, error) {
	want, ok := m.Attributes[strings.ToLower(s.Key)]
	if !ok {
		var obj map[string]any
		if metadata.Unmarshal(m.Body, &obj) == nil && obj[s.Key] != nil {
			want, ok = fmt.Sprint(obj[s.Key]), true
		}
	}
	if !ok {
		return Outcome{}, fmt.Errorf("%w %q (an attribute or a body field)", ErrNoKey, s.Key)
	}
	jobs, err := h.Records.JobListRunning(ctx)
	if err != nil {
		return Outcome{}, err
	}
	var out Outcome
	for _, j := range jobs {
		if j.WorkflowName != s.Workflow {
			continue
		}
		after := ""
		for {
			items, err := h.Records.ItemList(ctx, store.ItemListParams{JobID: j.ID, AfterSort: after, Limit: 1000})
			if err != nil {
				return Outcome{}, err
			}
			for _, it := range items {
				var md map[string]any
				_ = metadata.Unmarshal(it.Metadata, &md) // numbers as written: a 20-digit id matches
				if md[s.Key] == nil || fmt.Sprint(md[s.Key]) != want {
					continue
				}
				out.Matched++
				fired, err := h.Engine.FireExternal(ctx, it.ID, s.Event)
				if err != nil {
					return Outcome{}, err
				}
				if fired {
					out.Fired = append(out.Fired, it.ID)
				}
			}
			if len(items) < 1000 {
				break
			}
			after = items[len(items)-1].SortKey
		}
	}
	return out, nil
}
