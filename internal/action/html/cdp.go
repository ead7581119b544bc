package html

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/sandbox"
)

// maxPDF caps the PDF Chromium may hand back.
const maxPDF = 512 << 20

// loadWait bounds the wait for the document's load event before printing anyway.
const loadWait = 10 * time.Second

// render prints the document to PDF with headless Chromium, driven over its DevTools pipe
// (--remote-debugging-pipe: descriptors 3 and 4, no port, no file). The document is never a
// file Chromium opens: it is handed over with Page.setDocumentContent into an about:blank page,
// with JavaScript disabled, and every request the page makes is refused through the Fetch
// domain except data: URLs — so neither file:// nor the network can reach the PDF, whatever the
// document says. Chromium itself runs in the converter sandbox, with its own sandbox on.
func render(ctx context.Context, r *converter.Runner, browser, doc string) (pdf []byte, blocked int, err error) {
	pdf, blocked, err = renderOnce(ctx, r, browser, doc, false)
	if err != nil && strings.Contains(err.Error(), "No usable sandbox") && ctx.Err() == nil {
		// The kernel denies Chromium's own sandbox (no user namespaces for nobody): Sluice's
		// sandbox still holds it.
		pdf, blocked, err = renderOnce(ctx, r, browser, doc, true)
	}
	return pdf, blocked, err
}

func renderOnce(ctx context.Context, r *converter.Runner, browser, doc string, noSandbox bool) (pdf []byte, blocked int, err error) {
	// Chromium's profile and TMPDIR must be short paths: it puts Unix sockets there, and a
	// socket path over 107 bytes (easily reached under a data dir in a deep folder) makes it
	// crash. In the sandbox, /tmp is its own; without it, a short dir of ours.
	short := "/tmp"
	if sandbox.CurrentMode() == sandbox.Off {
		d, err := os.MkdirTemp("", "sluice-chromium-")
		if err != nil {
			return nil, 0, err
		}
		defer os.RemoveAll(d)
		short = d
	}
	rr := &converter.Runner{Limits: r.Limits, Dir: r.Dir, Heartbeat: r.Heartbeat,
		Env: append(append([]string(nil), r.Env...), "TMPDIR="+short)}
	args := []string{
		"--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--mute-audio", "--disable-breakpad", "--disable-crash-reporter",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=socks5://127.0.0.1:9",
		"--remote-debugging-pipe", "--user-data-dir=" + short + "/sluice-chromium-profile",
	}
	if noSandbox || os.Geteuid() == 0 && sandbox.CurrentMode() == sandbox.Off {
		// Chromium refuses to run as root with its own sandbox; in Sluice's sandbox it runs
		// as nobody and keeps it.
		args = append(args, "--no-sandbox")
	}
	args = append(args, "about:blank")

	// cmdR is Chromium's end of the commands pipe (its fd 3), resW its end of the responses (4).
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, 0, err
	}
	defer cmdW.Close()
	defer resR.Close()
	var stderr bytes.Buffer
	lw := &capped{w: &stderr, n: 64 << 10}
	done := make(chan error, 1)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		err := rr.RunFiles(runCtx, browser, args, []*os.File{cmdR, resW}, lw)
		cmdR.Close()
		resW.Close() // the reader sees EOF when Chromium is gone
		done <- err
	}()
	c := &cdp{w: cmdW, r: bufio.NewReaderSize(resR, 1<<16)}
	pdf, err = c.print(doc)
	blocked = c.blocked
	if err == nil {
		_ = c.send("", "Browser.close", nil)
	} else {
		cancel()
	}
	cmdW.Close()
	runErr := <-done
	if err != nil {
		if runErr != nil {
			return nil, blocked, converter.Failure("render html", runErr)
		}
		msg := converter.CleanMessage(stderr.String())
		if msg != "" {
			err = fmt.Errorf("%w (%s)", err, msg)
		}
		return nil, blocked, fmt.Errorf("render html: chromium: %w", err)
	}
	return pdf, blocked, nil
}

type capped struct {
	w io.Writer
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.n > 0 {
		k := min(len(p), c.n)
		c.w.Write(p[:k])
		c.n -= k
	}
	return len(p), nil
}

// cdp speaks the Chrome DevTools Protocol over the pipe: NUL-terminated JSON messages.
type cdp struct {
	w       io.Writer
	r       *bufio.Reader
	id      int
	session string
	loaded  bool
	blocked int
}

type cdpMsg struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (c *cdp) send(session, method string, params any) error {
	c.id++
	m := map[string]any{"id": c.id, "method": method}
	if params != nil {
		m["params"] = params
	}
	if session != "" {
		m["sessionId"] = session
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = c.w.Write(append(b, 0))
	return err
}

// call sends a command and reads messages until its answer, handling the events that come
// meanwhile: every paused request is refused unless it is a data: URL.
func (c *cdp) call(session, method string, params, result any) error {
	if err := c.send(session, method, params); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	want := c.id
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if m.ID == want {
			if m.Error != nil {
				return fmt.Errorf("%s: %s", method, m.Error.Message)
			}
			if result != nil {
				return json.Unmarshal(m.Result, result)
			}
			return nil
		}
	}
}

// read reads one message, answering events on the way.
func (c *cdp) read() (*cdpMsg, error) {
	b, err := c.r.ReadSlice(0)
	var buf []byte
	for errors.Is(err, bufio.ErrBufferFull) {
		buf = append(buf, b...)
		if len(buf) > 2*maxPDF {
			return nil, errors.New("devtools message too large")
		}
		b, err = c.r.ReadSlice(0)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("chromium exited")
		}
		return nil, err
	}
	buf = append(buf, b[:len(b)-1]...)
	var m cdpMsg
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, fmt.Errorf("devtools message: %w", err)
	}
	switch m.Method {
	case "Fetch.requestPaused":
		var p struct {
			RequestID string `json:"requestId"`
			Request   struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, err
		}
		if strings.HasPrefix(p.Request.URL, "data:") {
			err = c.send(m.SessionID, "Fetch.continueRequest", map[string]any{"requestId": p.RequestID})
		} else {
			c.blocked++
			err = c.send(m.SessionID, "Fetch.failRequest", map[string]any{"requestId": p.RequestID, "errorReason": "AccessDenied"})
		}
		if err != nil {
			return nil, err
		}
	case "Page.loadEventFired", "Page.frameStoppedLoading":
		c.loaded = true
	}
	return &m, nil
}

func (c *cdp) print(doc string) ([]byte, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := c.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	s := att.SessionID
	if err := c.call(s, "Emulation.setScriptExecutionDisabled", map[string]any{"value": true}, nil); err != nil {
		return nil, err
	}
	if err := c.call(s, "Fetch.enable", map[string]any{"patterns": []map[string]any{{"urlPattern": "*"}}}, nil); err != nil {
		return nil, err
	}
	if err := c.call(s, "Page.enable", nil, nil); err != nil {
		return nil, err
	}
	var tree struct {
		FrameTree struct {
			Frame struct {
				ID string `json:"id"`
			} `json:"frame"`
		} `json:"frameTree"`
	}
	if err := c.call(s, "Page.getFrameTree", nil, &tree); err != nil {
		return nil, err
	}
	c.loaded = false
	if err := c.call(s, "Page.setDocumentContent", map[string]any{"frameId": tree.FrameTree.Frame.ID, "html": doc}, nil); err != nil {
		return nil, err
	}
	// Wait for the load event (images given as data: URLs decoded), bounded: a document whose
	// load never ends is printed as it stands.
	deadline := time.Now().Add(loadWait)
	for !c.loaded && time.Now().Before(deadline) {
		// A cheap round trip lets pending events arrive.
		if err := c.call(s, "Page.getFrameTree", nil, nil); err != nil {
			break
		}
		if !c.loaded {
			time.Sleep(20 * time.Millisecond)
		}
	}
	var printed struct {
		Stream string `json:"stream"`
	}
	if err := c.call(s, "Page.printToPDF", map[string]any{
		"printBackground": true, "preferCSSPageSize": true, "transferMode": "ReturnAsStream",
		"displayHeaderFooter": false,
	}, &printed); err != nil {
		return nil, err
	}
	var pdf bytes.Buffer
	for {
		var chunk struct {
			Data          string `json:"data"`
			EOF           bool   `json:"eof"`
			Base64Encoded bool   `json:"base64Encoded"`
		}
		if err := c.call(s, "IO.read", map[string]any{"handle": printed.Stream, "size": 1 << 20}, &chunk); err != nil {
			return nil, err
		}
		b := []byte(chunk.Data)
		if chunk.Base64Encoded {
			var err error
			if b, err = base64.StdEncoding.DecodeString(chunk.Data); err != nil {
				return nil, fmt.Errorf("IO.read: %w", err)
			}
		}
		pdf.Write(b)
		if pdf.Len() > maxPDF {
			return nil, fmt.Errorf("pdf larger than %d bytes", maxPDF)
		}
		if chunk.EOF {
			break
		}
	}
	_ = c.call(s, "IO.close", map[string]any{"handle": printed.Stream}, nil)
	if !bytes.HasPrefix(pdf.Bytes(), []byte("%PDF-")) {
		return nil, errors.New("no pdf written")
	}
	return pdf.Bytes(), nil
}
