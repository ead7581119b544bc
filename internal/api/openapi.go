package api

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// openAPIDoc builds the OpenAPI 3.1 document from the route table, with the worker protocol
// described as its own tag.
func (a *API) openAPIDoc() map[string]any {
	errSchema := map[string]any{"$ref": "#/components/schemas/Error"}
	errResp := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}
	}
	paths := map[string]map[string]any{}
	add := func(method, path, summary, tag string, ok string) {
		op := map[string]any{
			"summary": summary, "tags": []string{tag},
			"responses": map[string]any{
				ok:    map[string]any{"description": "success"},
				"401": errResp("missing or invalid token"),
				"403": errResp("the token's role may not do this"),
			},
		}
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	for _, r := range a.routes() {
		add(r.Method, r.Path, r.Summary, "api", strconv.Itoa(r.Status))
	}
	add("GET", "/healthz", "Liveness (no token needed)", "api", "200")
	if a.cfg.Workers != nil {
		add("POST", "/v1/workers/{action}", "Long-poll for a task (201 task JSON, 204 none); worker token", "workers", "201")
		add("GET", "/v1/workers/{action}/{id}", "Re-read the task (HEAD: liveness and cancel probe)", "workers", "200")
		add("GET", "/v1/workers/{action}/{id}/blob", "The task's input bytes", "workers", "200")
		add("POST", "/v1/workers/{action}/{id}", "Many fragments as one streaming multipart/form-data request", "workers", "202")
		add("POST", "/v1/workers/{action}/{id}/{fragment}", "One fragment (N.json, N.blob, N.txt, N-thumbnail.png|jpg, inherit-blob, progress, heartbeat, done, error)", "workers", "202")
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Sluice API", "version": "1"},
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{"Error": map[string]any{"type": "object", "required": []string{"code", "message"},
				"properties": map[string]any{"code": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"}}}},
		},
		"security": []map[string]any{{"bearer": []string{}}},
		"paths":    paths,
	}
}

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, a.openAPIDoc())
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
