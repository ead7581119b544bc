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
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/converter"
	"github.com/sluice-project/sluice/internal/sandbox"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// maxPDF caps the PDF Chromium may hand back.
const maxPDF = 512 << 20

// loadWait bounds the wait for the document's load event before printing anyway.
const loadWait = 10 * time.Second

// render prints the document to PDF with a headless Chromium of its own (a cold run): started
// for it, in the converter sandbox, and ended once it is printed. See [chrome] for how.
func render(ctx context.Context, r *converter.Runner, browser, doc string) (pdf []byte, blocked int, err error) {
	lim := r.Limits
	if lim.Timeout <= 0 {
		lim.Timeout = converter.DefaultTimeout
	}
	deadline := time.Now().Add(lim.Timeout)
	ch, err := openChrome(ctx, r, browser)
	if err != nil {
		return nil, 0, err
	}
	defer ch.close()
	return ch.render(ctx, doc, time.Until(deadline), r.Heartbeat)
}

// chrome is one headless Chromium in the converter sandbox, driven over its DevTools pipe
// (--remote-debugging-pipe: descriptors 3 and 4, no port, no file). Each document is printed in
// a browser context of its own, made for it and disposed of once it is printed (see
// [cdp.print]): no cookie, storage, cache or page of one document is there for the next. The
// document is never a file Chromium opens: it is handed over with Page.setDocumentContent into
// an about:blank page, with JavaScript disabled, and every request the page makes is refused
// through the Fetch domain except data: URLs — so neither file:// nor the network can reach the
// PDF, whatever the document says. Chromium itself keeps its own sandbox inside Sluice's.
//
// A chrome is used by one goroutine at a time.
type chrome struct {
	proc   *subprocess.Process
	cdp    *cdp
	cmdW   *os.File // the commands pipe, our end
	resR   *os.File // the responses pipe, our end
	stderr *tailWriter
	tmp    string // the short directory made for an unsandboxed Chromium, removed by close
}

// openChrome starts Chromium with r's limits in r.Dir and waits until it answers, at most r's
// time limit. Where the kernel denies Chromium its own sandbox (no user namespaces for nobody),
// it starts it without: Sluice's sandbox still holds it.
func openChrome(ctx context.Context, r *converter.Runner, browser string) (*chrome, error) {
	ch, err := launch(ctx, r, browser, false)
	if err != nil && strings.Contains(err.Error(), "No usable sandbox") && ctx.Err() == nil {
		ch, err = launch(ctx, r, browser, true)
	}
	return ch, err
}

func launch(ctx context.Context, r *converter.Runner, browser string, noSandbox bool) (*chrome, error) {
	// Chromium's profile and TMPDIR must be short paths: it puts Unix sockets there, and a
	// socket path over 107 bytes (easily reached under a data dir in a deep folder) makes it
	// crash. In the sandbox, /tmp is its own; without it, a short dir of ours.
	short, tmp := "/tmp", ""
	if sandbox.CurrentMode() == sandbox.Off {
		d, err := os.MkdirTemp("", "sluice-chromium-")
		if err != nil {
			return nil, err
		}
		short, tmp = d, d
	}
	rr := &converter.Runner{Limits: r.Limits, Dir: r.Dir, Env: append(append([]string(nil), r.Env...), "TMPDIR="+short)}
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
		removeTmp(tmp)
		return nil, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		removeTmp(tmp)
		return nil, err
	}
	stderr := &tailWriter{max: 64 << 10}
	proc, err := rr.Start(ctx, browser, args, []*os.File{cmdR, resW}, stderr)
	// Chromium holds its own copies: ours closed, the reader sees EOF when Chromium is gone.
	cmdR.Close()
	resW.Close()
	if err != nil {
		cmdW.Close()
		resR.Close()
		removeTmp(tmp)
		return nil, err
	}
	ch := &chrome{proc: proc, cdp: &cdp{w: cmdW, r: bufio.NewReaderSize(resR, 1<<16)}, cmdW: cmdW, resR: resR, stderr: stderr, tmp: tmp}
	lim := r.Limits
	if lim.Timeout <= 0 {
		lim.Timeout = converter.DefaultTimeout
	}
	err = ch.guard(ctx, lim.Timeout, nil, func() error {
		return ch.cdp.call("", "Browser.getVersion", nil, nil)
	})
	if err != nil {
		ch.close()
		return nil, err
	}
	return ch, nil
}

func removeTmp(dir string) {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// render prints doc to PDF in a browser context of its own, within limit. It returns the
// number of requests refused. After an error the chrome must be closed.
func (ch *chrome) render(ctx context.Context, doc string, limit time.Duration, heartbeat func()) (pdf []byte, blocked int, err error) {
	err = ch.guard(ctx, limit, heartbeat, func() error {
		var err error
		pdf, err = ch.cdp.print(doc)
		return err
	})
	return pdf, ch.cdp.blocked, err
}

// leftover returns what the last document left in Chromium once its browser context was
// disposed of — a page or a worker of that context, or a browser context at all (each document
// makes its own and disposes of it) — or "" when it left nothing: a sign that the document got
// further than printing lets it. Chromium's own pages in its default context (its first page,
// its user-interface pages, made when it sees fit) are not the document's and do not count.
func (ch *chrome) leftover(ctx context.Context, limit time.Duration) string {
	var targets []targetInfo
	var contexts []string
	err := ch.guard(ctx, limit, nil, func() error {
		var err error
		if targets, err = ch.cdp.targets(); err != nil {
			return err
		}
		var res struct {
			IDs []string `json:"browserContextIds"`
		}
		err = ch.cdp.call("", "Target.getBrowserContexts", nil, &res)
		contexts = res.IDs
		return err
	})
	if err != nil {
		return err.Error()
	}
	for _, t := range targets {
		if t.Context == ch.cdp.context {
			return fmt.Sprintf("a %s outlived its browser context: %s", t.Type, t.URL)
		}
	}
	if len(contexts) > 0 {
		return fmt.Sprintf("%d browser contexts left behind", len(contexts))
	}
	return ""
}

// guard runs fn, which talks to Chromium, and kills Chromium should fn take longer than limit
// or ctx end first: a blocked read then ends with the pipe. heartbeat, when set, is called
// every 10 s meanwhile. It words fn's error for users: a time limit, a crash, or what went
// wrong on the pipe with what Chromium said.
func (ch *chrome) guard(ctx context.Context, limit time.Duration, heartbeat func(), fn func() error) error {
	stop, stopped := make(chan struct{}), make(chan struct{})
	timedOut := false
	go func() {
		defer close(stopped)
		t := time.NewTimer(limit)
		defer t.Stop()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if heartbeat != nil {
					heartbeat()
				}
			case <-t.C:
				timedOut = true
				ch.proc.Stop()
				return
			case <-ctx.Done():
				ch.proc.Stop()
				return
			}
		}
	}()
	err := fn()
	close(stop)
	<-stopped
	if err == nil {
		return nil
	}
	switch {
	case timedOut:
		return action.Permanentf("chromium timed out after %s", limit)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	select {
	case <-ch.proc.Done():
		// Chromium ended on its own: say how.
		if perr := ch.proc.Err(); perr != nil {
			var ee *subprocess.ExitError
			if errors.As(perr, &ee) && ee.Stderr == "" {
				ee.Stderr = ch.stderr.String()
			}
			return converter.Failure("render html", perr)
		}
	default:
	}
	if msg := converter.CleanMessage(ch.stderr.String()); msg != "" {
		err = fmt.Errorf("%w (%s)", err, msg)
	}
	return fmt.Errorf("render html: chromium: %w", err)
}

// closeGrace is how long Chromium is given to end once asked to, before its sandbox is killed.
const closeGrace = 5 * time.Second

// close asks Chromium to end, kills its whole sandbox should it not within closeGrace (its
// profile is in the sandbox's own /tmp), and releases the pipes. It waits until Chromium is
// gone. Chromium ending on its own is not only tidier: the CPU time of a process killed with
// its pid namespace is never counted in Sluice's children's (what time(1) reports).
func (ch *chrome) close() {
	select {
	case <-ch.proc.Done():
	default:
		if ch.cdp.send("", "Browser.close", nil) == nil {
			t := time.NewTimer(closeGrace)
			select {
			case <-ch.proc.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	ch.proc.Stop()
	ch.cmdW.Close()
	ch.resR.Close()
	removeTmp(ch.tmp)
}

// tailWriter keeps the last max bytes written to it. It is safe for concurrent use.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// cdp speaks the Chrome DevTools Protocol over the pipe: NUL-terminated JSON messages.
type cdp struct {
	w       io.Writer
	r       *bufio.Reader
	id      int
	session string
	loaded  bool
	blocked int
	// context is the browser context of the last document printed.
	context string
	// scripts leaves JavaScript on: only tests set it, to show what a document could leave
	// behind if it ran code.
	scripts bool
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
	// One buffer, written as it is: the document (Page.setDocumentContent) can be tens of
	// megabytes, which json.Marshal would hold twice more, its "<" and ">" escaped to six
	// bytes each.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return err
	}
	msg := b.Bytes()
	msg[len(msg)-1] = 0 // the newline Encode ends with: a message ends with a NUL
	_, err := c.w.Write(msg)
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

// targetInfo is what Target.getTargets says of a page or worker.
type targetInfo struct {
	Type    string `json:"type"`
	URL     string `json:"url"`
	Context string `json:"browserContextId"`
}

// targets lists Chromium's targets (pages, workers).
func (c *cdp) targets() ([]targetInfo, error) {
	var res struct {
		Infos []targetInfo `json:"targetInfos"`
	}
	err := c.call("", "Target.getTargets", nil, &res)
	return res.Infos, err
}

// print prints doc in a new browser context (Chromium's incognito profile: cookies, storage and
// cache of its own, in memory), which it disposes of afterwards, its page with it.
func (c *cdp) print(doc string) ([]byte, error) {
	c.loaded, c.blocked = false, 0
	var bc struct {
		ID string `json:"browserContextId"`
	}
	if err := c.call("", "Target.createBrowserContext", nil, &bc); err != nil {
		return nil, err
	}
	c.context = bc.ID
	pdf, err := c.printIn(bc.ID, doc)
	if derr := c.call("", "Target.disposeBrowserContext", map[string]any{"browserContextId": bc.ID}, nil); err == nil && derr != nil {
		return nil, derr
	}
	return pdf, err
}

func (c *cdp) printIn(browserContext, doc string) ([]byte, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := c.call("", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": browserContext}, &target); err != nil {
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	s := att.SessionID
	if err := c.call(s, "Emulation.setScriptExecutionDisabled", map[string]any{"value": !c.scripts}, nil); err != nil {
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
