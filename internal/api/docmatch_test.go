package api_test

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/sluice-project/sluice/internal/api"
)

var docRouter = sync.OnceValues(func() (routers.Router, error) {
	for _, ct := range []string{"text/event-stream", "text/csv", "text/vnd.graphviz"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, err
	}
	return legacy.NewRouter(doc)
})

// matchDocument fails t when an answer the API gave does not match the OpenAPI document: its
// status, content type or JSON fields.
func matchDocument(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	router, err := docRouter()
	if err != nil {
		t.Fatal(err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return // a path the API does not serve: its 404 is the catalogue's
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		t.Errorf("answer %d to %s %s does not match the OpenAPI document: %v\n%.500s", resp.StatusCode, req.Method, req.URL.Path, err, body)
	}
}
