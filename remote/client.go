// Package remote is a Go client of Sluice's worker protocol (shared/spec/worker-protocol.md,
// docs/api.md#remote-workers): a remote worker long-polls the server for a task of its action
// ([Client.Poll]), downloads the task's input ([TaskHandle.OpenBlob]) and answers with fragments
// — children as N.json and N.blob, text, thumbnails, progress, heartbeats, then done or error —
// one request each ([TaskHandle.Post]) or streamed in one multipart request ([TaskHandle.Stream]).
// The server answers 404 once the task is canceled, which every method reports as [ErrGone].
//
// It is public and stable (see the compatibility promise in the README); `sluice worker` is
// built on it.
package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/sluice-project/sluice/internal/metadata"
)

// ErrGone is returned by [TaskHandle] methods when the server answers 404: the task was canceled,
// finished or timed out, and the worker must stop working on it and poll again.
var ErrGone = errors.New("remote: task canceled, finished or timed out")

// Client talks to a Sluice server as a remote worker. The zero value is not usable: set Server.
// A Client is safe for concurrent use.
type Client struct {
	// Server is the poll URL base, such as "http://127.0.0.1:7080/v1/workers".
	Server string
	// Token is a worker token, sent as `Authorization: Bearer` on poll requests.
	Token string
	// HTTP is the client used. Defaults to a client with no timeout (a multipart POST may stream
	// for hours; cancel with the context instead).
	HTTP *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{}
}

// Poll long-polls for a task of the action. It returns nil and no error when the server had none
// for its long-poll period (204): poll again.
func (c *Client) Poll(ctx context.Context, actionName string) (*TaskHandle, error) {
	u := strings.TrimSuffix(c.Server, "/") + "/" + url.PathEscape(actionName)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, http.NoBody)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("User-Agent", defaultAgent)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusCreated:
		var t TaskHandle
		// Numbers stay json.Number: the item's metadata comes back as the user gave it.
		if err := metadata.Decoder(resp.Body).Decode(&t.Task); err != nil {
			return nil, fmt.Errorf("poll %s: decode task: %w", u, err)
		}
		t.c = c
		return &t, nil
	default:
		return nil, fmt.Errorf("poll %s: %s: %s", u, resp.Status, readSome(resp.Body))
	}
}

func readSome(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return strings.TrimSpace(string(b))
}

// TaskHandle is a task handed to this worker, with methods to answer it.
type TaskHandle struct {
	Task
	c *Client
}

// header sets the request's traceparent header from [Task.Traceparent].
func (t *TaskHandle) header(req *http.Request) {
	if t.Traceparent != "" {
		req.Header.Set("Traceparent", t.Traceparent)
	}
}

// OpenBlob downloads the task's input bytes; the caller closes the reader.
func (t *TaskHandle) OpenBlob(ctx context.Context) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.Blob.URL, nil)
	if err != nil {
		return nil, err
	}
	t.header(req)
	resp, err := t.c.http().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		return nil, ErrGone
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, fmt.Errorf("download blob: %s: %s", resp.Status, readSome(resp.Body))
	}
	return resp.Body, nil
}

// Alive sends HEAD to the task URL: it keeps the task alive and returns [ErrGone] once it was
// canceled.
func (t *TaskHandle) Alive(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, t.URL, nil)
	if err != nil {
		return err
	}
	t.header(req)
	resp, err := t.c.http().Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return status(resp, http.StatusOK)
}

func status(resp *http.Response, want int) error {
	switch resp.StatusCode {
	case want:
		return nil
	case http.StatusNotFound:
		return ErrGone
	}
	return fmt.Errorf("%s %s: %s", resp.Request.Method, resp.Request.URL.Redacted(), resp.Status)
}

// Post sends one fragment in its own request and waits until the server applied it.
func (t *TaskHandle) Post(ctx context.Context, fragment string, body io.Reader) error {
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/"+fragment, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	t.header(req)
	resp, err := t.c.http().Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return status(resp, http.StatusAccepted)
}

// PostJSON sends a fragment whose payload is v as JSON (N.json, progress).
func (t *TaskHandle) PostJSON(ctx context.Context, fragment string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.Post(ctx, fragment, bytes.NewReader(b))
}

// Stream starts one streaming multipart POST; add parts with [Stream.Part] and end it with
// [Stream.Close], which returns the server's answer. Only one may be open per task.
func (t *TaskHandle) Stream(ctx context.Context) *Stream {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	b := make([]byte, 25)
	_, _ = rand.Read(b)
	_ = mw.SetBoundary(fmt.Sprintf("%x", b))
	s := &Stream{pw: pw, mw: mw, done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, pr)
	if err != nil {
		s.err = err
		close(s.done)
		return s
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	t.header(req)
	go func() {
		defer close(s.done)
		resp, err := t.c.http().Do(req)
		if err != nil {
			s.err = err
			pr.CloseWithError(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		s.err = status(resp, http.StatusAccepted)
		// An early answer (404 on cancel) must unblock the writer.
		pr.CloseWithError(s.errOr(ErrGone))
	}()
	return s
}

// Stream is one streaming multipart POST of fragments. Its methods are not safe for concurrent use.
type Stream struct {
	pw   *io.PipeWriter
	mw   *multipart.Writer
	done chan struct{}
	err  error
}

func (s *Stream) errOr(def error) error {
	if s.err != nil {
		return s.err
	}
	return def
}

// Part streams one fragment. It returns the server's answer (such as [ErrGone]) if the server
// ended the request early.
func (s *Stream) Part(name string, body io.Reader) error {
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{`form-data; name="` + name + `"`}
	w, err := s.mw.CreatePart(h)
	if err == nil && body != nil {
		_, err = io.Copy(w, body)
	}
	if err != nil {
		// Either the server answered early (the pipe's reader is closed) or body failed: end the
		// request either way and report the server's answer when there is one.
		s.pw.CloseWithError(err)
		<-s.done
		return s.errOr(err)
	}
	return nil
}

// Close ends the stream and returns the server's answer: nil for 202, [ErrGone] for 404.
func (s *Stream) Close() error {
	if err := s.mw.Close(); err != nil {
		s.pw.CloseWithError(err)
	} else {
		s.pw.Close()
	}
	<-s.done
	return s.err
}

// Abort cuts the stream off mid-way, as a killed worker would.
func (s *Stream) Abort() {
	s.pw.CloseWithError(errors.New("aborted"))
	<-s.done
}

// Task is the task JSON of the protocol: what a poll answers with 201 and a GET of the task URL
// returns.
type Task struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// File describes the task's item: its name, detected content type and options.
	File
	Blob TaskBlob `json:"blob"`
	// Traceparent is the W3C trace context of the task's attempt on the server (also sent as the
	// response's traceparent header), when the server traces. The TaskHandle's requests send it
	// back as their traceparent header; a worker that traces sets it to its own span's, so the
	// server's spans of its fragments are children of the worker's span.
	Traceparent string `json:"traceparent,omitempty"`
}

// TaskBlob locates a task's input bytes.
type TaskBlob struct {
	URL    string `json:"url"`
	NBytes int64  `json:"nBytes"`
	SHA1   string `json:"sha1"`
}

// File is a file as the protocol describes it: the task's item in the task JSON, and the payload
// of an N.json fragment, which starts the task's next child (the server requires all six
// fields there).
type File struct {
	Filename        string         `json:"filename"`
	ContentType     string         `json:"contentType"`
	LanguageCode    string         `json:"languageCode"`
	Metadata        map[string]any `json:"metadata"`
	WantOcr         bool           `json:"wantOcr"`
	WantSplitByPage bool           `json:"wantSplitByPage"`
}

// defaultAgent is the User-Agent of a [Client] that sets none: it names the host and process,
// so that the server tells apart two workers sharing a token and an address.
var defaultAgent = func() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("sluice-worker (%s; pid %d)", host, os.Getpid())
}()
