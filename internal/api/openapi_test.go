package api

import (
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIDescribesEveryRoute checks that routeDocs documents every route the API serves —
// a route added without its entry is named here — and nothing else.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	served := map[string]bool{"GET /healthz": true, "GET /readyz": true}
	for _, r := range (&API{}).routes() {
		served[r.Method+" "+r.Path] = true
	}
	for _, r := range workerRoutes {
		served[r.Method+" "+r.Path] = true
	}
	ids := map[string]string{}
	for key := range served {
		doc, ok := routeDocs[key]
		if !ok {
			t.Errorf("%s has no entry in routeDocs (internal/api/openapi_routes.go): give it an ID, its query parameters, request body and responses", key)
			continue
		}
		if doc.ID == "" || len(doc.Responses) == 0 {
			t.Errorf("%s: routeDocs entry without an ID or responses", key)
		}
		if other, dup := ids[doc.ID]; dup {
			t.Errorf("operation id %q of %s is also %s's", doc.ID, key, other)
		}
		ids[doc.ID] = key
	}
	for key := range routeDocs {
		if !served[key] {
			t.Errorf("routeDocs documents %s, which is not served", key)
		}
	}
}

// TestOpenAPIValidates loads the document with kin-openapi and validates it: the references
// resolve, the schemas are well formed, every operation has an id.
func TestOpenAPIValidates(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Job", "Progress", "Item", "JobList", "ItemList", "OutputList", "CreateJobRequest",
		"EventRequest", "EventResult", "Workflow", "WorkflowList", "Diagnostics", "Diagnostic", "SearchResult", "WorkerTask", "Error"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s among %v", name, slices.Sorted(mapKeys(doc.Components.Schemas)))
		}
	}
	job := doc.Components.Schemas["Job"].Value
	for _, f := range []string{"id", "workflow", "state", "created_at", "progress", "metadata"} {
		if job.Properties[f] == nil {
			t.Errorf("Job has no property %s", f)
		}
	}
	if !slices.Contains(job.Required, "id") || slices.Contains(job.Required, "finished_at") {
		t.Errorf("Job requires %v: want id, not finished_at (omitempty)", job.Required)
	}
	op := doc.Paths.Find("/v1/jobs").Post
	if op.OperationID != "createJob" || op.RequestBody.Value.Content.Get("multipart/form-data") == nil ||
		op.RequestBody.Value.Content.Get("application/json") == nil {
		t.Errorf("POST /v1/jobs: operation %q without both request bodies", op.OperationID)
	}
	if p := doc.Paths.Find("/v1/jobs").Get.Parameters.GetByInAndName("query", "limit"); p == nil || p.Schema.Value.Type.Is("integer") == false {
		t.Errorf("GET /v1/jobs: no integer limit parameter: %+v", p)
	}
}

// TestOpenAPIGraphAndSheetRoutes checks what the routeDoc kinds beyond one JSON body describe:
// a response header without a body (a graph request's 204 and its Traverse-State), a response
// of several content types, a text/csv request body and a progress stream's data component.
func TestOpenAPIGraphAndSheetRoutes(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	get := doc.Paths.Find("/v1/graphs/{id}").Get
	if get.OperationID != "getGraph" {
		t.Errorf("GET /v1/graphs/{id} is %q, want getGraph", get.OperationID)
	}
	for _, status := range []int{200, 204, 409} {
		r := get.Responses.Status(status)
		if r == nil || r.Value.Headers["Traverse-State"] == nil {
			t.Errorf("getGraph %d: no Traverse-State header: %+v", status, r)
		}
	}
	if c := get.Responses.Status(204).Value.Content; len(c) != 0 {
		t.Errorf("getGraph 204 has a body: %v", slices.Sorted(mapKeys(c)))
	}
	ok := get.Responses.Status(200).Value.Content
	if j := ok.Get("application/json"); j == nil || j.Schema.Ref != "#/components/schemas/GraphResult" || ok.Get("text/vnd.graphviz") == nil {
		t.Errorf("getGraph 200: want a GraphResult as JSON and a text/vnd.graphviz body, have %v", slices.Sorted(mapKeys(ok)))
	}
	up := doc.Paths.Find("/v1/sheets").Post
	if up.RequestBody.Value.Content.Get("text/csv") == nil || up.Parameters.GetByInAndName("query", "files_dir") == nil {
		t.Errorf("POST /v1/sheets: want a text/csv body and a files_dir parameter")
	}
	for _, name := range []string{"SheetProgress", "Progress", "GraphRequest", "FilesetRow", "SheetRow", "Object"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s", name)
		}
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
