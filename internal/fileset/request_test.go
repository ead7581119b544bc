package fileset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/metadata"
)

// TestRequestNumbersExact: a request's own fields and a platform's manifest extras keep their
// numbers as written — a 20-digit id and 1.50 — from the request line through the items'
// metadata (stored and decoded as the engine does) to the result, the dataset-file result and
// the metadata that result is published with.
func TestRequestNumbersExact(t *testing.T) {
	t.Parallel()
	const nums = `"big":12345678901234567890,"price":1.50`
	root, err := ParseRequest([]byte(`{"base_url":"https://zenodo.example/record/1",` + nums + `}`))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := root.Metadata[mdRequest].(map[string]any)
	if req["big"] != json.Number("12345678901234567890") || req["price"] != json.Number("1.50") {
		t.Fatalf("the root's request: %#v", req)
	}
	size := int64(5)
	item := PlatformItem{PlatformName: "zenodo", PlatformDomain: "zenodo.example", PlatformID: "1",
		Manifest: []ManifestFile{{Path: "a.txt", Size: &size, Extra: map[string]any{
			"big": json.Number("12345678901234567890"), "price": json.Number("1.50")}}}}
	// The item's metadata as a later step reads it: encoded into the store and decoded back.
	stored, err := json.Marshal(map[string]any{mdRequest: req, mdPlatform: asMap(item), mdStrategy: StrategyWebFile})
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.Decode(stored)
	if err != nil {
		t.Fatal(err)
	}
	var back PlatformItem
	if !decodeMD(md, mdPlatform, &back) || back.Manifest[0].Extra["big"] != json.Number("12345678901234567890") {
		t.Fatalf("the platform item read back: %+v", back)
	}
	kids := []fileChild{{ordinal: 0, outcome: &fileOutcome{Status: StatusSuccess, FileMeta: FileMeta{Size: size}}}}
	res, fr := compose(action.Item{Metadata: md}, kids)
	if res.Status != StatusSuccessFile || fr == nil {
		t.Fatalf("compose: %s, file result %v; want success-file with a file result", res.Status, fr)
	}
	b, _ := json.Marshal(res)
	if want := `{"base_url":"https://zenodo.example/record/1","big":12345678901234567890,"ingest_type":"dataset","price":1.50}`; string(res.Request) != want {
		t.Errorf("result's request: %s\nwant %s", res.Request, want)
	}
	if !strings.Contains(string(b), `"extra":{`+nums+`}`) {
		t.Errorf("result: %s\nwant the manifest's extra with %s", b, nums)
	}
	if want := `{"base_url":"https://zenodo.example/record/1","big":12345678901234567890,"ingest_type":"dataset-file","price":1.50}`; string(fr.Request) != want {
		t.Errorf("dataset-file request: %s\nwant %s", fr.Request, want)
	}
	if b, _ := json.Marshal(asMap(fr)); !strings.Contains(string(b), `"big":12345678901234567890,"ingest_type":"dataset-file","price":1.50`) {
		t.Errorf("dataset-file result as metadata: %s\nwant its request's numbers as written", b)
	}
}
