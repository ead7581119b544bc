package fileset

import (
	"encoding/json"
	"testing"
)

// FuzzParsePersistentID: any input parses or is refused without a panic, and a parsed id's
// dataset part parses back to the same dataset.
func FuzzParsePersistentID(f *testing.F) {
	for _, s := range []string{"doi:10.5072/FK2/QW12ER/ZX98CV", "hdl:20.500.11111/XYZ/QQQ111", "doi:10.1/AB12CD", "doi:", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePersistentID(s)
		if err != nil {
			return
		}
		q, err := ParsePersistentID(p.Dataset())
		if err != nil || q.DatasetID != p.DatasetID || q.Shoulder != p.Shoulder || q.FileID != "" {
			t.Fatalf("%q: dataset %q parses to %+v, %v", s, p.Dataset(), q, err)
		}
	})
}

// FuzzParseFigsharePath: ids and versions that parse are numbers.
func FuzzParseFigsharePath(f *testing.F) {
	for _, s := range []string{"/articles/dataset/x/12127176/4", "/articles/x/1/1", "/articles//1/1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, v, err := ParseFigsharePath(s)
		if err == nil && (!isDigits(id) || !isDigits(v)) {
			t.Fatalf("%q: id %q version %q", s, id, v)
		}
	})
}

// FuzzParseRequest: a request that parses has a base_url and is a dataset request.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"base_url":"https://zenodo.org/record/1"}`, `{"ingest_type":"pdf","base_url":"x"}`, `null`, `[]`, `{"base_url":3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		root, err := ParseRequest(b)
		if err != nil {
			return
		}
		raw, _ := json.Marshal(root.Metadata[mdRequest])
		var r Request
		if err := json.Unmarshal(raw, &r); err != nil || r.BaseURL == "" || r.IngestType != "dataset" {
			t.Fatalf("%q parsed to %s (%v)", b, raw, err)
		}
	})
}
