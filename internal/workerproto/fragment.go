package workerproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/remote"
)

// fragKind is the kind of a fragment, from its name (spec: "Fragments").
type fragKind int

const (
	fragUnknown   fragKind = iota
	fragHeader             // N.json
	fragBlob               // N.blob
	fragInherit            // inherit-blob
	fragText               // N.txt
	fragThumb              // N-thumbnail.png, N-thumbnail.jpg
	fragProgress           // progress
	fragHeartbeat          // heartbeat
	fragDone               // done
	fragError              // error
	fragWrite              // N.write.json: a domain write (an extension: docs/worker-protocol-extensions.md)
	fragResult             // result.json: a built-in action's result (an extension, as above)
)

// fragment is a parsed fragment name.
type fragment struct {
	kind      fragKind
	n         int    // the N of N.json, N.blob, N.txt, N-thumbnail.*
	thumbType string // image/png or image/jpeg
	name      string
}

// parseFragment classifies a fragment name. N is 1–8 decimal digits; anything else is unknown.
func parseFragment(name string) fragment {
	f := fragment{name: name}
	switch name {
	case "inherit-blob":
		f.kind = fragInherit
		return f
	case "progress":
		f.kind = fragProgress
		return f
	case "heartbeat":
		f.kind = fragHeartbeat
		return f
	case "done":
		f.kind = fragDone
		return f
	case "error":
		f.kind = fragError
		return f
	case "result.json":
		f.kind = fragResult
		return f
	}
	i := 0
	for i < len(name) && i < 9 && name[i] >= '0' && name[i] <= '9' {
		i++
	}
	if i == 0 || i > 8 {
		return f
	}
	n, _ := strconv.Atoi(name[:i])
	switch name[i:] {
	case ".json":
		f.kind = fragHeader
	case ".write.json":
		f.kind = fragWrite
	case ".blob":
		f.kind = fragBlob
	case ".txt":
		f.kind = fragText
	case "-thumbnail.png":
		f.kind, f.thumbType = fragThumb, "image/png"
	case "-thumbnail.jpg":
		f.kind, f.thumbType = fragThumb, "image/jpeg"
	default:
		return f
	}
	f.n = n
	return f
}

// header is the payload of N.json: the child a worker starts.
type header = remote.File

// parseHeader decodes an N.json payload. All six fields are required and typed; extra keys are
// ignored (converters often echo the whole task).
func parseHeader(b []byte) (*header, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("child JSON: %v", err)
	}
	if raw == nil {
		return nil, errors.New("child JSON: not an object")
	}
	var h header
	for _, f := range []struct {
		key string
		dst any
	}{
		{"filename", &h.Filename}, {"contentType", &h.ContentType}, {"languageCode", &h.LanguageCode},
		{"metadata", &h.Metadata}, {"wantOcr", &h.WantOcr}, {"wantSplitByPage", &h.WantSplitByPage},
	} {
		v, ok := raw[f.key]
		if !ok {
			return nil, fmt.Errorf("child JSON: missing field %q", f.key)
		}
		if string(v) == "null" {
			return nil, fmt.Errorf("child JSON: field %q is null", f.key)
		}
		// metadata.Unmarshal: the child's metadata keeps its numbers as written.
		if err := metadata.Unmarshal(v, f.dst); err != nil {
			return nil, fmt.Errorf("child JSON: field %q: %v", f.key, err)
		}
	}
	if h.Filename == "" {
		return nil, errors.New("child JSON: empty filename")
	}
	return &h, nil
}

// domainWrite is the payload of N.write.json: a write to a domain's own rows, committed with the
// task when it completes (see [engine.Domain]).
type domainWrite struct {
	Domain  string          `json:"domain"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload"`
}

// parseWrite decodes an N.write.json payload: domain and key are required strings, payload any
// JSON value (null when absent).
func parseWrite(b []byte) (*domainWrite, error) {
	var w domainWrite
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("write JSON: %v", err)
	}
	if w.Domain == "" {
		return nil, errors.New("write JSON: missing or empty field \"domain\"")
	}
	if w.Key == "" {
		return nil, errors.New("write JSON: missing or empty field \"key\"")
	}
	if len(w.Payload) == 0 {
		w.Payload = json.RawMessage("null")
	}
	return &w, nil
}

// progressCounts is the {"nProcessed":i,"nTotal":j} of a progress fragment. The counts are 64-bit:
// the reference parsed them as 32-bit and failed tasks on files over 2 GiB.
type progressCounts struct {
	NProcessed *int64 `json:"nProcessed"`
	NTotal     *int64 `json:"nTotal"`
}

func (c *progressCounts) fraction() (float64, bool) {
	if c == nil || c.NProcessed == nil || c.NTotal == nil || *c.NTotal <= 0 || *c.NProcessed < 0 {
		return 0, false
	}
	return math.Min(1, float64(*c.NProcessed)/float64(*c.NTotal)), true
}

// parseProgress decodes a progress payload: {"children":{…}}, {"bytes":{…}}, or a bare number in
// [0,1], tried in that order.
func parseProgress(b []byte) (float64, error) {
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "{") {
		var p struct {
			Children *progressCounts `json:"children"`
			Bytes    *progressCounts `json:"bytes"`
		}
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			return 0, fmt.Errorf("progress %.60q: %v", s, err)
		}
		if f, ok := p.Children.fraction(); ok {
			return f, nil
		}
		if f, ok := p.Bytes.fraction(); ok {
			return f, nil
		}
		return 0, fmt.Errorf("progress %.60q: want children or bytes with nProcessed and nTotal", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
		return 0, fmt.Errorf("progress %.60q: want a number in [0,1]", s)
	}
	return f, nil
}
