package fileset

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/pathroot"
)

// WorkflowName is the built-in workflow the fileset actions make up.
const WorkflowName = "fileset"

// ParseRequest checks one request (a JSON object, as a line of a requests file) and returns it
// as a root of a fileset job: the object, as given, in the root's metadata.request. Its errors
// say what is wrong: not an object, no base_url or one that is not an http(s):// URL, an
// ingest_type other than dataset.
func ParseRequest(line []byte) (engine.Root, error) {
	var obj map[string]any
	if err := metadata.Unmarshal(line, &obj); err != nil || obj == nil {
		if err == nil {
			err = errors.New("null")
		}
		return engine.Root{}, fmt.Errorf("not a JSON object: %v", err)
	}
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		return engine.Root{}, fmt.Errorf("not a request: %v", err)
	}
	if r.BaseURL == "" {
		return engine.Root{}, errors.New("no base_url")
	}
	// A landing page is fetched over HTTP: a path or a file:// URL is refused here, with the
	// classification every location a request names goes through.
	if l, err := pathroot.Classify(r.BaseURL); err != nil {
		return engine.Root{}, fmt.Errorf("base_url %w", err)
	} else if l.Kind != pathroot.HTTP {
		return engine.Root{}, fmt.Errorf("base_url %q: a dataset's landing page is an http(s):// URL", r.BaseURL)
	}
	if r.IngestType == "" {
		obj["ingest_type"] = "dataset"
	} else if r.IngestType != "dataset" {
		return engine.Root{}, fmt.Errorf("ingest_type %q: only dataset requests are fileset requests", r.IngestType)
	}
	name := r.BaseURL
	if len(name) > 1000 {
		name = name[:1000]
	}
	return engine.Root{Name: name, Metadata: map[string]any{mdRequest: obj}}, nil
}
