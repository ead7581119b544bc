package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// streamProgress answers a request with server-sent events: a "progress" event with next's
// value as JSON whenever it changed (a keep-alive comment otherwise), every ProgressInterval,
// until next says it ended — then an "end" event with the data end gives — or the client goes
// or next fails.
func (a *API) streamProgress(w http.ResponseWriter, r *http.Request, next func() (v any, ended bool, end string, err error)) error {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(a.cfg.ProgressInterval)
	defer tick.Stop()
	var last []byte
	for {
		v, ended, end, err := next()
		if err != nil {
			return nil
		}
		b, _ := json.Marshal(v)
		if string(b) != string(last) {
			if _, err := fmt.Fprintf(w, "event: progress\ndata: %s\n\n", b); err != nil {
				return nil
			}
			last = b
		} else if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
			return nil
		}
		if ended {
			_, _ = fmt.Fprintf(w, "event: end\ndata: %s\n\n", end)
		}
		if fl != nil {
			fl.Flush()
		}
		if ended {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}
