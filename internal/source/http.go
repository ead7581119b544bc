package source

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sluice-project/sluice/internal/sink"
)

// MaxBody is the largest request body a webhook source accepts.
const MaxBody = 32 << 20

// Set is the sources a node serves over HTTP, by name. Its ServeHTTP handles
// POST /v1/sources/{name} (authenticated by the API, for admins).
type Set struct {
	Handler *Handler
	Specs   map[string]*Spec
}

// ServeHTTP turns the request into a message of the named source: the body, Sluice-Message-Id
// (or Idempotency-Key) as its id, the other headers as attributes (for filters and keys; the
// job keeps only those the source's headers= lists, never the request's credentials). It
// answers 200 with the [Outcome] once the job or event committed — a retried request with the
// same id finds the same job — 404 for an unknown source, 401 for a bad signature (a source
// with a secret), 422 for an event message without its key.
func (s *Set) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	spec, ok := s.Specs[r.PathValue("name")]
	if !ok {
		httpError(w, http.StatusNotFound, "not_found", "no such source; configure it with --source NAME=webhook:?workflow=W")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		httpError(w, http.StatusRequestEntityTooLarge, "bad_request", "body too large or unreadable")
		return
	}
	if spec.Secret != "" && !sink.Verify([]byte(spec.Secret), body, r.Header.Get(sink.HeaderSignature)) {
		httpError(w, http.StatusUnauthorized, "unauthorized", "bad or missing "+sink.HeaderSignature)
		return
	}
	m := Message{Subject: r.Header.Get(sink.HeaderSubject), Body: body, Attributes: map[string]string{}}
	for k, vs := range r.Header {
		if len(vs) > 0 {
			m.Attributes[strings.ToLower(k)] = vs[0]
		}
	}
	m.ID = r.Header.Get(sink.HeaderID)
	if m.ID == "" {
		m.ID = r.Header.Get("Idempotency-Key")
	}
	out, err := s.Handler.Handle(r.Context(), spec, m)
	if errors.Is(err, ErrNoKey) {
		httpError(w, http.StatusUnprocessableEntity, "bad_request", err.Error())
		return
	}
	if err != nil {
		log := s.Handler.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		log.Error("webhook source", "source", spec.Name, "message_id", m.ID, "error", err)
		httpError(w, http.StatusInternalServerError, "internal", "internal error; see the server log")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}
