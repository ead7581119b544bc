package web

import (
	"net/http"
	"strings"
)

// proxy serves /ui/api/REST by calling the API's handler for /v1/REST with the session's token:
// the browser never holds the token, and the API's own code (streamed uploads, progress
// events, validation, downloads, role checks) answers. POSTs need the session's CSRF token in
// the X-CSRF-Token header. The worker protocol is not reachable this way.
func (w *Web) proxy(rw http.ResponseWriter, r *http.Request) error {
	rest := strings.TrimPrefix(r.URL.Path, "/ui/api/")
	if rest == "" || strings.HasPrefix(rest, "workers") || strings.Contains(rest, "..") {
		return notFoundf("no such endpoint")
	}
	s, ok := w.current(r)
	if !ok {
		return errorf(http.StatusUnauthorized, "sign in first")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !equalSecret(r.Header.Get(csrfHeader), s.csrf) {
		return errorf(http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/v1/" + rest
	r2.URL.RawPath = ""
	q := r2.URL.Query()
	q.Del("token")
	r2.URL.RawQuery = q.Encode()
	r2.RequestURI = r2.URL.RequestURI()
	r2.Header.Del("Cookie")
	r2.Header.Del(csrfHeader)
	r2.Header.Set("Authorization", "Bearer "+s.token)
	w.cfg.API.ServeHTTP(&downloadHeaders{ResponseWriter: rw, content: downloadContent(rest)}, r2)
	return nil
}

// downloadContent returns what an items/{id}/{content} path downloads, or "".
func downloadContent(rest string) string {
	parts := strings.Split(rest, "/")
	if len(parts) == 3 && parts[0] == "items" {
		return parts[2]
	}
	return ""
}

// downloadHeaders makes sure user content downloaded through the UI's origin is never rendered
// as a page of it: originals are attachments in a sandbox, text is plain text, thumbnails must
// be raster images. The API may set stricter headers; these are the floor.
type downloadHeaders struct {
	http.ResponseWriter
	content string
	wrote   bool
}

func (d *downloadHeaders) WriteHeader(status int) {
	if !d.wrote {
		d.wrote = true
		h := d.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if status == http.StatusOK {
			switch d.content {
			case "original":
				h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
				if h.Get("Content-Disposition") == "" {
					h.Set("Content-Disposition", "attachment")
				}
			case "text":
				h.Set("Content-Type", "text/plain; charset=utf-8")
				h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
			case "thumbnail":
				switch h.Get("Content-Type") {
				case "image/png", "image/jpeg", "image/gif", "image/webp":
				default:
					h.Set("Content-Type", "application/octet-stream")
					h.Set("Content-Disposition", "attachment")
				}
			case "pdf":
				// The viewer page frames the PDF (the browser's own PDF viewer): only this origin may.
				h.Set("Content-Type", "application/pdf")
				h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'self'")
				h.Set("X-Frame-Options", "SAMEORIGIN")
			}
		}
	}
	d.ResponseWriter.WriteHeader(status)
}

func (d *downloadHeaders) Write(b []byte) (int, error) {
	if !d.wrote {
		d.WriteHeader(http.StatusOK)
	}
	return d.ResponseWriter.Write(b)
}

// Flush passes flushes through, for the progress stream.
func (d *downloadHeaders) Flush() {
	if f, ok := d.ResponseWriter.(http.Flusher); ok {
		if !d.wrote {
			d.WriteHeader(http.StatusOK)
		}
		f.Flush()
	}
}

func (d *downloadHeaders) Unwrap() http.ResponseWriter { return d.ResponseWriter }
