package html

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestCDPSend: a command goes over the pipe as one JSON message ended by a NUL, the document in
// it about its own size (its markup not escaped to "\u003c"), and reads back as sent.
func TestCDPSend(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	c := &cdp{w: &w}
	doc := strings.Repeat(`<p class="a">x &amp; y</p>`, 10_000) + "\u2028\x01"
	if err := c.send("s1", "Page.setDocumentContent", map[string]any{"frameId": "f", "html": doc}); err != nil {
		t.Fatal(err)
	}
	msg, ok := bytes.CutSuffix(w.Bytes(), []byte{0})
	if !ok || bytes.IndexByte(msg, 0) >= 0 || bytes.IndexByte(msg, '\n') >= 0 {
		t.Fatalf("not one message ended by a NUL: ...%q", w.Bytes()[max(0, w.Len()-20):])
	}
	if len(msg) > len(doc)+len(doc)/5 {
		t.Errorf("a %d-byte document sent in %d bytes", len(doc), len(msg))
	}
	var got struct {
		ID        int    `json:"id"`
		Method    string `json:"method"`
		SessionID string `json:"sessionId"`
		Params    struct {
			FrameID string `json:"frameId"`
			HTML    string `json:"html"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != 1 || got.Method != "Page.setDocumentContent" || got.SessionID != "s1" || got.Params.FrameID != "f" || got.Params.HTML != doc {
		t.Errorf("read back id %d, method %q, session %q, frame %q, document equal %v", got.ID, got.Method, got.SessionID, got.Params.FrameID, got.Params.HTML == doc)
	}
}
