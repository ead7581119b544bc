package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// OpenAPI returns the OpenAPI 3.1 document of the API with the worker protocol, as served at
// /v1/openapi.json: every operation's parameters, request bodies and responses, with schemas
// derived from the handlers' Go types. The client in package client is generated from it.
func OpenAPI() []byte {
	b, err := json.MarshalIndent((&API{}).openAPIDoc(true), "", "  ")
	if err != nil {
		panic(err) // the document is made of maps, strings and slices
	}
	return append(b, '\n')
}

// openAPIDoc builds the OpenAPI 3.1 document from the route table and routeDocs, with the
// worker protocol (when served) under its own tag.
func (a *API) openAPIDoc(workers bool) map[string]any {
	s := newSchemas()
	errSchema := s.of(Error{})
	paths := map[string]map[string]any{}
	add := func(method, path, summary, tag string, ok int) {
		doc, documented := routeDocs[method+" "+path]
		op := map[string]any{"summary": summary, "tags": []string{tag}}
		if doc.ID == "" {
			doc.ID = operationID(method, path)
		}
		op["operationId"] = doc.ID
		if doc.Public {
			op["security"] = []map[string]any{}
		}
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			sch := rawSchema{"type": "string"}
			if m[1] == "id" {
				sch = rawSchema{"type": "integer", "format": "int64", "minimum": 1}
			}
			if t, ok := doc.PathTypes[m[1]]; ok {
				sch = t
			}
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": sch})
		}
		for _, p := range doc.Params {
			sch := map[string]any{"type": p.Type}
			if p.Type == "integer" {
				sch["format"] = "int64"
			}
			if p.Array {
				sch = map[string]any{"type": "array", "items": sch}
			}
			pm := map[string]any{"name": p.Name, "in": p.In, "description": p.Doc, "schema": sch}
			if p.Required {
				pm["required"] = true
			}
			params = append(params, pm)
		}
		if params != nil {
			op["parameters"] = params
		}
		if len(doc.Body) > 0 {
			op["requestBody"] = map[string]any{"required": !doc.BodyOptional, "content": contentOf(s, doc.Body)}
		}
		responses := map[string]any{
			"default": map[string]any{"description": "An error from the catalogue (docs/api.md)",
				"content": map[string]any{"application/json": map[string]any{"schema": errSchema}}},
		}
		if !documented {
			responses[strconv.Itoa(ok)] = map[string]any{"description": "success"}
		}
		for status, v := range doc.Responses {
			resp := map[string]any{"description": http.StatusText(status)}
			switch v := v.(type) {
			case nil:
			case media:
				if v.Doc != "" {
					resp["description"] = v.Doc
				}
				resp["content"] = map[string]any{v.Type: map[string]any{"schema": v.Schema}}
				if v.Data != nil {
					s.of(v.Data)
				}
			case response:
				if v.Doc != "" {
					resp["description"] = v.Doc
				}
				if len(v.Content) > 0 {
					resp["content"] = contentOf(s, v.Content)
				}
				if len(v.Headers) > 0 {
					headers := map[string]any{}
					for name, doc := range v.Headers {
						headers[name] = map[string]any{"description": doc, "schema": map[string]any{"type": "string"}}
					}
					resp["headers"] = headers
				}
			default:
				resp["content"] = map[string]any{"application/json": map[string]any{"schema": schemaOf(s, v)}}
			}
			responses[strconv.Itoa(status)] = resp
		}
		op["responses"] = responses
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	for _, r := range a.routes() {
		add(r.Method, r.Path, r.Summary, "api", r.Status)
	}
	add("GET", "/healthz", "Liveness (no token needed)", "api", 200)
	add("GET", "/readyz", "Readiness (no token needed)", "api", 200)
	if workers {
		for _, r := range workerRoutes {
			add(r.Method, r.Path, r.Summary, "workers", 200)
		}
	}
	// The progress stream's data is not described by its text/event-stream response.
	s.of(progressJSON{})
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Sluice API", "version": "1",
			"description": "Sluice's HTTP API (docs/api.md) and the worker protocol (shared/spec/worker-protocol.md)."},
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas":         s.comps,
		},
		"security": []map[string]any{{"bearer": []string{}}},
		"paths":    paths,
	}
}

// contentOf is the content of a request body or response: each content type's schema.
func contentOf(s *schemas, byType map[string]any) map[string]any {
	content := map[string]any{}
	for ct, v := range byType {
		content[ct] = map[string]any{"schema": schemaOf(s, v)}
	}
	return content
}

// schemaOf is the schema of a routeDoc body or response value: a rawSchema as written,
// anything else derived from its Go type.
func schemaOf(s *schemas, v any) map[string]any {
	if r, ok := v.(rawSchema); ok {
		return r
	}
	return s.of(v)
}

// operationID makes an operation id of a route routeDocs does not name:
// "GET /v1/graphs/{id}" is "getGraphsId".
func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, part := range strings.Split(strings.TrimPrefix(path, "/v1"), "/") {
		part = strings.Trim(part, "{}")
		for _, w := range strings.FieldsFunc(part, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, a.openAPIDoc(a.cfg.Workers != nil))
	return nil
}

// Routes lists the API's routes as "METHOD /path", as the OpenAPI document must describe them.
func (a *API) Routes() []string {
	var out []string
	for _, r := range a.routes() {
		out = append(out, r.Method+" "+r.Path)
	}
	out = append(out, "GET /healthz")
	return out
}
