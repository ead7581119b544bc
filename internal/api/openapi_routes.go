package api

import (
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// routeDoc is what the OpenAPI document tells of a route beyond its [route] entry: its
// operation id (the method name of a generated client), query parameters, request bodies and
// responses, each given as a value of the Go type the handler encodes or decodes, so the
// schemas are derived from the handlers' own types (see [schemas]).
//
// A route added to [API.routes] without an entry in routeDocs is still in the document, with
// its summary and path parameters only; TestOpenAPIDescribesEveryRoute names it until it gets
// one.
type routeDoc struct {
	// ID is the operationId: lowerCamelCase, unique.
	ID string
	// Params are the query and header parameters.
	Params []param
	// PathTypes overrides the schema of path parameters; by default {id} is a positive int64
	// and any other a string.
	PathTypes map[string]rawSchema
	// Body maps a request content type to a value of its Go type, or to a [rawSchema].
	Body map[string]any
	// BodyOptional says the request body may be empty.
	BodyOptional bool
	// Responses maps a status to a value of the JSON body's Go type, a [media] for another
	// content type, a [response] for several or for headers, or nil for no body. Errors ("default") are added to every operation.
	Responses map[int]any
	// Public marks a route that needs no bearer token.
	Public bool
}

// param is a query or header parameter.
type param struct {
	Name, In, Type, Doc string
	// Array says the parameter may repeat (?meta=a&meta=b).
	Array bool
	// Required says the request is refused without it.
	Required bool
}

// rawSchema is a schema written out, for what no Go type describes (a multipart body).
type rawSchema map[string]any

// media is a response body that is not JSON.
type media struct {
	Type   string
	Schema rawSchema
	Doc    string
	// Data, when set, is a value of the Go type of a server-sent event stream's data: it is
	// made a component, for clients to decode the events with.
	Data any
}

// response is a response with headers, or whose body comes in several content types.
type response struct {
	Doc string
	// Content maps a content type to a value of its Go type, or to a [rawSchema]; empty for
	// no body.
	Content map[string]any
	// Headers maps a response header to its description.
	Headers map[string]string
}

func query(name, typ, doc string) param { return param{Name: name, In: "query", Type: typ, Doc: doc} }

var (
	binary     = rawSchema{"type": "string", "format": "binary"}
	textSchema = rawSchema{"type": "string"}
	jsonBody   = func(v any) map[string]any { return map[string]any{"application/json": v} }
	limitParam = query("limit", "integer", "Page size; defaults to 100, at most 1000.")
)

// routeDocs documents every route of [API.routes], the worker protocol's, /healthz and /readyz, by
// "METHOD /path".
var routeDocs = map[string]routeDoc{
	"GET /v1/openapi.json": {ID: "getOpenAPI", Responses: map[int]any{200: rawSchema{"type": "object"}}},
	"GET /metrics": {ID: "getMetrics", Responses: map[int]any{200: media{Type: "text/plain",
		Schema: textSchema, Doc: "Prometheus text format (OpenMetrics and protobuf by content negotiation)"}}},
	"GET /healthz": {ID: "getHealth", Public: true, Responses: map[int]any{200: media{Type: "text/plain", Schema: textSchema}}},
	"GET /readyz": {ID: "getReady", Public: true, Responses: map[int]any{
		200: media{Type: "text/plain", Schema: textSchema, Doc: "ready"},
		503: media{Type: "text/plain", Schema: textSchema, Doc: "What keeps the server from working now, one a line (a blob store outage: since when, failed calls, the last failure)"}}},

	"GET /v1/jobs": {ID: "listJobs", Params: []param{
		query("state", "string", "Only jobs in this state: running, complete, failed or canceled; another word is a 400 (bad_request)."),
		query("workflow", "string", "Only jobs of this workflow (any version)."),
		query("q", "string", "Only jobs whose id this is, or whose workflow, key, error or metadata contains it."),
		query("created_from", "string", "Only jobs created at or after this time (RFC 3339) or day (YYYY-MM-DD, UTC)."),
		query("created_until", "string", "Only jobs created before this time (RFC 3339), or on or before this day (YYYY-MM-DD, UTC)."),
		{Name: "meta", In: "query", Type: "string", Array: true, Doc: "KEY=VALUE: only jobs whose metadata has it (a number or boolean as its JSON text); may repeat, at most 8."},
		cursorParam, limitParam},
		Responses: map[int]any{200: jobList{}}},
	"POST /v1/jobs": {ID: "createJob",
		Body: map[string]any{
			"application/json": createJobRequest{},
			"multipart/form-data": rawSchema{"type": "object", "properties": map[string]any{
				"job":  map[string]any{"type": "string", "description": "The CreateJobRequest as JSON (its paths may be left out)."},
				"file": map[string]any{"type": "array", "items": binary, "description": "The files, one root each; the part's filename is the root's name."},
			}, "required": []string{"job"}},
		},
		Responses: map[int]any{201: &jobJSON{}, 200: &jobJSON{}}},
	"GET /v1/jobs/{id}":         {ID: "getJob", Responses: map[int]any{200: &jobJSON{}}},
	"POST /v1/jobs/{id}/cancel": {ID: "cancelJob", Responses: map[int]any{200: &jobJSON{}}},
	"POST /v1/jobs/{id}/retry":  {ID: "retryJob", Responses: map[int]any{200: &jobJSON{}}},
	"GET /v1/jobs/{id}/progress": {ID: "followProgress", Responses: map[int]any{200: media{Type: "text/event-stream", Schema: textSchema,
		Doc: "Server-sent events: `event: progress` with a Progress as data whenever it changes, and `event: end` with {\"state\"} when the job ends."}}},
	"GET /v1/queues": {ID: "listQueues", Responses: map[int]any{200: queueList{}}},
	"GET /v1/audit": {ID: "listAudit", Params: []param{query("job_id", "integer", "Only the entries of this job."), cursorParam, limitParam},
		Responses: map[int]any{200: auditList{}}},
	"GET /v1/jobs/{id}/history": {ID: "jobHistory", Params: []param{cursorParam,
		query("limit", "integer", "Tasks per page (each gives its attempts); defaults to 100, at most 1000.")},
		Responses: map[int]any{200: jobHistory{}}},
	"GET /v1/jobs/{id}/items": {ID: "listItems", Params: []param{
		query("parent_id", "integer", "The parent whose children to list; 0 (the default) lists the roots."),
		cursorParam, limitParam,
		query("errors", "boolean", "Only items with an error.")},
		Responses: map[int]any{200: itemList{}}},
	"GET /v1/jobs/{id}/waits": {ID: "jobWaits", Params: []param{query("limit", "integer", "Open items read; defaults to 1000, at most 10000.")},
		Responses: map[int]any{200: waitsJSON{}}},
	"POST /v1/jobs/{id}/events": {ID: "fireEvent", Body: jsonBody(eventRequest{}), Responses: map[int]any{202: eventResult{}}},
	"GET /v1/jobs/{id}/documents": {ID: "listDocuments", Params: []param{cursorParam, limitParam},
		Responses: map[int]any{200: outputList{}}},
	"GET /v1/jobs/{id}/errors": {ID: "listErrors", Params: []param{cursorParam, limitParam},
		Responses: map[int]any{200: outputList{}}},
	"GET /v1/documents/search": {ID: "searchDocuments", Params: []param{
		query("q", "string", "The query: words, \"phrases\", OR, -word, prefix*, parentheses."),
		query("job_id", "integer", "Only this job's documents."),
		query("type", "string", "Only documents of this content type."),
		{Name: "meta", In: "query", Type: "string", Array: true, Doc: "KEY=VALUE: only documents whose metadata has it; may repeat."},
		cursorParam, query("limit", "integer", "Page size; defaults to 20, at most 1000.")},
		Responses: map[int]any{200: searchResult{}}},
	"GET /v1/items/{id}":          {ID: "getItem", Responses: map[int]any{200: &itemJSON{}}},
	"GET /v1/items/{id}/attempts": {ID: "getItemAttempts", Responses: map[int]any{200: itemHistory{}}},
	"GET /v1/items/{id}/{content}": {ID: "downloadItem",
		PathTypes: map[string]rawSchema{"content": {"type": "string", "enum": []string{"original", "pdf", "text", "thumbnail"}}},
		Responses: map[int]any{200: media{Type: "*/*", Schema: binary,
			Doc: "The bytes, with their content type (text/plain for text) and a Content-Disposition."}}},
	"POST /v1/graphs": {ID: "createGraph", Body: jsonBody(graph.Request{}),
		Responses: map[int]any{201: response{Doc: "Created: the request's id (its job's), job and links",
			Content: jsonBody(graphCreated{}), Headers: map[string]string{"Location": "The request's URL, /v1/graphs/{id}.",
				"Link": `Cartographer's rel links: </v1/graphs/{id}/status>; rel="status", </v1/graphs/{id}/result>; rel="result", </v1/graphs/{id}/logs>; rel="logs".`}}}},
	"GET /v1/graphs/{id}/status": {ID: "getGraphStatus", Responses: map[int]any{
		200: response{Doc: "The request's progress, Traverse-State as the state.", Content: jsonBody(graph.Status{}), Headers: traverseState}}},
	"GET /v1/graphs/{id}/logs": {ID: "getGraphLogs", Params: []param{cursorParam, query("limit", "integer", "Page size; defaults to 1000, at most 1000.")},
		Responses: map[int]any{200: jsonBody(graphLog{})}},
	"GET /v1/graphs/{id}":        {ID: "getGraph", Params: []param{graphFormat, graphTmpl}, Responses: graphResult},
	"GET /v1/graphs/{id}/result": {ID: "getGraphResult", Params: []param{graphFormat, graphTmpl}, Responses: graphResult},
	"DELETE /v1/graphs/{id}":     {ID: "deleteGraph", Responses: map[int]any{204: nil}},

	"POST /v1/filesets": {ID: "createFilesets", Body: jsonBody(createFilesetsRequest{}),
		Responses: map[int]any{201: &jobJSON{}, 200: &jobJSON{}}},
	"GET /v1/filesets": {ID: "listFilesets", Params: []param{
		query("status", "string", "Only results of this status (success, no-platform, …)."),
		cursorParam, limitParam},
		Responses: map[int]any{200: filesetList{}}},

	"POST /v1/sheets": {ID: "uploadSheet", Params: []param{filesDir,
		query("name", "string", "The sheet's name; defaults to sheet.csv."),
		query("custom_actions", "string", "Extra actions of every file set, separated by |."),
		{Name: "Idempotency-Key", In: "header", Type: "string", Doc: "A retried upload with the same key finds the sheet of the first."}},
		Body: sheetBody, Responses: map[int]any{201: &objects.Sheet{}}},
	"POST /v1/sheets/validate": {ID: "validateSheet", Params: []param{filesDir}, Body: sheetBody,
		Responses: map[int]any{200: sheetValidation{}}},
	"GET /v1/sheets/{id}": {ID: "getSheet", Responses: map[int]any{200: sheetJSON{}}},
	"GET /v1/sheets/{id}/rows": {ID: "listSheetRows", Params: []param{query("failed", "boolean", "Only the rows that failed.")},
		Responses: map[int]any{200: sheetRowList{}}},
	"POST /v1/sheets/{id}/approve": {ID: "approveSheet", Responses: map[int]any{202: &objects.Sheet{}}},
	"DELETE /v1/sheets/{id}":       {ID: "deleteSheet", Responses: map[int]any{200: &objects.Sheet{}}},
	"GET /v1/sheets/{id}/progress": {ID: "followSheetProgress", Responses: map[int]any{200: media{Type: "text/event-stream", Schema: textSchema,
		Data: objects.Progress{},
		Doc:  "Server-sent events: `event: progress` with a SheetProgress as data whenever it changes, and `event: end` with {\"status\"} when the sheet ends."}}},
	"POST /v1/sheets/transcoded": {ID: "fireTranscoded",
		Body: map[string]any{"application/json": rawSchema{"type": "object", "description": "A MediaConvert Job State Change (EventBridge; detail.userMetadata.file_set_id names the file set), an Elastic Transcoder notification (userMetadata.file_set_id), or either inside an SNS Notification; or an SNS SubscriptionConfirmation."},
			"text/plain": textSchema},
		Responses: map[int]any{202: &objects.Transcoded{}, 200: &objects.Transcoded{}}},
	"GET /v1/objects/{id}": {ID: "getObject",
		PathTypes: map[string]rawSchema{"id": {"type": "string", "description": "A work's accession number, or a file set's accession number or id."}},
		Responses: map[int]any{200: objectJSON{}}},
	"GET /v1/objects/{id}/history": {ID: "getObjectHistory",
		PathTypes: map[string]rawSchema{"id": {"type": "string", "description": "A work's accession number, or a file set's accession number or id."}},
		Responses: map[int]any{200: &objects.ObjectHistory{}}},

	"GET /v1/workflows": {ID: "listWorkflows", Responses: map[int]any{200: workflowList{}}},
	"POST /v1/workflows": {ID: "applyWorkflow",
		Body:      map[string]any{"application/yaml": textSchema, "application/json": rawSchema{"type": "object"}},
		Responses: map[int]any{201: &diagnosticsJSON{}, 422: invalidWorkflowJSON{}}},
	"POST /v1/workflows/validate": {ID: "validateWorkflow",
		Body:      map[string]any{"application/yaml": textSchema, "application/json": rawSchema{"type": "object"}},
		Responses: map[int]any{200: &diagnosticsJSON{}}},
	"GET /v1/workflows/{name}": {ID: "getWorkflow", Params: []param{query("version", "integer", "A version; 0 or absent: the latest.")},
		Responses: map[int]any{200: workflowJSON{}}},
	"GET /v1/workflows/{name}/graph": {ID: "getWorkflowGraph", Params: []param{
		query("version", "integer", "A version; 0 or absent: the latest."),
		{Name: "format", In: "query", Type: "string", Doc: "svg (the default) or dot."}},
		Responses: map[int]any{200: media{Type: "image/svg+xml", Schema: textSchema, Doc: "The diagram (text/vnd.graphviz with format=dot)."}}},

	// The worker protocol (shared/spec/worker-protocol.md): only polls need a (worker) token;
	// a task's URLs carry its unguessable id instead.
	"POST /v1/workers/{action}": {ID: "pollTask", Responses: map[int]any{201: workerproto.Task{}, 204: nil}},
	"GET /v1/workers/{action}/{id}": {ID: "getTask", Public: true, PathTypes: taskPath, Params: traceparent,
		Responses: map[int]any{200: workerproto.Task{}}},
	"GET /v1/workers/{action}/{id}/blob": {ID: "getTaskBlob", Public: true, PathTypes: taskPath, Params: traceparent,
		Responses: map[int]any{200: media{Type: "application/octet-stream", Schema: binary}}},
	"POST /v1/workers/{action}/{id}": {ID: "postFragments", Public: true, PathTypes: taskPath, Params: traceparent,
		Body: map[string]any{"multipart/form-data": rawSchema{"type": "object", "additionalProperties": binary,
			"description": "One part per fragment, named as the fragment (0.json, 0.blob, progress, done, …), in protocol order."}},
		Responses: map[int]any{202: nil}},
	"POST /v1/workers/{action}/{id}/{fragment}": {ID: "postFragment", Public: true, PathTypes: taskPath, Params: traceparent,
		Body:         map[string]any{"*/*": rawSchema{"type": "string", "format": "binary", "description": "The fragment's payload, of any content type; empty for done and heartbeat."}},
		BodyOptional: true, Responses: map[int]any{202: nil}},
	// The task's read port, for a built-in action a remote worker runs (docs/worker-protocol-extensions.md).
	"GET /v1/workers/{action}/{id}/task": {ID: "getActionTask", Public: true, PathTypes: taskPath, Params: traceparent,
		Responses: map[int]any{200: workerproto.ActionTask{}}},
	"POST /v1/workers/{action}/{id}/core/{query}": {ID: "readTaskCore", Public: true, PathTypes: taskPath, Params: traceparent,
		Body:      map[string]any{"application/json": rawSchema{"type": "object", "description": "The read's arguments: item_steps {item_id}, job_items {after, limit}, step_children {parent, step}, blob_size {sha256}."}},
		Responses: map[int]any{200: rawSchema{"description": "The read's answer: the task's job's rows only."}}},
	"POST /v1/workers/{action}/{id}/read/{domain}/{query}": {ID: "readTaskDomain", Public: true, PathTypes: taskPath, Params: traceparent,
		Body:      map[string]any{"application/json": rawSchema{"description": "The query's arguments, as the domain declares them."}},
		Responses: map[int]any{200: rawSchema{"description": "The query's answer, run for the task's job."}}},
	"POST /v1/workers/{action}/{id}/blobs": {ID: "putTaskBlob", Public: true, PathTypes: taskPath, Params: traceparent,
		Body:      map[string]any{"application/octet-stream": rawSchema{"type": "string", "format": "binary"}},
		Responses: map[int]any{200: blobStored{}}},
}

// blobStored is the answer of POST <task url>/blobs.
type blobStored struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// traceparent is the W3C trace context a worker may send back on a task's requests (the task's
// own, or its span's under it): the server's spans of the request are its children.
var traceparent = []param{{Name: "traceparent", In: "header", Type: "string",
	Doc: "W3C trace context; the task JSON's traceparent, or a span's under it (docs/tracing.md)."}}

// traverseState is the Cartographer header of a graph request's state.
var traverseState = map[string]string{"Traverse-State": "TRAVERSING, FORMATTING, SUCCESS or ERROR."}

// graphFormat and graphResult are a graph request's result routes' (GET /v1/graphs/{id} and its
// result rel link).
var (
	graphFormat = param{Name: "format", In: "query", Type: "string", Doc: "node, path, dot, json or template; absent: the request's format."}
	graphTmpl   = param{Name: "template", In: "query", Type: "string", Doc: "With format=template: a Go text/template over the result (docs/graph.md); absent: the request's template."}
	graphResult = map[int]any{
		200: response{Doc: "The result, Traverse-State SUCCESS: one line per node (node, text/plain), per path " +
			"(path, text/plain), a Graphviz digraph (dot) or a GraphResult (json).",
			Content: map[string]any{"application/json": graph.Result{}, "text/plain": textSchema, "text/vnd.graphviz": textSchema},
			Headers: traverseState},
		204: response{Doc: "No result yet: the traversal runs; Traverse-State says where (TRAVERSING, FORMATTING).", Headers: traverseState},
		409: response{Doc: "The request failed or was canceled: Traverse-State ERROR.", Content: jsonBody(Error{}), Headers: traverseState}}
)

var (
	filesDir  = param{Name: "files_dir", In: "query", Type: "string", Required: true, Doc: "Where the sheet's files are: a directory under a configured path root, or s3://bucket/prefix (read with the server's AWS_* credentials)."}
	sheetBody = map[string]any{"text/csv": rawSchema{"type": "string", "description": "The ingest sheet (Meadow's columns)."}}
)

var taskPath = map[string]rawSchema{"id": {"type": "string", "description": "The task's id, as in its url."}}

// workerRoutes are the worker protocol's routes, served when [Config.Workers] is set.
var workerRoutes = []struct{ Method, Path, Summary string }{
	{"POST", "/v1/workers/{action}", "Long-poll for a task of the action (201 with the task JSON, 204 none); needs a worker token"},
	{"GET", "/v1/workers/{action}/{id}", "Re-read the task (HEAD: liveness and cancel probe; 404 once canceled)"},
	{"GET", "/v1/workers/{action}/{id}/blob", "The task's input bytes"},
	{"POST", "/v1/workers/{action}/{id}", "Many fragments as one streaming multipart/form-data request"},
	{"POST", "/v1/workers/{action}/{id}/{fragment}", "One fragment (N.json, N.blob, N.txt, N-thumbnail.png|jpg, inherit-blob, progress, heartbeat, done, error; N.write.json, result.json)"},
	{"GET", "/v1/workers/{action}/{id}/task", "The task as a built-in action gets it: job, step, attempt, settings, item"},
	{"POST", "/v1/workers/{action}/{id}/core/{query}", "A read of the core's records of the task's job (item_steps, job_items, step_children) or a blob's size (blob_size); 404 not_found"},
	{"POST", "/v1/workers/{action}/{id}/read/{domain}/{query}", "A domain's read query, run for the task's job; 404 not_found, 400 bad_read"},
	{"POST", "/v1/workers/{action}/{id}/blobs", "Store a blob (a child's, a thumbnail, a preservation copy) for the task; answers its sha256 and size"},
}
